"""Rewards of one step, from execution only.

``outcomes_from_rows`` turns the executions and tests tables into one ``SampleOutcome`` per
sample; ``reward_rows`` scores them with the configured reward registry and marks problems
whose samples all scored the same (no signal: the update skips them); ``shuffled_rewards``
permutes them within each problem for a control run. A sample with an
``infra`` verdict that a reward would read (``SampleOutcome.masked``) is not scored: its row is
``masked``, its rewards null, and it is left out of its problem's group.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from configs.names import CODE_STAGE
from configs.schema import RewardConfig
from pipeline.chains import SampleKey, peer_tests
from rewards import (
    INFRA,
    SampleOutcome,
    TestVerdict,
    compute_rewards,
    group_signal,
    normalise_test,
)


def outcomes_from_rows(tests: Iterable[dict[str, Any]], executions: Iterable[dict[str, Any]],
                       samples: list[SampleKey], stage: int = CODE_STAGE
                       ) -> dict[SampleKey, SampleOutcome]:
    """Join tests (kept ones, duplicates included) with their executions per sample;
    ``stage`` is the training stage (``SampleOutcome.stage``).

    Every test's verdict on each reference mutant is kept, baseline tests' included: rewards
    that pay for kills count the discriminator's, and ``progressive`` needs to know what the
    baseline already kills.

    An ``infra`` verdict stays unknown: the reference's makes the test's validity ``None``
    (neither valid nor invalid), a mutant's makes that kill ``None``, the candidate's is kept
    as its status; ``SampleOutcome.masked`` then decides."""
    status: dict[tuple[str, int, str, str], str] = {}
    n_mutants: dict[str, set[str]] = {}
    code_ok: dict[SampleKey, bool] = {}
    for e in executions:
        key = (e["problem_id"], e["sample_idx"])
        status[(*key, e["test_id"], e["target_id"])] = e["status"]
        if e["target_kind"] == "mutant":
            n_mutants.setdefault(e["problem_id"], set()).add(e["target_id"])
        if e["target_kind"] == "candidate":
            code_ok[key] = code_ok.get(key, True) and e["status"] != "not_run"
    tests = list(tests)
    by_sample: dict[SampleKey, list[dict[str, Any]]] = {}
    for t in tests:
        if t["parse_status"] == "ok":
            by_sample.setdefault((t["problem_id"], t["sample_idx"]), []).append(t)
    # Peer copies (rewards.peer_tests) are the executed tests that no tests row names; only
    # then are they derived (an AST parse per test), and only those the execution ran count.
    listed = {(t["problem_id"], t["sample_idx"], t["test_id"]) for t in tests}
    if any(k[:3] not in listed for k in status):
        for key, rows in peer_tests(tests).items():
            by_sample.setdefault(key, []).extend(
                r for r in rows if (*key, r["test_id"], "reference") in status)
    out = {}
    for key in samples:
        mutant_ids = sorted(n_mutants.get(key[0], ()), key=lambda m: int(m[1:]))
        verdicts = []
        rows = sorted(by_sample.get(key, []),
                      key=lambda r: (r["origin"] == "peer", r["stage"], r["test_idx"]))
        for t in rows:
            tid = t["test_id"]
            if t["is_duplicate"]:  # not executed: it counts once, through its first copy
                verdicts.append(TestVerdict(normalise_test(t["snippet"]), t["origin"],
                                            int(t["stage"]), True, False, "duplicate"))
                continue
            killed = () if t["origin"] == "peer" else tuple(  # peers are not run on mutants
                _known(status.get((*key, tid, m), "passed"), False) for m in mutant_ids)
            verdicts.append(TestVerdict(
                test_key=normalise_test(t["snippet"]), origin=t["origin"], stage=int(t["stage"]),
                duplicate=False, valid=_known(status.get((*key, tid, "reference")), True),
                candidate_status=status.get((*key, tid, "candidate"), "not_run"),
                mutants_killed=killed))
        out[key] = SampleOutcome(code_ok=code_ok.get(key, False), tests=tuple(verdicts),
                                 n_mutants=len(mutant_ids), stage=stage)
    return out


def _known(status: str | None, passed_means: bool) -> bool | None:
    """``passed_means`` if the verdict is a pass, its negation otherwise; None for ``infra``."""
    if status == INFRA:
        return None
    return passed_means if status == "passed" else not passed_means


def reward_rows(outcomes: dict[SampleKey, SampleOutcome], cfg: RewardConfig,
                training_stage: int) -> list[dict[str, Any]]:
    """One rewards row per sample, with every component, the no-signal flags and the mask;
    ``reward`` maps each reward the config weights to its raw value, names sorted.

    Masked samples get null rewards and stay out of their problem's group: the no-signal flags
    are computed over the scored samples only, and a masked sample carries its group's flag
    (True when no sample of the problem was scored)."""
    keys = list(outcomes)
    assert all(o.stage == training_stage for o in outcomes.values()), "outcomes of another stage"
    scored = {k: compute_rewards(outcomes[k], cfg) for k in keys}
    live_keys = [k for k in keys if not scored[k].masked]
    live_groups = [k[0] for k in live_keys]
    gen_signal = group_signal([scored[k].generator for k in live_keys], live_groups)
    disc_signal = group_signal([scored[k].discriminator for k in live_keys], live_groups)
    gen_live = {g for g, ok in zip(live_groups, gen_signal.mask, strict=True) if ok}
    disc_live = {g for g, ok in zip(live_groups, disc_signal.mask, strict=True) if ok}

    weighted = sorted({*cfg.generator, *cfg.discriminator})
    rows = []
    for key in keys:
        c, o = scored[key].components, outcomes[key]
        baseline = [t for t in o.tests if t.origin == "baseline"]
        valid_disc = o.valid_discriminator_tests
        peers = [t for t in o.generator_tests if t.origin == "peer"]

        rows.append({
            "stage": training_stage, "problem_id": key[0], "sample_idx": key[1],
            "generator_reward": scored[key].generator,
            "discriminator_reward": scored[key].discriminator,
            # the raw value of each reward the config weights, by name (none when masked)
            "reward": None if scored[key].masked else {
                name: c[f"reward/{name}"] for name in weighted},
            "validity": c["validity"], "bug_catch": c["bug_catch"],
            "n_tests": int(c["n_tests"]), "n_valid": int(c["n_valid"]),
            "n_invalid": int(c["n_invalid"]), "n_duplicates": int(c["n_duplicates"]),
            "n_passed_valid": sum(t.passed for t in valid_disc),
            "n_baseline": len(baseline),
            "n_baseline_passed": sum(t.passed for t in baseline),
            "n_peer": len(peers), "n_peer_passed": sum(t.passed for t in peers),
            "n_mutants": o.n_mutants,
            "n_mutants_killed": sum(any(t.killed(m) for t in valid_disc)
                                    for m in range(o.n_mutants)),
            "generator_group_skipped": key[0] not in gen_live,
            "discriminator_group_skipped": key[0] not in disc_live,
            "masked": scored[key].masked,
            "n_infra_tests": len(o.infra_tests),
        })
    return rows


def shuffled_rewards(rows: list[dict[str, Any]], seed: int, step: int) -> list[dict[str, Any]]:
    """``rows`` (``reward_rows``'s) with each role's reward permuted among the scored samples of
    each problem (``rewards.shuffle_seed``: the control run).

    A problem's reward values, their spread and so its no-signal flag stay as they were; only
    which sample gets which value is drawn at random, from a generator seeded by ``seed``,
    ``step``, the problem and the role (the same step permutes the same way on a replay).
    Masked samples keep their null rewards; every other column is left as it was.

    >>> rows = [{"problem_id": "p", "sample_idx": i, "masked": i == 3,
    ...          "generator_reward": [1.0, 0.0, 0.0, None][i],
    ...          "discriminator_reward": [0.2, 0.4, 0.6, None][i]} for i in range(4)]
    >>> out = shuffled_rewards(rows, seed=0, step=1)
    >>> sorted(r["generator_reward"] for r in out[:3]), out[3]["generator_reward"]
    ([0.0, 0.0, 1.0], None)
    >>> out == shuffled_rewards(rows, seed=0, step=1), rows[0]["generator_reward"]
    (True, 1.0)
    """
    out = [dict(r) for r in rows]
    for column in ("generator_reward", "discriminator_reward"):
        live: dict[str, list[dict[str, Any]]] = {}
        for r in out:
            if not r["masked"] and r[column] is not None:
                live.setdefault(r["problem_id"], []).append(r)
        for problem_id, group in live.items():
            values = [r[column] for r in group]
            random.Random(f"{seed}:{step}:{problem_id}:{column}").shuffle(values)
            for r, value in zip(group, values, strict=True):
                r[column] = value
    return out
