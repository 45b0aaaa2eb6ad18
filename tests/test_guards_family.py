"""The ``guards`` family: three independent ways to be wrong, each exposed by one stage's focus,
disjoint splits, and a warm start that is imperfect as designed (problems/guards.py)."""

from __future__ import annotations

import math

import pytest

from problems import load_problems
from problems.family import edge_tests, hidden_tests, warm_chain
from problems.guards import (
    BUG_FOCUS,
    FOCUS,
    WARM_FOCUS,
    WARM_MISS,
    all_params,
    params_of,
    problem_id,
    split_params,
)
from rewards import SampleOutcome, TestVerdict
from rewards.functions import progressive


def _passes(program: str, tests: list[str]) -> list[bool]:
    """Each test's verdict on ``program`` (trusted, generated code: run in-process)."""
    out = []
    for t in tests:
        env: dict = {}
        exec(program, env)
        try:
            exec(t, env)
            out.append(True)
        except AssertionError:
            out.append(False)
    return out


def test_splits_are_disjoint_cover_every_combination_and_ids_round_trip():
    splits = {s: {problem_id(p) for p in split_params(s)} for s in ("warmstart", "train",
                                                                   "heldout")}
    assert sum(map(len, splits.values())) == len(all_params()) == 3312
    assert not (splits["train"] & splits["heldout"] or splits["warmstart"] & splits["heldout"]
                or splits["warmstart"] & splits["train"])
    for p in split_params("heldout")[:200]:
        assert params_of(problem_id(p)) == p
    for bad in ("guards-a2", "piecewise-a2-b0-c0-zero", "guards-a2-b0-c0-d6-t10-zero-below"):
        with pytest.raises(ValueError, match="not a guards family problem id"):
            params_of(bad)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_references_pass_and_baseline_tests_never_touch_a_guard(split):
    for p in load_problems(f"family:guards:{split}", limit=60):
        q = params_of(p.id)
        program = p.preamble + p.reference_solution
        assert all(_passes(program, list(p.baseline_tests) + hidden_tests(p.id)))
        # the baseline passes every wrong variant: only the discriminator can tell them apart
        for wrong in (q.code(edge=False), q.code(bound=False), q.code(flipped=True)):
            assert all(_passes(p.preamble + wrong, list(p.baseline_tests)))
            assert not all(_passes(p.preamble + wrong, edge_tests(p.id)))


def test_each_way_of_being_wrong_is_exposed_by_its_stage_focus_test():
    """The table of the module docstring: the edge test catches a missing edge guard, the
    boundary test an off-by-one boundary, the large input a missing bound guard; the main-path
    test (stage 1's focus) catches none of them."""
    for p in split_params("train")[:80]:
        wrongs = {"edge": p.code(edge=False), "flipped": p.code(flipped=True),
                  "bound": p.code(bound=False)}
        for bug, code in wrongs.items():
            program = p.preamble() + code
            focus = BUG_FOCUS[bug]
            assert _passes(program, [p.written_test(focus)]) == [False], (p.key, bug)
            assert _passes(program, [p.written_test("main")]) == [True]
        assert all(_passes(p.preamble() + p.code(), [p.written_test(f) for f in
                                                     ("main", *FOCUS.values())]))


def test_warm_chain_is_imperfect_as_designed_and_its_code_follows_its_reasoning():
    warm = split_params("warmstart")
    n = len(warm)
    counts = {"edge": 0, "bound": 0, "focused": 0}
    for p in warm:
        texts, tests = warm_chain(problem_id(p))
        code = texts[-1]
        has_edge, has_bound = p.edge_code() in code, "return d" in code
        counts["edge"] += not has_edge
        counts["bound"] += not has_bound
        # the chain decides the code: stage 2 names the edge guard iff the code has it,
        # stage 3 the bound guard, stage 4 what happens at the boundary
        assert (p.edge_text() in texts[1]) == has_edge
        assert ("return d" in texts[2]) == has_bound
        if has_bound:
            at_t = "d" if ">= t" in code else "x * a + b"
            assert texts[3].endswith(f"the answer is {at_t}.")
        assert all(len(ts) == 1 for ts in tests)
        assert all(_passes(p.preamble() + p.code(), [t for ts in tests for t in ts]))
        counts["focused"] += sum(ts != tests[0] for ts in tests[1:4])
    # binomial counts within 4 standard deviations of the designed shares
    for count, trials, share in ((counts["edge"], n, WARM_MISS), (counts["bound"], n, WARM_MISS),
                                 (counts["focused"], 3 * n, WARM_FOCUS)):
        assert abs(count - trials * share) < 4 * math.sqrt(trials * share * (1 - share)), \
            (count, trials, share)


def _verdict(key: str, stage: int, *, valid: bool = True, passed: bool = True,
             kills: tuple[bool, ...] = (False, False), duplicate: bool = False) -> TestVerdict:
    return TestVerdict(key, "baseline" if stage == 0 else "discriminator", stage, duplicate,
                       valid, "passed" if passed else "failed", kills)


def test_progressive_pays_a_stage_only_for_what_the_earlier_stages_missed():
    base = _verdict("b", 0, kills=(True, False))              # the baseline kills mutant 0
    s1 = _verdict("s1", 1, kills=(True, False))               # stage 1 adds nothing to it
    edge = _verdict("edge", 2, passed=False, kills=(False, True))  # stage 2 finds both bugs
    suite = (base, s1, edge)
    at = {k: progressive(SampleOutcome(True, suite, 2, stage=k), _cfg()) for k in (1, 2, 3)}
    assert at[1] == 0.0                      # what the baseline already kills earns nothing
    assert at[2] == pytest.approx(0.25)      # (mutant 1: 1/2 + the code: 1) / 2, validity 1/3
    assert at[3] == 0.0                      # stage 3 wrote no test
    repeat = _verdict("edge", 3, duplicate=True)
    later = _verdict("edge2", 3, passed=False, kills=(False, True))
    for stage3 in ((repeat,), (later,)):     # a copy, or a new test finding the same bugs
        assert progressive(SampleOutcome(True, (*suite, *stage3), 2, stage=3), _cfg()) == 0.0
    wrong = _verdict("bad", 2, valid=False, passed=False, kills=(True, True))
    assert progressive(SampleOutcome(True, (base, wrong), 2, stage=2), _cfg()) == 0.0


def _cfg():
    from configs.schema import RewardConfig
    return RewardConfig()


def test_the_ideal_chain_is_the_warm_chain_without_its_flaws():
    """What a fitted base learns (pipeline/basefit.py): every chain right and every stage 2-4
    test its focus; the same problems' flawed chains differ only where a flaw was drawn."""
    warm = split_params("warmstart")[:200]
    flawed = 0
    for p in warm:
        texts, tests = warm_chain(problem_id(p), ideal=True)
        code = texts[-1].removeprefix("```python\n").removesuffix("\n```")
        assert code == p.code().strip()
        assert p.edge_text() in texts[1] and p.bound_text() in texts[2]
        assert tests[1:4] == [[p.written_test(FOCUS[k])] for k in (2, 3, 4)]
        assert tests[0] == tests[4] == [p.written_test("main")]
        assert all(_passes(p.preamble() + p.code(), [t for ts in tests for t in ts]))
        flawed_texts, _ = warm_chain(problem_id(p))
        flawed += flawed_texts != texts
        if texts[-1] == flawed_texts[-1]:  # the code is right: so is the chain that decided it
            assert flawed_texts[:4] == texts[:4]
    assert 0 < flawed < len(warm)
