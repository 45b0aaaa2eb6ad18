"""The seeds' central claim, measured: what each chain stage's tests contribute.

For each chain stage 1..5, from one step's tests and executions rows: tests *written* (rows the
discriminator produced), *parsed*, *distinct* (parsed, not a copy of an earlier test of the same
sample), *valid* (the reference passes them), *mutants killed* (share of reference mutants at
least one of the stage's valid tests rejects, over the step's problems) and *bugs caught*
(valid tests the sample's final code fails: the reference passes, the candidate does not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from configs.names import STAGES

FIELDS = ("written", "parsed", "distinct", "valid", "mutant_kill_rate", "bugs_caught")


def stage_report(tests: Iterable[Mapping[str, Any]],
                 executions: Iterable[Mapping[str, Any]]) -> list[dict[str, float]]:
    """One row per chain stage (see the module docstring).

    >>> tests = [{"stage": 1, "problem_id": "p", "sample_idx": 0, "test_id": "s1.0",
    ...           "origin": "discriminator", "parse_status": "ok", "is_duplicate": False},
    ...          {"stage": 1, "problem_id": "p", "sample_idx": 0, "test_id": "s1.1",
    ...           "origin": "discriminator", "parse_status": "dropped", "is_duplicate": False}]
    >>> ex = [{"problem_id": "p", "sample_idx": 0, "test_id": "s1.0", "target_kind": k,
    ...        "target_id": t, "status": s} for k, t, s in (("reference", "reference", "passed"),
    ...        ("candidate", "candidate", "failed"), ("mutant", "m0", "failed"),
    ...        ("mutant", "m1", "passed"))]
    >>> stage_report(tests, ex)[0]
    {'stage': 1, 'written': 2, 'parsed': 1, 'distinct': 1, 'valid': 1, \
'mutant_kill_rate': 0.5, 'bugs_caught': 1}
    """
    status: dict[tuple[str, int, str, str], str] = {}
    mutants: dict[str, set[str]] = {}
    for e in executions:
        status[(e["problem_id"], e["sample_idx"], e["test_id"], e["target_id"])] = e["status"]
        if e["target_kind"] == "mutant":
            mutants.setdefault(e["problem_id"], set()).add(e["target_id"])
    rows = []
    disc = [t for t in tests if t["origin"] == "discriminator"]
    for stage in STAGES:
        mine = [t for t in disc if int(t["stage"]) == stage]
        distinct = [t for t in mine if t["parse_status"] == "ok" and not t["is_duplicate"]]
        key = lambda t, target: (t["problem_id"], t["sample_idx"], t["test_id"], target)  # noqa: E731
        valid = [t for t in distinct if status.get(key(t, "reference")) == "passed"]
        killed = {(t["problem_id"], m) for t in valid for m in mutants.get(t["problem_id"], ())
                  if status.get(key(t, m)) not in (None, "passed", "infra")}
        n_mutants = sum(len(mutants.get(p, ())) for p in {t["problem_id"] for t in mine})
        rows.append({"stage": stage, "written": len(mine),
                     "parsed": sum(t["parse_status"] == "ok" for t in mine),
                     "distinct": len(distinct), "valid": len(valid),
                     "mutant_kill_rate": len(killed) / n_mutants if n_mutants else 0.0,
                     "bugs_caught": sum(status.get(key(t, "candidate")) not in
                                        (None, "passed", "infra", "not_run") for t in valid)})
    return rows


def mean_report(reports: Sequence[Sequence[Mapping[str, float]]]) -> list[dict[str, float]]:
    """Per chain stage, the mean of each field over several steps' reports."""
    out = []
    for i, stage in enumerate(STAGES):
        rows = [r[i] for r in reports]
        out.append({"stage": stage, **{f: sum(r[f] for r in rows) / len(rows) for f in FIELDS}})
    return out


def report_metrics(report: Sequence[Mapping[str, float]], prefix: str = "stage_report"
                   ) -> dict[str, float]:
    """``stage_report/s<k>/<field>`` metrics of a report."""
    return {f"{prefix}/s{r['stage']}/{f}": float(r[f]) for r in report for f in FIELDS}


def format_report(report: Sequence[Mapping[str, float]], title: str) -> str:
    """A console table of a report."""
    head = "stage  " + "  ".join(f"{f:>16}" for f in FIELDS)
    lines = [title, head, "-" * len(head)]
    for r in report:
        lines.append(f"{r['stage']:5d}  " + "  ".join(
            f"{r[f]:>16.3f}" if isinstance(r[f], float) and f == "mutant_kill_rate"
            else f"{r[f]:>16.2f}" for f in FIELDS))
    return "\n".join(lines)


def report_from_metrics(metrics: Mapping[str, float], prefix: str) -> list[dict[str, float]]:
    """The inverse of :func:`report_metrics` (empty when the metrics hold no report)."""
    rows = [{"stage": s, **{f: metrics[f"{prefix}/s{s}/{f}"] for f in FIELDS}}
            for s in STAGES if f"{prefix}/s{s}/written" in metrics]
    return rows
