"""The pure parts of ``benchmarks/real_learning.py``: which screened problems are in the band
and how they split into training and held-out problems, the standard error of a pass@1 gain,
the per-arm figures read from a finished ``flows.train`` run (per-stage shares, tokens/s,
seconds per phase), the table and the last line. No model runs here; the runner is
``real_learning.py``."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LAST = ("real_gain", "direct", "trl", "se", "valid")
"""The last line's figures, in order (module docstring of ``real_learning.py``)."""


def in_band(rates: dict[str, float], low: float, high: float) -> list[str]:
    """The ids whose sampled pass rate lies in ``[low, high]``, in the order given: problems
    the base model sometimes solves and sometimes not, the only ones a group-relative update
    can learn from (all-fail and all-pass groups carry no advantage).

    >>> in_band({"a": 0.0, "b": 0.25, "c": 0.75, "d": 1.0}, 0.1, 0.9)
    ['b', 'c']
    """
    return [pid for pid, rate in rates.items() if low <= rate <= high]


def split_band(ids: Sequence[str], n_train: int, n_heldout: int, seed: int
               ) -> tuple[list[str], list[str]]:
    """``ids`` shuffled with ``seed``, cut into (train, held-out), disjoint. Short of
    ``n_train + n_heldout``, both shrink in proportion (each keeps at least one); fewer than
    two ids cannot make both, a ``ValueError``.

    >>> split_band(list("abcdefgh"), 4, 2, seed=0)
    (['f', 'c', 'a', 'd'], ['e', 'b'])
    >>> [len(part) for part in split_band(list("abcd"), 6, 2, seed=0)]
    [3, 1]
    """
    if len(ids) < 2:
        raise ValueError(f"{len(ids)} problem(s) in the band: need at least 2 (one to train "
                         "on, one held out); screen more candidates or widen the band")
    order = list(ids)
    random.Random(seed).shuffle(order)
    want = n_train + n_heldout
    if len(order) < want:
        n_heldout = min(max(1, round(len(order) * n_heldout / want)), len(order) - 1)
        n_train = len(order) - n_heldout
    return order[n_heldout:n_heldout + n_train], order[:n_heldout]


def binomial_se(p: float, n: int) -> float:
    """The binomial standard error of a pass rate ``p`` over ``n`` samples.

    >>> round(binomial_se(0.5, 100), 3)
    0.05
    """
    return math.sqrt(max(p * (1 - p), 0.0) / n) if n else float("nan")


def gain_se(before: float, after: float, n: int) -> float:
    """One standard error of ``after - before`` (two pass@1 estimates of ``n`` samples each),
    the two taken as independent: ``sqrt(SE_before^2 + SE_after^2)``. The two share problems
    and seeds, which makes them positively correlated, so this overstates the error (a
    conservative yardstick); samples of one problem are taken as independent, which
    understates it where problems differ much in difficulty.

    >>> round(gain_se(0.5, 0.5, 50), 4)
    0.1
    >>> gain_se(0.0, 0.0, 10)
    0.0
    """
    return math.hypot(binomial_se(before, n), binomial_se(after, n))


def seeds_se(ses: Sequence[float]) -> float:
    """The standard error of the mean of independent per-seed gains with errors ``ses``.

    >>> seeds_se([0.1, 0.1, 0.1, 0.1])
    0.05
    """
    return math.sqrt(sum(s * s for s in ses)) / len(ses)


def fmt(value: float | None, digits: int = 3) -> str:
    """``value`` to ``digits`` decimals, ``nan`` where there is none."""
    return "nan" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def last_line(values: dict[str, float | None]) -> str:
    """The benchmark's last line.

    >>> last_line({"real_gain": 0.05, "direct": 0.125, "trl": None, "se": 0.0712,
    ...            "valid": 0.4})
    'real_gain=0.050 direct=0.125 trl=nan se=0.071 valid=0.400'
    """
    return " ".join(f"{k}={fmt(values.get(k))}" for k in LAST)


def verdict(name: str, gain: float | None, se: float | None) -> str:
    """Whether an arm's gain over the control reached the goal (>= 2 standard errors).

    >>> verdict("chain", 0.2, 0.05)
    'chain: gain over control 0.200 = 4.0 SE: goal (>= 2 SE) met'
    >>> verdict("trl", 0.05, 0.05)
    'trl: gain over control 0.050 = 1.0 SE: goal (>= 2 SE) missed'
    """
    if gain is None or se is None or math.isnan(gain) or math.isnan(se):
        return f"{name}: no gain measured (the arm failed or was skipped): goal missed"
    ratio = gain / se if se else math.inf if gain > 0 else 0.0
    met = "met" if ratio >= 2 else "missed"
    return f"{name}: gain over control {gain:.3f} = {ratio:.1f} SE: goal (>= 2 SE) {met}"


# --- what a finished flows.train run holds -------------------------------------------------
def run_figures(root: Path, run_id: str) -> dict[str, Any]:
    """From a finished run's store: per chain stage the shares of ``pipeline.chainshares``
    over every training step's samples (``gen_ended``, ``tests_ended``: outputs ending before
    their cap; ``tests_parsed``: discriminator outputs with a kept test; ``tests_valid``: kept
    discriminator tests the reference passes), generation tokens/s (output tokens over the
    generate calls' seconds), and seconds spent generating and updating."""
    from artifacts import RunStore  # deferred: --help answers before pyarrow loads

    store = RunStore(str(root), run_id)
    steps = store.complete_steps()
    chains, tests, refs, seconds_update = [], [], [], 0.0
    for step in steps:  # a sample is (step, problem, index): every step reuses the indices
        chains += store.read_table("chains", step=step, columns=[
            "stage", "role", "finish_reason", "output_tokens", "latency_s"]).to_pylist()
        tests += [{**t, "step": step} for t in store.read_table("tests", step=step, columns=[
            "stage", "problem_id", "sample_idx", "test_id", "origin", "parse_status",
            "is_duplicate"]).to_pylist()]
        refs += [{**r, "step": step} for r in store.read_table("executions", step=step, columns=[
            "problem_id", "sample_idx", "test_id", "target_kind", "status"]).to_pylist()]
        seconds_update += sum(r["duration_s"] or 0.0 for r in store.read_table(
            "updates", step=step, columns=["duration_s"]).to_pylist())
    return {"steps": len(steps), "stages": stage_shares(chains, tests, refs),
            "tokens": sum(r["output_tokens"] for r in chains),
            "generate_s": sum(r["latency_s"] for r in chains), "update_s": seconds_update}


def stage_shares(chains: list[dict], tests: list[dict], refs: list[dict]
                 ) -> dict[int, dict[str, float | None]]:
    """Per chain stage the shares of ``run_figures`` from a run's rows.

    >>> chains = [{"stage": 5, "role": "generator", "finish_reason": "eos"},
    ...           {"stage": 5, "role": "discriminator", "finish_reason": "length"}]
    >>> tests = [{"step": 1, "stage": 5, "problem_id": "p", "sample_idx": 0, "test_id": "t",
    ...           "origin": "discriminator", "parse_status": "ok", "is_duplicate": False}]
    >>> refs = [{"step": 1, "problem_id": "p", "sample_idx": 0, "test_id": "t",
    ...          "target_kind": "reference", "status": "passed"}]
    >>> stage_shares(chains, tests, refs)[5]
    {'gen_ended': 1.0, 'tests_ended': 0.0, 'tests_parsed': 1.0, 'tests_valid': 1.0}

    The same sample index of the same problem in two steps is two samples:

    >>> two = chains * 2, tests + [{**tests[0], "step": 2}], refs
    >>> stage_shares(*two)[5]["tests_parsed"], stage_shares(*two)[5]["tests_valid"]
    (1.0, 0.5)
    """
    passed = {(r["step"], r["problem_id"], r["sample_idx"], r["test_id"]) for r in refs
              if r["target_kind"] == "reference" and r["status"] == "passed"}
    out = {}
    for stage in sorted({r["stage"] for r in chains}):
        ended = {role: [r["finish_reason"] != "length" for r in chains
                        if r["stage"] == stage and r["role"] == role]
                 for role in ("generator", "discriminator")}
        kept = [t for t in tests if t["stage"] == stage and t["origin"] == "discriminator"
                and t["parse_status"] == "ok" and not t["is_duplicate"]]
        with_tests = {(t["step"], t["problem_id"], t["sample_idx"]) for t in kept}
        outputs = len(ended["discriminator"])
        out[stage] = {
            "gen_ended": share(ended["generator"]), "tests_ended": share(ended["discriminator"]),
            "tests_parsed": len(with_tests) / outputs if outputs else None,
            "tests_valid": share([(t["step"], t["problem_id"], t["sample_idx"], t["test_id"])
                                  in passed for t in kept])}
    return out


def share(flags: Sequence[bool]) -> float | None:
    return sum(map(bool, flags)) / len(flags) if flags else None


def table(rows: list[dict[str, Any]]) -> str:
    """One block per arm and seed: held-out pass@1 before / after with their SE, the gain over
    the control, tokens/s (of its held-out sampling for TRL, of its training rollouts for the
    others), seconds of training per 1000 sampled tokens (s/ktok: a step's cost per sampled
    token, evaluation left out), seconds per phase, peak RSS, wall time, then per-stage
    shares."""
    out = [f"{'arm':<8} {'seed':>4}  {'before':>13}  {'after':>13}  {'gain-ctrl':>15}  "
           f"{'tok/s':>6}  {'s/ktok':>6}  {'RSS GiB':>7}  {'wall s':>6}  phases (s)"]
    for r in rows:
        n = r.get("n") or 0

        def cell(p: float | None, n: int = n) -> str:
            return "   -         " if p is None else f"{p:.3f}+-{binomial_se(p, n):.3f}"

        over = r.get("over_control")
        out.append(
            f"{r['arm']:<8} {r['seed']:>4}  {cell(r.get('before'))}  {cell(r.get('after'))}  "
            + (f"{'-':>15}" if over is None else f"{over:+.3f}+-{r['se']:.3f}".rjust(15))
            + f"  {fmt(r.get('tokens_s'), 1):>6}  {fmt(r.get('s_per_ktok'), 1):>6}"
            f"  {fmt(r.get('rss_gib'), 2):>7}  "
            f"{r.get('wall_s', 0):>6.0f}  "
            + ", ".join(f"{k} {v:.0f}" for k, v in r.get("phases", {}).items()))
        if r.get("error"):
            out.append(f"         FAILED: {r['error']}")
        for stage, s in (r.get("stages") or {}).items():
            out.append(f"         stage {stage}: " + "  ".join(
                f"{k} {fmt(v)}" for k, v in s.items()))
    return "\n".join(out)
