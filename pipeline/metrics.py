"""A step's tables summarised: namespaced metrics, skipped updates, the stage table.

Pure functions over rows of the run store's tables; ``tasks.reporting`` logs them to MLflow
and Prefect and prints the run summary.
"""

from __future__ import annotations

import statistics
from typing import Any

import pandas as pd

from artifacts.updatestats import METRIC_NAMES
from rewards.outcome import INFRA


def _mean(values: list[float]) -> float:
    return float(statistics.fmean(values)) if values else 0.0


def _std(values: list[float]) -> float:
    """Population standard deviation (0 for fewer than two values)."""
    return float(statistics.pstdev(values)) if len(values) > 1 else 0.0


def round3(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def passes_baseline(row: dict[str, Any]) -> bool:
    """A rewards row whose code passed every one of the problem's own tests (it has some)."""
    return bool(row["n_baseline"]) and row["n_baseline_passed"] == row["n_baseline"]


def rejected_beyond_baseline(row: dict[str, Any]) -> bool:
    """A rewards row whose code failed a valid discriminator (or peer) test: for a row that
    :func:`passes_baseline`, what only the discriminator's tests found. With group-relative
    advantages these are the samples through which its tests can change what the generator
    learns (``docs/training.md``, *Progressive tests*)."""
    return (row["n_passed_valid"] < row["n_valid"]
            or (row.get("n_peer_passed") or 0) < (row.get("n_peer") or 0))


def step_metrics(rewards: list[dict[str, Any]], executions: list[dict[str, Any]],
                 updates: list[dict[str, Any]], tests: list[dict[str, Any]],
                 chains: list[dict[str, Any]] = ()) -> dict[str, float]:
    """Namespaced means of one step (``generator/*``, ``discriminator/*``, ``ppo/*``, ...).

    Reward means cover the scored samples only: a masked sample (an ``infra`` verdict, see
    ``rewards.SampleOutcome.masked``) has no reward and is counted instead, in
    ``sandbox/infra_masked_samples`` (and ``_fraction``); masking is per sample for both roles,
    so the count is that of the role the step updates as well as of the other one.
    ``sandbox/infra_verdicts`` counts the executions the harness, not the code, decided.
    """
    all_rows = rewards
    rewards = [r for r in all_rows if not r.get("masked")]
    n_masked = len(all_rows) - len(rewards)
    m: dict[str, float] = {
        "generator/reward": _mean([r["generator_reward"] for r in rewards]),
        "generator/reward_std": _std([r["generator_reward"] for r in rewards]),
        "generator/pass_rate": _mean([r["n_passed_valid"] / r["n_valid"] if r["n_valid"]
                                      else 0.0 for r in rewards]),
        "generator/baseline_pass_rate": _mean([r["n_baseline_passed"] / r["n_baseline"]
                                               for r in rewards if r["n_baseline"]]),
        # rewards.peer_tests: of the samples judged by peer tests, the share of them passed
        "generator/peer_pass_rate": _mean([r["n_peer_passed"] / r["n_peer"]
                                           for r in rewards if r.get("n_peer")]),
        "generator/rejected_beyond_baseline": _mean([rejected_beyond_baseline(r)
                                                     for r in rewards if passes_baseline(r)]),
        "discriminator/reward": _mean([r["discriminator_reward"] for r in rewards]),
        "discriminator/reward_std": _std([r["discriminator_reward"] for r in rewards]),
        "discriminator/validity": _mean([r["validity"] for r in rewards
                                         if r["validity"] is not None]),
        "discriminator/bug_catch": _mean([r["bug_catch"] for r in rewards
                                          if r["bug_catch"] is not None]),
        "discriminator/mutant_kill_rate": _mean([r["n_mutants_killed"] / r["n_mutants"]
                                               for r in rewards if r["n_mutants"]]),
        "discriminator/valid_tests_per_sample": _mean([r["n_valid"] for r in rewards]),
        "rewards/generator_groups_skipped_fraction": _mean([r["generator_group_skipped"]
                                                            for r in rewards]),
        "rewards/discriminator_groups_skipped_fraction": _mean(
            [r["discriminator_group_skipped"] for r in rewards]),
        "sandbox/infra_masked_samples": float(n_masked),
        "sandbox/infra_masked_fraction": n_masked / len(all_rows) if all_rows else 0.0,
    }
    kept = [t for t in tests if t["origin"] == "discriminator"]
    m["tests/parsed"] = float(sum(t["parse_status"] == "ok" for t in kept))
    m["tests/dropped"] = float(sum(t["parse_status"] == "dropped" for t in kept))
    m["tests/duplicates"] = float(sum(t["is_duplicate"] for t in kept))
    cand = [e for e in executions if e["target_kind"] == "candidate"]
    m["sandbox/executions"] = float(len(executions))
    m["sandbox/timeouts"] = float(sum(e["status"] == "timeout" for e in executions))
    m["sandbox/infra_verdicts"] = float(sum(e["status"] == INFRA for e in executions))
    m["sandbox/candidate_errors"] = float(sum(e["status"] == "error" for e in cand))
    m["sandbox/no_code"] = float(sum(e["status"] == "not_run" for e in cand))
    m["sandbox/seconds"] = float(sum(e["duration_s"] for e in executions))
    for u in updates:  # keyed by the role updated: one series per role, never mixed
        ns = f"ppo/{u['role']}"
        for key in METRIC_NAMES:  # UpdateStats' fields; null (or a column an older file lacks):
            if u.get(key) is not None:  # not measured, not logged
                m[f"{ns}/{key}"] = float(u[key])
        m[f"{ns}/seconds"] = float(u["duration_s"])
    lengths: dict[tuple[str, int], list[float]] = {}
    for c in chains:
        lengths.setdefault((c["role"], int(c["stage"])), []).append(float(c["output_tokens"]))
    for (role, stage), values in sorted(lengths.items()):
        m[f"length/{role}/stage{stage}_tokens"] = _mean(values)
    return m


SKIP_MASKED = "every sample masked (infra verdicts: the sandbox failed, not the code)"
SKIP_SINGLETONS = "groups of one sample (group-relative advantages need >= 2 per problem)"
SKIP_NO_SPREAD = "every problem's samples scored the same (no reward spread)"
SKIP_NO_TOKENS = "no response tokens at the trained stage"


def skipped_updates(updates: list[dict[str, Any]], rewards: list[dict[str, Any]],
                    group_relative: bool = True) -> dict[str, int]:
    """Why each update without a trained token (``n_tokens == 0``: no optimizer step, the
    adapter unchanged) was skipped -> how many; from the updates and rewards tables.
    ``group_relative``: ``ppo.advantage == "group"`` (GAE skips no group).

    >>> ups = [{"step": 1, "role": "generator", "n_sequences": 2, "n_tokens": 0},
    ...        {"step": 2, "role": "generator", "n_sequences": 0, "n_tokens": 0},
    ...        {"step": 3, "role": "generator", "n_sequences": 4, "n_tokens": 9}]
    >>> rws = [{"step": 1, "problem_id": p, "masked": False, "generator_group_skipped": True}
    ...        for p in "ab"]
    >>> skipped_updates(ups, rws) == {SKIP_SINGLETONS: 1, SKIP_MASKED: 1}
    True
    """
    by_step: dict[int, list[dict[str, Any]]] = {}
    for r in rewards:
        if not r.get("masked"):
            by_step.setdefault(int(r["step"]), []).append(r)
    reasons: dict[str, int] = {}
    for u in updates:
        if int(u["n_tokens"]) > 0:
            continue
        scored = by_step.get(int(u["step"]), [])
        sizes: dict[Any, int] = {}
        for r in scored:
            sizes[r["problem_id"]] = sizes.get(r["problem_id"], 0) + 1
        if int(u["n_sequences"]) == 0 or not scored:
            why = SKIP_MASKED
        elif not group_relative:
            why = SKIP_NO_TOKENS
        elif max(sizes.values()) < 2:
            why = SKIP_SINGLETONS
        elif all(r[f"{u['role']}_group_skipped"] for r in scored):
            why = SKIP_NO_SPREAD
        else:
            why = SKIP_NO_TOKENS
        reasons[why] = reasons.get(why, 0) + 1
    return reasons


def skipped_line(n_updates: int, reasons: dict[str, int]) -> str:
    """One line for the run summary: how many updates were skipped, and why."""
    n_skipped = sum(reasons.values())
    if not n_skipped:
        return f"{n_updates}, none skipped"
    why = "; ".join(f"{n}: {reason}" for reason, n in reasons.items())
    line = f"{n_skipped} of {n_updates} skipped, no optimizer step ({why})"
    if n_skipped == n_updates:
        line += " -- no update carried signal: the adapters were never trained by PPO"
    return line


def stage_table(rewards: pd.DataFrame) -> str:
    """The progress table from the rewards table: per training stage, the mean over the
    stage's steps (of each step's mean over its scored samples), and the last step's value.

    >>> frame = pd.DataFrame({"stage": [1, 1, 1, 1], "step": [1, 1, 2, 2],
    ...                       "generator_reward": [0.0, 0.5, 1.0, 0.5], "validity": [1.0] * 4,
    ...                       "n_baseline_passed": [0, 1, 1, 1], "n_baseline": [1] * 4,
    ...                       "masked": [False] * 4})
    >>> print(stage_table(frame).splitlines()[-1])
        1      2  0.500 (last 0.750)  0.750 (last 1.000)  1.000 (last 1.000)
    """
    if rewards.empty:
        return "(no complete steps)"
    if "masked" in rewards:
        rewards = rewards[~rewards["masked"].fillna(False).astype(bool)]
    lines = ["mean over each training stage's steps (last step in brackets)",
             "stage  steps  " + "  ".join(f"{h:>18}" for h in (
                 "generator reward", "baseline pass rate", "test validity")),
             "-----  -----  " + "  ".join(["-" * 18] * 3)]
    for stage, rows in rewards.groupby("stage"):
        per_step = rows.groupby("step").apply(lambda r: pd.Series({
            "reward": pd.to_numeric(r["generator_reward"]).mean(),
            "base": r["n_baseline_passed"].sum() / max(int(r["n_baseline"].sum()), 1),
            "validity": pd.to_numeric(r["validity"]).mean()}), include_groups=False)
        cells = [f"{per_step[c].mean():.3f} (last {per_step[c].iloc[-1]:.3f})"
                 for c in ("reward", "base", "validity")]
        lines.append(f"{int(stage):5d}  {len(per_step):5d}  {cells[0]:>18}  {cells[1]:>18}  "
                     f"{cells[2]:>18}")
    return "\n".join(lines)
