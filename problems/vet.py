"""Vet a problem source for training: structural checks, each reference against its own
baseline tests in the sandbox, safe repairs of recorded-answer formats, and a report of what is
valid, what was repaired (how) and what is skipped (why).

    from problems.vet import vet, load_for_run
    report = vet("../shared/data/leetcode_formatted.json", timeout_s=2.0)
    report.counts()      # {'total': 720, 'valid': ..., 'repaired_by': {...}, 'skipped_by': {...}}
    problems = load_for_run(source, on_invalid="skip", limit=4)   # problems.report is the report

Repairs
-------
A repair is a named transformation of one recorded ``[arg1, ..., expected]`` baseline test that
undoes a *recording-format* defect, never a weakening: the repaired test makes the same call and
demands one exact value (same comparison, nothing dropped, nothing loosened). A repair is only
applied to a test the reference fails, and only kept when the reference passes the repaired test
and then the problem's whole repaired suite, both run in the sandbox: that run is the proof that
the repaired value is the reference's answer, in its exact form. Every applied repair is recorded
(problem, test, rule, test before and after) and counted. Rules (``REPAIRS``):

- ``tuple_answers_recorded_as_lists``: JSON has no tuples, so a reference's tuple answer was
  recorded as a list; the expected value becomes that tuple (``== [0, 1]`` -> ``== (0, 1)``).
- ``html_escaped_values``: a value recorded HTML-escaped (``'[&quot;a&quot;]'``) is unescaped and,
  where its annotation is not ``str``, read as the JSON it then is (``['a']``).
- ``json_text_values``: a value whose annotation is a container, recorded as the JSON text of it
  (``'[[1,2],[3,4]]'``), is read as that JSON.
- ``str_answers_recorded_unquoted``: a ``-> str`` answer recorded without its quotes
  (``1211`` for ``"1211"``).

What cannot be repaired safely is skipped with its reasons (``ProblemIssue.kind``): missing tests,
class-design problems, LeetCode's ``ListNode``/``TreeNode`` values (the sandbox passes plain data
only), values cut off mid-way in the recording, in-place answers, wrong recorded answers...
"""

from __future__ import annotations

import html
import json
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from problems.convert import CallShape, call_shape, literal_call_test
from problems.loaders import load_problem_set, select
from problems.model import Problem, ProblemIssue, ProblemLoadError, ProblemSet

ON_INVALID = ("fail", "skip")
REPORT_FORMAT = "problems.vet/1"
RUN_RECORD = "problems.json"  # the report's name in a run store's ``_run/`` and in MLflow

# Kinds of execution issues (structural kinds are in ``problems.convert``).
KIND_NODE_TYPES = "leetcode_node_types"
KIND_HTML = "html_escaped_values"
KIND_TRUNCATED = "truncated_values"
KIND_IN_PLACE = "in_place_answer"
KIND_WRONG = "wrong_answer"
KIND_RAISES = "reference_raises"
KIND_TIMEOUT = "reference_timeout"
KIND_CRASH = "reference_crashed"
KIND_INVALID_TEST = "test_not_runnable"
KIND_INFRA = "sandbox_infra"
_STATUS_KIND = {"failed": KIND_WRONG, "error": KIND_RAISES, "timeout": KIND_TIMEOUT,
                "crashed": KIND_CRASH, "invalid": KIND_INVALID_TEST, "infra": KIND_INFRA}
_ENTITY = re.compile(r"&(?:[a-zA-Z]+|#\d+|#x[0-9a-fA-F]+);")
_NODE_TYPES = re.compile(r"\b(?:ListNode|TreeNode)\b")


# -- repair rules ---------------------------------------------------------------------------------

def _slot_annotations(shape: CallShape) -> list[str | None]:
    """Annotation of each item of an ``[args..., expected]`` test (the return one last)."""
    return [a for _, a in shape.params] + [shape.returns]


def _is_str(annotation: str | None) -> bool:
    return annotation is not None and annotation.replace(" ", "") in ("str", "Optional[str]")


def _is_container(annotation: str | None) -> bool:
    return annotation is not None and bool(re.match(
        r"(?:typing\.)?(?:Optional\[)?(?:List|list|Dict|dict|Set|set|Tuple|tuple)\b",
        annotation.replace(" ", "")))


def _tuple_answers(test: list, shape: CallShape) -> list | None:
    if not isinstance(test[-1], list):
        return None
    return [*test[:-1], tuple(test[-1])]


def _html_values(test: list, shape: CallShape) -> list | None:
    out, changed = [], False
    for value, annotation in zip(test, _slot_annotations(shape), strict=True):
        if isinstance(value, str) and _ENTITY.search(value):
            text = html.unescape(value)
            if not _is_str(annotation):
                try:
                    text = json.loads(text)
                except ValueError:
                    return None  # not JSON once unescaped (cut off): not this repair
            value, changed = text, True
        out.append(value)
    return out if changed else None


def _json_text_values(test: list, shape: CallShape) -> list | None:
    out, changed = [], False
    for value, annotation in zip(test, _slot_annotations(shape), strict=True):
        if isinstance(value, str) and _is_container(annotation) and not _ENTITY.search(value):
            try:
                parsed = json.loads(value)
            except ValueError:
                return None
            if isinstance(parsed, list | dict):
                value, changed = parsed, True
        out.append(value)
    return out if changed else None


def _unquoted_str_answers(test: list, shape: CallShape) -> list | None:
    expected = test[-1]
    if not _is_str(shape.returns) or isinstance(expected, bool) \
            or not isinstance(expected, int | float):
        return None
    return [*test[:-1], str(expected)]


def _in_place_answers(test: list, shape: CallShape) -> list | None:
    if shape.returns != "None" or test[-1] is None or not shape.params:
        return None
    return list(test)  # same values; the test is rendered by ``in_place_test``


def in_place_test(entry_point: str, values: list[Any]) -> str:
    """``[arg1, ..., expected]`` of a ``-> None`` function that answers by changing its first
    argument, as LeetCode judges it: call, then compare that argument with ``expected``."""
    first, *rest, expected = values
    args = ", ".join(["answer", *(repr(a) for a in rest)])
    return f"answer = {first!r}\n{entry_point}({args})\nassert answer == {expected!r}"


@dataclass(frozen=True)
class RepairRule:
    name: str
    what: str
    apply: Callable[[list, CallShape], list | None]
    render: Callable[[str, list[Any]], str] | None = None
    """How the repaired values become a test (default: ``assert f(args) == expected``)."""


REPAIRS: tuple[RepairRule, ...] = (
    RepairRule("tuple_answers_recorded_as_lists",
               "the reference answers a tuple, recorded as a list (JSON has no tuples)",
               _tuple_answers),
    RepairRule("html_escaped_values", "values recorded HTML-escaped", _html_values),
    RepairRule("json_text_values", "container values recorded as their JSON text",
               _json_text_values),
    RepairRule("str_answers_recorded_unquoted", "a str answer recorded without its quotes",
               _unquoted_str_answers),
    RepairRule("in_place_answers", "a -> None function's answer is its changed first argument "
               "(LeetCode judges that argument)", _in_place_answers, in_place_test),
)


def _render(names: Sequence[str], entry_point: str, values: list[Any]) -> str:
    rules = {r.name: r for r in REPAIRS}
    render = next((rules[n].render for n in names if rules[n].render), None)
    return (render or literal_call_test)(entry_point, values)


def _candidates(test: Any, shape: CallShape | None) -> list[tuple[tuple[str, ...], list]]:
    """Repaired versions of one recorded test to try, in order: each applicable rule alone,
    then all of them composed."""
    if shape is None or not isinstance(test, list | tuple) or \
            len(test) != len(shape.params) + 1:
        return []
    test = list(test)
    out = []
    for rule in REPAIRS:
        repaired = rule.apply(test, shape)
        if repaired is not None:
            out.append(((rule.name,), repaired))
    if len(out) > 1:
        names, current = [], test
        for rule in REPAIRS:
            repaired = rule.apply(current, shape)
            if repaired is not None:
                names.append(rule.name)
                current = repaired
        out.append((tuple(names), current))
    return out


# -- the report -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RepairRecord:
    """One repaired baseline test: which problem and test, by which rule(s), before and after."""

    index: int
    problem_id: str
    field: str
    repairs: tuple[str, ...]
    before: str
    after: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.problem_id, "field": self.field,
                "repairs": list(self.repairs), "before": self.before, "after": self.after}

    def __str__(self) -> str:
        return (f"#{self.index} ({self.problem_id}): {self.field}: repaired "
                f"({'+'.join(self.repairs)}): {self.before!r:.80} -> {self.after!r:.80}")


@dataclass(frozen=True)
class SkippedProblem:
    index: int
    problem_id: str | None
    issues: tuple[ProblemIssue, ...]

    @property
    def kind(self) -> str:
        """The first reason (what the count by reason counts)."""
        return self.issues[0].kind or "other"

    @property
    def kinds(self) -> list[str]:
        return sorted({i.kind or "other" for i in self.issues})

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.problem_id, "kind": self.kind,
                "kinds": self.kinds,
                "issues": [{"field": i.field, "kind": i.kind, "reason": i.reason}
                           for i in self.issues]}

    def __str__(self) -> str:
        more = f" (+{len(self.issues) - 1} more)" if len(self.issues) > 1 else ""
        first = self.issues[0]
        who = f"#{self.index}" + (f" ({self.problem_id})" if self.problem_id else "")
        return f"{who}: {self.kind}: {first.field}: {first.reason}{more}"


@dataclass
class VetReport:
    """What vetting found: valid problems (repaired ones included), repairs, skipped problems."""

    source: str
    total: int
    problems: list[Problem] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    repairs: list[RepairRecord] = field(default_factory=list)
    skipped: list[SkippedProblem] = field(default_factory=list)
    executed: bool = False
    """Whether the references were run (``False``: structural checks only)."""
    timeout_s: float | None = None

    @property
    def issues(self) -> list[ProblemIssue]:
        return [i for s in self.skipped for i in s.issues]

    @property
    def repaired_ids(self) -> list[str]:
        return list(dict.fromkeys(r.problem_id for r in self.repairs))

    def counts(self) -> dict[str, Any]:
        by_rule: Counter[str] = Counter()
        for pid in self.repaired_ids:
            for name in sorted({n for r in self.repairs if r.problem_id == pid
                                for n in r.repairs}):
                by_rule[name] += 1
        return {"total": self.total, "valid": len(self.problems),
                "repaired": len(self.repaired_ids),
                "repaired_by": dict(by_rule.most_common()),
                "repaired_tests": len(self.repairs),
                "skipped": len(self.skipped),
                "skipped_by": dict(Counter(s.kind for s in self.skipped).most_common())}

    def summary(self) -> str:
        """One line: ``SOURCE: 720 problems: 313 valid (34 repaired: ...), 407 skipped (...)``."""
        c = self.counts()
        repaired = (f" ({c['repaired']} repaired: "
                    + ", ".join(f"{k} {v}" for k, v in c["repaired_by"].items()) + ")"
                    if c["repaired"] else "")
        skipped = (" (" + ", ".join(f"{k} {v}" for k, v in c["skipped_by"].items()) + ")"
                   if c["skipped"] else "")
        checked = "" if self.executed else "; references not run"
        return (f"{self.source}: {c['total']} problem(s): {c['valid']} valid{repaired}, "
                f"{c['skipped']} skipped{skipped}{checked}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": REPORT_FORMAT, "source": self.source, "executed": self.executed,
                "timeout_s": self.timeout_s, "counts": self.counts(),
                "repairs": [r.to_dict() for r in self.repairs],
                "skipped": [s.to_dict() for s in self.skipped],
                "valid_ids": [p.id for p in self.problems]}


# -- vetting --------------------------------------------------------------------------------------

def _execution_kind(outcome_status: str, message: str, record: Any, test: Any,
                    shape: CallShape | None) -> str:
    """Why a reference fails one of its recorded tests, as a kind."""
    text = " ".join(str(record.get(k, "")) for k in ("function_signature",)) \
        if isinstance(record, dict) else ""
    if _NODE_TYPES.search(text) or _NODE_TYPES.search(message):
        return KIND_NODE_TYPES
    values = list(test) if isinstance(test, list | tuple) else []
    if any(isinstance(v, str) and _ENTITY.search(v) for v in values):
        return KIND_HTML
    annotations = _slot_annotations(shape) if shape and len(values) == len(shape.params) + 1 \
        else [None] * len(values)
    for value, annotation in zip(values, annotations, strict=True):
        if isinstance(value, str) and not _is_str(annotation) and value[:1] in "[{" and value:
            try:
                json.loads(value)
            except ValueError:
                return KIND_TRUNCATED
    if shape is not None and shape.returns == "None" and values and values[-1] is not None:
        return KIND_IN_PLACE
    return _STATUS_KIND.get(outcome_status, KIND_WRONG)


def _run(jobs: list[tuple[str, list[str]]], options: dict[str, Any]) -> list:
    from sandbox import execute_many

    if not jobs:
        return []
    results = execute_many(jobs, **options)
    again = [i for i, r in enumerate(results) if any(o.status == "infra" for o in r.outcomes)]
    if again:  # the harness failed, not the reference: once more before it counts
        for i, result in zip(again, execute_many([jobs[i] for i in again], **options),
                             strict=True):
            results[i] = result
    return results


def _structural_skips(problem_set: ProblemSet) -> list[SkippedProblem]:
    by_index: dict[int, list[ProblemIssue]] = {}
    for issue in problem_set.issues:
        by_index.setdefault(issue.index, []).append(issue)
    return [SkippedProblem(i, issues[0].problem_id, tuple(issues))
            for i, issues in sorted(by_index.items())]


def vet(source: str | Path, *, execute: bool = True, repair: bool = True,
        timeout_s: float = 5.0, **sandbox_options: Any) -> VetReport:
    """Load ``source``, run every structurally sound reference against its baseline tests in
    the sandbox (``execute``), repair recorded-format defects (``repair``; see the module
    docstring) and report. Raises ``ProblemLoadError`` only for a source that cannot be read
    at all; a bad problem is a skipped entry of the report."""
    problem_set = load_problem_set(source)
    report = VetReport(source=str(source), total=problem_set.total,
                       skipped=_structural_skips(problem_set), executed=execute,
                       timeout_s=timeout_s if execute else None)
    if not execute:
        report.problems, report.indices = list(problem_set.problems), list(problem_set.indices)
        return report
    options = {"timeout_s": timeout_s, **sandbox_options}
    problems = problem_set.problems
    results = _run([(p.reference_program, list(p.baseline_tests)) for p in problems], options)
    failing = {k: [i for i, o in enumerate(r.outcomes) if not o.passed]
               for k, r in enumerate(results)}
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
                for names, values in _candidates(raw_tests[i], shape):
                    tried.append((k, i, names, _render(names, problems[k].entry_point,
                                                       values)))
        by_problem: dict[int, list[tuple[int, tuple[str, ...], str]]] = {}
        for k, i, names, test in tried:
            by_problem.setdefault(k, []).append((i, names, test))
        order = sorted(by_problem)
        outcomes = _run([(problems[k].reference_program, [t for _, _, t in by_problem[k]])
                         for k in order], options)
        for k, result in zip(order, outcomes, strict=True):
            for (i, names, test), outcome in zip(by_problem[k], result.outcomes, strict=True):
                if outcome.passed:
                    fixes.setdefault(k, {}).setdefault(i, (names, test))
        # Kept only where every failing test is fixed and the whole repaired suite passes.
        complete = [k for k in sorted(fixes) if set(fixes[k]) == set(failing[k])]
        suites = {k: [fixes[k][i][1] if i in fixes[k] else t
                      for i, t in enumerate(problems[k].baseline_tests)] for k in complete}
        checks = _run([(problems[k].reference_program, suites[k]) for k in complete], options)
        for k, result in zip(complete, checks, strict=True):
            if not result.all_passed:
                fixes.pop(k)
        for k in [k for k in fixes if k not in complete]:
            fixes.pop(k)

    skipped = list(report.skipped)
    for k, problem in enumerate(problems):
        index = problem_set.indices[k]
        if k in fixes:
            tests = list(problem.baseline_tests)
            for i, (names, test) in sorted(fixes[k].items()):
                report.repairs.append(RepairRecord(index, problem.id, f"baseline_tests[{i}]",
                                                   names, tests[i], test))
                tests[i] = test
            problem = replace(problem, baseline_tests=tuple(tests))
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
                    _execution_kind(outcome.status, outcome.message, record, test, shape)))
            skipped.append(SkippedProblem(index, problem.id, tuple(issues)))
            continue
        report.problems.append(problem)
        report.indices.append(index)
    report.skipped = sorted(skipped, key=lambda s: s.index)
    return report


# -- loading for a training run -------------------------------------------------------------------

class RunProblems(list):
    """The problems a run trains on (a plain list of ``Problem``) with the ``VetReport`` they
    came from as ``.report``."""

    def __init__(self, problems: Sequence[Problem] = (), report: VetReport | None = None):
        super().__init__(problems)
        self.report = report


_CACHE: dict[tuple, VetReport] = {}


def _cache_key(source: str, execute: bool, options: dict[str, Any]) -> tuple:
    path = Path(source)
    stat = path.stat() if path.is_file() else None
    where = (str(path.resolve()), stat.st_mtime_ns, stat.st_size) if stat else (source,)
    return (*where, execute, tuple(sorted(options.items())))


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
                 curriculum: bool = False, timeout_s: float = 2.0, quiet: bool = False,
                 **sandbox_options: Any) -> RunProblems:
    """The problems a training run uses: ``source`` vetted (:func:`vet`, with the run's
    sandbox limits), then selected (``ids``, ``curriculum``, ``limit``).

    ``on_invalid='fail'``: any invalid problem raises ``ProblemLoadError`` listing them all and
    naming the setting (structural issues fail at once, before any reference runs).
    ``on_invalid='skip'``: the valid problems (repaired ones included) are used; the report
    (``.report``) says what was repaired and skipped, and one line with the counts is printed.
    Vetting is done once per process for the same file and limits (the CLI checks before
    Prefect starts, the flow then reuses it)."""
    if on_invalid not in ON_INVALID:
        raise ValueError(f"on_invalid={on_invalid!r}: must be one of {', '.join(ON_INVALID)}")
    name = str(source)
    options = {"timeout_s": timeout_s, **sandbox_options}
    key = _cache_key(name, True, options)
    report = _CACHE.get(key)
    fresh = report is None
    if fresh:
        if on_invalid == "fail":
            structural = vet(name, execute=False)
            if structural.skipped:
                raise ProblemLoadError(name, structural.issues,
                                       message=invalid_message(structural))
        report = vet(name, **options)
        _CACHE[key] = report
    if report.skipped and on_invalid == "fail":
        raise ProblemLoadError(name, report.issues, message=invalid_message(report))
    if not report.problems:
        raise ProblemLoadError(name, report.issues, message=(
            f"{name}: no valid problems ({report.summary()})"))
    if ids is not None:
        gone = {s.problem_id: s for s in report.skipped}
        bad = [f"{i} ({gone[i].kind}: {gone[i].issues[0].reason})" for i in ids if i in gone]
        if bad:
            raise ProblemLoadError(name, message=(
                f"{name}: problems.ids names skipped problem(s): {'; '.join(bad)}"))
    if fresh and not quiet and (report.skipped or report.repairs):
        print(f"problems: {report.summary()}", file=sys.stdout, flush=True)
    chosen = select(report.problems, ids=ids, limit=limit, curriculum=curriculum)
    return RunProblems(chosen, report)
