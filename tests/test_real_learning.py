"""The pure parts of benchmarks/real_learning.py (no model runs): the band screen's selection,
the train / held-out split, the standard error of a gain, the last line."""

import math

import pytest

from benchmarks.real_learning_report import (
    gain_se,
    in_band,
    last_line,
    seeds_se,
    split_band,
    stage_shares,
    verdict,
)


def test_band_keeps_learnable_problems_only():
    rates = {"never": 0.0, "low": 0.1, "mid": 0.5, "high": 0.9, "always": 1.0, "rare": 0.05}
    assert in_band(rates, 0.1, 0.9) == ["low", "mid", "high"]


@pytest.mark.parametrize("n", [2, 5, 12, 40])
def test_split_is_disjoint_and_within_the_band(n):
    ids = [f"p{i}" for i in range(n)]
    train, held = split_band(ids, 8, 8, seed=3)
    assert not set(train) & set(held)
    assert set(train) | set(held) <= set(ids)
    assert train and held
    assert len(train) <= 8 and len(held) <= 8


def test_split_is_fixed_by_its_seed():
    ids = [f"p{i}" for i in range(20)]
    assert split_band(ids, 6, 4, seed=1) == split_band(ids, 6, 4, seed=1)
    assert split_band(ids, 6, 4, seed=1) != split_band(ids, 6, 4, seed=2)


def test_split_refuses_a_band_too_small():
    with pytest.raises(ValueError, match="in the band"):
        split_band(["only"], 4, 4, seed=0)


def test_gain_se_is_the_two_binomial_errors_combined():
    n = 24
    se = gain_se(0.25, 0.5, n)
    assert se == pytest.approx(math.sqrt(0.25 * 0.75 / n + 0.5 * 0.5 / n))
    assert gain_se(0.0, 1.0, n) == 0.0  # no spread, no error
    assert seeds_se([se, se]) == pytest.approx(se / math.sqrt(2))


def test_last_line_format():
    line = last_line({"real_gain": 0.0833, "direct": -0.04, "trl": 0.125, "se": 0.1,
                      "valid": 0.271})
    assert line == "real_gain=0.083 direct=-0.040 trl=0.125 se=0.100 valid=0.271"
    assert last_line({}) == "real_gain=nan direct=nan trl=nan se=nan valid=nan"


def test_verdict_says_missed_for_a_failed_arm():
    assert verdict("direct", None, None).endswith("missed")
    assert verdict("chain", 0.3, 0.1).endswith("met")


def test_stage_shares_count_only_kept_discriminator_tests():
    chains = [{"stage": 1, "role": r, "finish_reason": f}
              for r, f in (("generator", "eos"), ("generator", "length"),
                           ("discriminator", "stop"))]
    tests = [{"step": 1, "stage": 1, "problem_id": "p", "sample_idx": 0, "test_id": t,
              "origin": "discriminator", "parse_status": st, "is_duplicate": d}
             for t, st, d in (("a", "ok", False), ("b", "dropped", False), ("c", "ok", True))]
    refs = [{"step": 1, "problem_id": "p", "sample_idx": 0, "test_id": "a",
             "target_kind": "reference", "status": "failed"}]
    assert stage_shares(chains, tests, refs)[1] == {
        "gen_ended": 0.5, "tests_ended": 1.0, "tests_parsed": 1.0, "tests_valid": 0.0}
