"""What each chain stage's tests contribute: does a later stage find what the earlier ones
missed?

For each chain stage, from one step's tests and executions rows: tests *written* (rows the
discriminator produced), *parsed*, *distinct* (parsed, not a copy of an earlier test of the same
sample), *valid* (the reference passes them: the new valid tests the stage added),
*repeated* (copies of an earlier valid test of the same sample: what the stage re-wrote
instead of adding), *mutants killed* (share of reference mutants at least one of the stage's
valid tests rejects, over the step's problems), *bugs caught* (valid tests the sample's final
code fails: the reference passes, the candidate does not) and *first caught* (samples whose
code is first rejected by this stage's tests: every valid test of the stages before it, the
problem's baseline tests included, passes it).

Whether the chain matters reads off two columns: a stage that only repeats the earlier ones
has ``valid`` near 0 against a large ``repeated``, and ``first_caught`` says which stage
found each wrong solution.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from configs.names import STAGES

FIELDS = ("written", "parsed", "distinct", "valid", "repeated", "mutant_kill_rate",
          "bugs_caught", "first_caught")
KEEPS = ("passed", "infra", "not_run")  # candidate verdicts that reject nothing (None too)


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
    {'stage': 1, 'written': 2, 'parsed': 1, 'distinct': 1, 'valid': 1, 'repeated': 0, \
'mutant_kill_rate': 0.5, 'bugs_caught': 1, 'first_caught': 1}
    """
    status: dict[tuple[str, int, str, str], str] = {}
    mutants: dict[str, set[str]] = {}
    for e in executions:
        status[(e["problem_id"], e["sample_idx"], e["test_id"], e["target_id"])] = e["status"]
        if e["target_kind"] == "mutant":
            mutants.setdefault(e["problem_id"], set()).add(e["target_id"])
    tests = list(tests)
    key = lambda t, target: (t["problem_id"], t["sample_idx"], t["test_id"], target)  # noqa: E731
    valid_ids = {(t["problem_id"], t["sample_idx"], t["test_id"]) for t in tests
                 if t["parse_status"] == "ok" and status.get(key(t, "reference")) == "passed"}
    first = first_rejections(tests, status)
    rows = []
    disc = [t for t in tests if t["origin"] == "discriminator"]
    for stage in STAGES:
        mine = [t for t in disc if int(t["stage"]) == stage]
        distinct = [t for t in mine if t["parse_status"] == "ok" and not t["is_duplicate"]]
        valid = [t for t in distinct if status.get(key(t, "reference")) == "passed"]
        repeated = [t for t in mine if t["parse_status"] == "ok" and t["is_duplicate"]
                    and (t["problem_id"], t["sample_idx"], t["duplicate_of"]) in valid_ids]
        killed = {(t["problem_id"], m) for t in valid for m in mutants.get(t["problem_id"], ())
                  if status.get(key(t, m)) not in (None, "passed", "infra")}
        n_mutants = sum(len(mutants.get(p, ())) for p in {t["problem_id"] for t in mine})
        rows.append({"stage": stage, "written": len(mine),
                     "parsed": sum(t["parse_status"] == "ok" for t in mine),
                     "distinct": len(distinct), "valid": len(valid), "repeated": len(repeated),
                     "mutant_kill_rate": len(killed) / n_mutants if n_mutants else 0.0,
                     "bugs_caught": sum(status.get(key(t, "candidate")) not in (None, *KEEPS)
                                        for t in valid),
                     "first_caught": sum(s == stage for s in first.values())})
    return rows


def first_rejections(tests: Iterable[Mapping[str, Any]],
                     status: Mapping[tuple[str, int, str, str], str]) -> dict[Any, int]:
    """Per sample whose code some valid test rejects, the earliest stage of such a test
    (0: a baseline test)."""
    first: dict[Any, int] = {}
    for t in tests:
        if t["parse_status"] != "ok" or t["is_duplicate"]:
            continue
        k = (t["problem_id"], t["sample_idx"], t["test_id"])
        if status.get((*k, "reference")) == "passed" and \
                status.get((*k, "candidate")) not in (None, *KEEPS):
            sample = k[:2]
            first[sample] = min(first.get(sample, 99), int(t["stage"]))
    return first


def mean_report(reports: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Per chain stage, the mean of each field over several steps' reports (over the reports
    that have it: one stored before a field existed holds null there)."""
    out = []
    for i, stage in enumerate(STAGES):
        row: dict[str, Any] = {"stage": stage}
        for f in FIELDS:
            known = [r[i][f] for r in reports if r[i].get(f) is not None]
            row[f] = sum(known) / len(known) if known else None
        out.append(row)
    return out


def new_share(report: Sequence[Mapping[str, Any]], stages: Sequence[int] = STAGES[1:]
              ) -> float | None:
    """Of the valid tests that ``stages`` (default 2-5) wrote, the share that were new (not a
    copy of an earlier one): ``valid / (valid + repeated)``; None when they wrote none.

    >>> new_share([{"stage": 1, "valid": 5, "repeated": 0}, {"stage": 2, "valid": 1,
    ...            "repeated": 3}])
    0.25
    """
    rows = [r for r in report if r["stage"] in stages and r.get("repeated") is not None]
    total = sum(r["valid"] + r["repeated"] for r in rows)
    return sum(r["valid"] for r in rows) / total if total else None


def report_metrics(report: Sequence[Mapping[str, float]], prefix: str = "stage_report"
                   ) -> dict[str, float]:
    """``stage_report/s<k>/<field>`` metrics of a report (a null field is left out)."""
    return {f"{prefix}/s{r['stage']}/{f}": float(r[f]) for r in report for f in FIELDS
            if r.get(f) is not None}


def format_report(report: Sequence[Mapping[str, float]], title: str) -> str:
    """A console table of a report."""
    head = "stage  " + "  ".join(f"{f:>16}" for f in FIELDS)
    lines = [title, head, "-" * len(head)]
    for r in report:
        lines.append(f"{r['stage']:5d}  " + "  ".join(
            f"{'-':>16}" if r.get(f) is None
            else f"{r[f]:>16.3f}" if f == "mutant_kill_rate" else f"{r[f]:>16.2f}"
            for f in FIELDS))
    return "\n".join(lines)


def report_from_metrics(metrics: Mapping[str, float], prefix: str) -> list[dict[str, float]]:
    """The inverse of :func:`report_metrics` (empty when the metrics hold no report)."""
    rows = [{"stage": s, **{f: metrics.get(f"{prefix}/s{s}/{f}") for f in FIELDS}}
            for s in STAGES if f"{prefix}/s{s}/written" in metrics]
    return rows
