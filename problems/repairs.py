"""Recorded baseline tests (``[arg1, ..., expected]``): the repairs of their recording-format
defects, and the kind of each failure that is not repaired. Pure: nothing here runs code;
``problems.vet`` runs the candidates this module makes and keeps the ones that prove out.

    from problems.repairs import candidates, render, failure_kind
    shape = problems.convert.call_shape(record)
    for names, values in candidates(raw_test, shape):     # each rule alone, then composed
        test = render(names, entry_point, values)          # a test string, for the sandbox
    failure_kind(outcome.status, outcome.message, record, raw_test, shape)  # unrepaired: why

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
- ``in_place_answers``: a ``-> None`` function answers by changing its first argument, as
  LeetCode judges it; the test compares that argument with the recorded answer.

What cannot be repaired safely is skipped with its reasons (``ProblemIssue.kind``, from
:func:`failure_kind`): missing tests, class-design problems, LeetCode's ``ListNode``/``TreeNode``
values (the sandbox passes plain data only), values cut off mid-way in the recording, in-place
answers, wrong recorded answers...
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from problems.convert import CallShape, literal_call_test

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
KIND_SKIPPED = "test_skipped"
_STATUS_KIND = {"failed": KIND_WRONG, "error": KIND_RAISES, "timeout": KIND_TIMEOUT,
                "crashed": KIND_CRASH, "invalid": KIND_INVALID_TEST, "infra": KIND_INFRA,
                "skipped": KIND_SKIPPED}
_ENTITY = re.compile(r"&(?:[a-zA-Z]+|#\d+|#x[0-9a-fA-F]+);")
_NODE_TYPES = re.compile(r"\b(?:ListNode|TreeNode)\b")


def _slot_annotations(shape: CallShape) -> list[str | None]:
    """Annotation of each item of an ``[args..., expected]`` test (the return one last)."""
    return [a for _, a in shape.params] + [shape.returns]


def _is_str(annotation: str | None) -> bool:
    return annotation is not None and annotation.replace(" ", "") in ("str", "Optional[str]")


def _is_container(annotation: str | None) -> bool:
    return annotation is not None and bool(re.match(
        r"(?:typing\.)?(?:Optional\[)?(?:List|list|Dict|dict|Set|set|Tuple|tuple)\b",
        annotation.replace(" ", "")))


# -- repair rules ---------------------------------------------------------------------------------

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


def render(names: Sequence[str], entry_point: str, values: list[Any]) -> str:
    """The test string of values repaired by the rules ``names`` (the first rule with its own
    ``render`` decides; otherwise ``assert f(args) == expected``)."""
    rules = {r.name: r for r in REPAIRS}
    how = next((rules[n].render for n in names if rules[n].render), None)
    return (how or literal_call_test)(entry_point, values)


def candidates(test: Any, shape: CallShape | None) -> list[tuple[tuple[str, ...], list]]:
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


# -- what is not repaired -------------------------------------------------------------------------

def failure_kind(outcome_status: str, message: str, record: Any, test: Any,
                 shape: CallShape | None) -> str:
    """Why a reference fails one of its recorded tests (the raw ``test`` of ``record``), as a
    kind: a recording defect no rule repairs, else the sandbox status (``KIND_WRONG``...)."""
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
