"""Vet a problem source for training, and load the problems a training run uses.

    from problems.vet import vet, load_for_run
    from sandbox import Limits
    report = vet("../shared/data/leetcode_formatted.json", limits=Limits(timeout_s=2.0))
    report.counts()      # {'total': 720, 'valid': ..., 'repaired_by': {...}, 'skipped_by': {...}}
    problems = load_for_run(source, on_invalid="skip", limit=4)   # problems.report is the report

:func:`vet` loads the source (structural checks, ``problems.loaders``), runs each sound
reference against its own baseline tests in the sandbox, tries the repairs of recorded-answer
formats on the tests it fails (``problems.repairs`` lists the rules and what makes a repair
safe) and keeps a repair only when the sandbox proves it, then reports what is valid, what was
repaired (how) and what is skipped (why) (``problems.report``). :func:`load_for_run` applies a
run's ``problems.on_invalid`` policy (``fail`` or ``skip``) to that report, once per process,
and selects the run's problems.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from problems.convert import call_shape
from problems.loaders import load_problem_set, select
from problems.model import Problem, ProblemIssue, ProblemLoadError, ProblemSet
from problems.repairs import REPAIRS, candidates, failure_kind, render
from problems.report import REPORT_FORMAT, RepairRecord, SkippedProblem, VetReport
from problems.validate import VET_LIMITS
from sandbox import ExecutionResult, Limits, Placement, Trusted, execute_many

__all__ = ["ON_INVALID", "REPAIRS", "REPORT_FORMAT", "RUN_RECORD", "RepairRecord",
           "RunProblems", "SkippedProblem", "VetReport", "invalid_message", "load_for_run",
           "vet"]

ON_INVALID = ("fail", "skip")
RUN_RECORD = "problems.json"  # the report's name in a run store's ``_run/`` and in MLflow

# -- vetting --------------------------------------------------------------------------------------

Jobs = list[tuple[str, list[str]]]


def _runner(limits: Limits, workers: int | None,
            isolation: str) -> Callable[[Jobs], list[ExecutionResult]]:
    """Runs references on this process's pool (vetting comes before any Ray executor starts);
    a job with an ``infra`` verdict runs once more."""
    def run(jobs: Jobs) -> list[ExecutionResult]:
        if not jobs:
            return []
        results = execute_many(jobs, limits, workers=workers, isolation=isolation)
        again = [i for i, r in enumerate(results) if r.infra]
        if again:  # the harness failed, not the reference: once more before it counts
            retried = execute_many([jobs[i] for i in again], limits, workers=workers,
                                   isolation=isolation)
            for i, result in zip(again, retried, strict=True):
                results[i] = result
        return results

    return run


def _structural_skips(problem_set: ProblemSet) -> list[SkippedProblem]:
    by_index: dict[int, list[ProblemIssue]] = {}
    for issue in problem_set.issues:
        by_index.setdefault(issue.index, []).append(issue)
    return [SkippedProblem(i, issues[0].problem_id, tuple(issues))
            for i, issues in sorted(by_index.items())]


def vet(source: str | Path, *, execute: bool = True, repair: bool = True,
        limits: Limits = VET_LIMITS, workers: int | None = Placement.workers,
        isolation: str = Placement.isolation) -> VetReport:
    """Load ``source``, run every structurally sound reference against its baseline tests in
    the sandbox (``execute``: under ``limits``, on a pool of ``workers`` at ``isolation``),
    repair recorded-format defects (``repair``; the rules are in ``problems.repairs``) and
    report. Raises ``ProblemLoadError`` only for a source that cannot be read at all; a bad
    problem is a skipped entry of the report."""
    problem_set = load_problem_set(source)
    report = _structural(problem_set, source, executed=execute,
                         timeout_s=limits.timeout_s if execute else None)
    if not execute:
        report.problems, report.indices = list(problem_set.problems), list(problem_set.indices)
        return report
    checked = _check(problem_set, range(len(problem_set.problems)),
                     _runner(limits, workers, isolation), repair)
    return _fill(report, problem_set, checked)


def _structural(problem_set: ProblemSet, source: str | Path, **how: object) -> VetReport:
    return VetReport(source=str(source), total=problem_set.total,
                     skipped=_structural_skips(problem_set), **how)


# Per position of ``ProblemSet.problems``: the problem as kept with its repairs, or why skipped.
Checked = dict[int, "tuple[Problem, list[RepairRecord]] | SkippedProblem"]


def _check(problem_set: ProblemSet, positions: Sequence[int],
           run: Callable[[Jobs], list[ExecutionResult]], repair: bool) -> Checked:
    """Each problem at ``positions`` (of ``problem_set.problems``) checked in the sandbox: the
    problem (repaired where a repair is proven) or why it is skipped. Report order is the
    caller's (``_fill``)."""
    problems = problem_set.problems
    ks = list(positions)
    results = dict(zip(ks, run([(problems[k].reference_program,
                                 [Trusted(t) for t in problems[k].baseline_tests])
                                for k in ks]), strict=True))
    failing = {k: [i for i, o in enumerate(r.outcomes) if not o.passed]
               for k, r in results.items()}
    failing = {k: v for k, v in failing.items() if v}

    # Repairs: every candidate of every failing test, one job per problem.
    fixes: dict[int, dict[int, tuple[tuple[str, ...], str]]] = {}
    if repair and failing:
        tried: list[tuple[int, int, tuple[str, ...], str]] = []
        for k, tests in failing.items():
            record, shape = problem_set.records[k], None
            if not isinstance(record, dict):
                continue
            shape = call_shape(record)
            raw_tests = record.get("baseline_tests") or []
            for i in tests:
                if results[k].outcomes[i].status not in ("failed", "error"):
                    continue
                for names, values in candidates(raw_tests[i], shape):
                    tried.append((k, i, names, render(names, problems[k].entry_point,
                                                      values)))
        by_problem: dict[int, list[tuple[int, tuple[str, ...], str]]] = {}
        for k, i, names, test in tried:
            by_problem.setdefault(k, []).append((i, names, test))
        order = sorted(by_problem)
        outcomes = run([(problems[k].reference_program, [t for _, _, t in by_problem[k]])
                        for k in order])
        for k, result in zip(order, outcomes, strict=True):
            for (i, names, test), outcome in zip(by_problem[k], result.outcomes, strict=True):
                if outcome.passed:
                    fixes.setdefault(k, {}).setdefault(i, (names, test))
        # Kept only where every failing test is fixed and the whole repaired suite passes.
        complete = [k for k in sorted(fixes) if set(fixes[k]) == set(failing[k])]
        suites = {k: [fixes[k][i][1] if i in fixes[k] else t
                      for i, t in enumerate(problems[k].baseline_tests)] for k in complete}
        checks = run([(problems[k].reference_program, suites[k]) for k in complete])
        for k, result in zip(complete, checks, strict=True):
            if not result.all_passed:
                fixes.pop(k)
        for k in [k for k in fixes if k not in complete]:
            fixes.pop(k)

    checked: Checked = {}
    for k in ks:
        problem, index = problems[k], problem_set.indices[k]
        if k in fixes:
            tests = list(problem.baseline_tests)
            repairs = []
            for i, (names, test) in sorted(fixes[k].items()):
                repairs.append(RepairRecord(index, problem.id, f"baseline_tests[{i}]", names,
                                            tests[i], test))
                tests[i] = test
            checked[k] = (replace(problem, baseline_tests=tuple(tests)), repairs)
        elif k in failing:
            record = problem_set.records[k]
            shape = call_shape(record)
            raw = record.get("baseline_tests") if isinstance(record, dict) else None
            issues = []
            for i in failing[k]:
                outcome = results[k].outcomes[i]
                test = raw[i] if isinstance(raw, list) and i < len(raw) else None
                issues.append(ProblemIssue(
                    problem.source, index, problem.id, f"baseline_tests[{i}]",
                    f"reference fails it: {outcome.status}: {outcome.message}",
                    failure_kind(outcome.status, outcome.message, record, test, shape)))
            checked[k] = SkippedProblem(index, problem.id, tuple(issues))
        else:
            checked[k] = (problem, [])
    return checked


def _fill(report: VetReport, problem_set: ProblemSet, checked: Checked) -> VetReport:
    """``report`` (structural skips) completed with what ``_check`` found, in file order;
    structurally sound problems not checked are counted as ``unchecked``."""
    skipped = list(report.skipped)
    for k in sorted(checked):
        verdict = checked[k]
        if isinstance(verdict, SkippedProblem):
            skipped.append(verdict)
            continue
        problem, repairs = verdict
        report.repairs.extend(repairs)
        report.problems.append(problem)
        report.indices.append(problem_set.indices[k])
    report.skipped = sorted(skipped, key=lambda s: s.index)
    report.unchecked = len(problem_set.problems) - len(checked)
    return report


# -- loading for a training run -------------------------------------------------------------------

class RunProblems(list):
    """The problems a run trains on (a plain list of ``Problem``) with the ``VetReport`` they
    came from as ``.report``."""

    def __init__(self, problems: Sequence[Problem] = (), report: VetReport | None = None):
        super().__init__(problems)
        self.report = report


_CACHE: dict[tuple, RunProblems] = {}
MIN_CHUNK = 8  # references checked per round at least, once the first round fell short


def _cache_key(source: str, *how: object) -> tuple:
    path = Path(source)
    stat = path.stat() if path.is_file() else None
    where = (str(path.resolve()), stat.st_mtime_ns, stat.st_size) if stat else (source,)
    return (*where, *how)


def invalid_message(report: VetReport, limit: int = 50) -> str:
    """The refusal of ``problems.on_invalid=fail``: every bad problem, and the setting."""
    skipped = report.skipped
    lines = [f"  {s}" for s in skipped[:limit]]
    if len(skipped) > limit:
        rest = [s.problem_id or f"#{s.index}" for s in skipped[limit:]]
        lines.append(f"  ... and {len(rest)} more: {', '.join(rest)}")
    stage = ("" if report.executed else
             " (structural checks; the references were not run, so there may be more)")
    return (f"{report.source}: {len(skipped)} of {report.total} problem(s) are invalid{stage} "
            f"and problems.on_invalid=fail:\n" + "\n".join(lines) + "\n"
            f"Set problems.on_invalid=skip (--set problems.on_invalid=skip) to train on the "
            f"valid problems and record the skipped ones in the run, or fix the file "
            f"(python -m problems validate {report.source} lists every issue).")


def load_for_run(source: str | Path, *, on_invalid: str = "fail",
                 ids: Sequence[str] | None = None, limit: int | None = None,
                 curriculum: bool = False, limits: Limits | None = None,
                 workers: int | None = Placement.workers, isolation: str = Placement.isolation,
                 quiet: bool = False) -> RunProblems:
    """The problems a training run uses: ``source`` checked structurally (the whole file),
    then, in the run's order (``ids``, else file order; easy -> hard with ``curriculum``),
    each reference run against its baseline tests in the sandbox (:func:`vet`'s checks and
    repairs, under the run's ``limits``, default ``Limits()``, ``workers`` and ``isolation``)
    until ``limit`` valid problems are found: a run of 40 problems from a file of 1000 runs
    about 40 references, not 1000 (seconds of start-up). The report counts the problems not
    run as ``unchecked``.

    ``on_invalid='fail'``: any structurally invalid problem in the file, or an invalid problem
    among those the run would use, raises ``ProblemLoadError`` listing them and naming the
    setting (structural issues at once, before any reference runs). ``on_invalid='skip'``:
    invalid problems are passed over (the next valid one takes the place); the report
    (``.report``) says what was repaired and skipped, and one line with the counts is printed.
    Done once per process for the same file, limits and selection (the CLI checks before
    Prefect starts, the flow then reuses it); the line is printed on every call not ``quiet``."""
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid={on_invalid!r}: must be one of {', '.join(ON_INVALID)}")
    name = str(source)
    limits = limits or Limits()
    key = _cache_key(name, limits, workers, isolation, on_invalid,
                     tuple(ids) if ids is not None else None, limit, curriculum)
    if key not in _CACHE:
        _CACHE[key] = _load_for_run(name, on_invalid, ids, limit, curriculum,
                                    _runner(limits, workers, isolation), limits.timeout_s)
    result = _CACHE[key]
    if not quiet and (result.report.skipped or result.report.repairs):
        print(f"problems: {result.report.summary()}", file=sys.stdout, flush=True)
    return result


def _load_for_run(name: str, on_invalid: str, ids: Sequence[str] | None, limit: int | None,
                  curriculum: bool, run: Callable[[Jobs], list[ExecutionResult]],
                  timeout_s: float) -> RunProblems:
    problem_set = load_problem_set(name)
    structural = _structural(problem_set, name, executed=False)
    if structural.skipped and on_invalid == "fail":
        raise ProblemLoadError(name, structural.issues, message=invalid_message(structural))
    gone = {s.problem_id: s for s in structural.skipped}
    _no_skipped_ids(name, ids, gone)
    # The run's order over the structurally sound problems, as positions in problem_set
    position = {id(p): k for k, p in enumerate(problem_set.problems)}
    order = [position[id(p)] for p in select(problem_set.problems, ids=ids,
                                             curriculum=curriculum)]
    need = len(order) if limit is None else min(limit, len(order))
    checked, done, valid = {}, 0, 0
    while done < len(order) and valid < need:
        # fail: exactly the problems the run would use; skip: the shortfall, then more
        size = need - valid if on_invalid == "fail" or not checked else \
            max(2 * (need - valid), MIN_CHUNK)
        got = _check(problem_set, order[done:done + size], run, repair=True)
        checked.update(got)
        done += size
        valid += sum(not isinstance(v, SkippedProblem) for v in got.values())
        if on_invalid == "fail" and valid < done:
            break  # a problem the run would use is invalid: refused below, nothing to look for
    report = _fill(_structural(problem_set, name, executed=True, timeout_s=timeout_s),
                   problem_set, checked)
    if report.skipped and on_invalid == "fail":
        raise ProblemLoadError(name, report.issues, message=invalid_message(report))
    _no_skipped_ids(name, ids, {s.problem_id: s for s in report.skipped})
    if not report.problems:
        raise ProblemLoadError(name, report.issues, message=(
            f"{name}: no valid problems ({report.summary()})"))
    chosen = [checked[k][0] for k in order[:done]
              if not isinstance(checked[k], SkippedProblem)][:need]
    return RunProblems(chosen, report)


def _no_skipped_ids(name: str, ids: Sequence[str] | None,
                    gone: dict[str | None, SkippedProblem]) -> None:
    bad = [f"{i} ({gone[i].kind}: {gone[i].issues[0].reason})" for i in ids or () if i in gone]
    if bad:
        raise ProblemLoadError(name, message=(
            f"{name}: problems.ids names skipped problem(s): {'; '.join(bad)}"))
