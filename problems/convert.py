"""Turn raw problem records (seed JSON, JSONL, Parquet rows, HumanEval) into ``Problem``s.

Each converter returns either a ``Problem`` or the list of issues that stop it from being one;
nothing here raises on bad input.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass
from typing import Any

from problems.model import Problem, ProblemIssue

# LeetCode runs solutions with these names already imported; its published solutions rely on
# that (``List[int]`` without ``from typing import List``), so we give every LeetCode-style
# program the same environment, candidates included.
LEETCODE_PREAMBLE = """\
from typing import *
import collections, functools, heapq, bisect, itertools, math, string, re, operator
from collections import Counter, defaultdict, deque, OrderedDict
from functools import cache, lru_cache, reduce
from itertools import accumulate, combinations, permutations, product
from heapq import heappush, heappop, heapify
from bisect import bisect_left, bisect_right, insort
from math import inf, gcd, sqrt, comb, ceil, floor, log, log2, log10, factorial
"""
# Seed-format function problems annotate with ``List[int]`` too.
TYPING_PREAMBLE = "from typing import *\n"

REQUIRED = ("id", "description", "function_signature", "reference_solution", "baseline_tests")
STRING_FIELDS = ("id", "description", "function_signature", "reference_solution")
OPTIONAL_STRINGS = ("entry_point", "preamble")
DIFFICULTY_VALUES = ("easy", "medium", "hard", "unknown")

# What each issue is, for counting skipped problems by reason (``ProblemIssue.kind``).
KIND_MISSING = "missing_field"
KIND_NULL = "null_field"
KIND_TYPE = "bad_field"
KIND_SIGNATURE = "bad_signature"
KIND_NO_TESTS = "no_baseline_tests"
KIND_TEST_SHAPE = "bad_test_shape"
KIND_TEST_SYNTAX = "test_not_python"
KIND_COMPILE = "reference_does_not_compile"
KIND_ENTRY = "entry_point_not_defined"
KIND_DUPLICATE = "duplicate_id"
KIND_DIFFICULTY = "bad_difficulty"
KIND_TAGS = "bad_tags"


def _show(value: Any) -> str:
    """``value`` for a message: its JSON type name and a short repr."""
    if value is None:
        return "null"
    names = {str: "string", bool: "boolean", int: "integer", float: "number", list: "list",
             tuple: "list", dict: "object"}
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{names.get(type(value), type(value).__name__)} {text}"


def _signature_def(signature: str) -> ast.FunctionDef | None:
    """Parse ``def f(a, b) -> int`` (colon optional, possibly cut mid-line) to its AST."""
    text = " ".join(signature.strip().split())  # joins signatures broken over lines
    text = text.rstrip(":").rstrip(",")
    for candidate in (text, text + ")"):
        try:
            node = ast.parse(candidate + ":\n    pass").body[0]
        except SyntaxError:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node
    return None


def _params(fn: ast.FunctionDef) -> list[str]:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return names[1:] if names and names[0] == "self" else names


def _plain_signature(fn: ast.FunctionDef) -> str:
    """``def twoSum(self, nums: List[int]) -> List[int]`` -> ``def twoSum(nums: ...) -> ...:``."""
    fn = copy.deepcopy(fn)
    if fn.args.posonlyargs and fn.args.posonlyargs[0].arg == "self":
        fn.args.posonlyargs.pop(0)
    elif fn.args.args and fn.args.args[0].arg == "self":
        fn.args.args.pop(0)
    fn.body = [ast.Pass()]
    return ast.unparse(fn).splitlines()[0]


def literal_call_test(entry_point: str, values: list[Any]) -> str:
    """``[arg1, ..., expected]`` -> ``assert entry_point(arg1, ...) == expected``."""
    *args, expected = values
    return f"assert {entry_point}({', '.join(repr(a) for a in args)}) == {expected!r}"


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
               and n.name == name for n in tree.body)


def _annotation(node: ast.expr | None) -> str | None:
    return ast.unparse(node) if node is not None else None


@dataclass(frozen=True)
class CallShape:
    """How a seed-format problem is called: entry point, parameters (name, annotation text) and
    the return annotation, from its ``function_signature`` (``self`` dropped)."""

    entry_point: str
    params: tuple[tuple[str, str | None], ...]
    returns: str | None


def call_shape(record: Any) -> CallShape | None:
    """The ``CallShape`` of a raw seed-format record, or ``None`` when it has no usable
    signature (repairs of ``[args..., expected]`` tests read the annotations)."""
    if not isinstance(record, dict) or not isinstance(record.get("function_signature"), str):
        return None
    fn = _signature_def(record["function_signature"])
    if fn is None:
        return None
    args = fn.args.posonlyargs + fn.args.args
    if args and args[0].arg == "self":
        args = args[1:]
    entry = record.get("entry_point")
    return CallShape(entry if isinstance(entry, str) and entry.strip() else fn.name,
                     tuple((a.arg, _annotation(a.annotation)) for a in args),
                     _annotation(fn.returns))


def convert_record(record: Any, source: str, index: int) -> Problem | list[ProblemIssue]:
    """One seed-format record (function problem or LeetCode ``class Solution``) -> Problem.

    Every issue of the record is reported in one pass: each field is checked on its own (a
    field present as ``null`` is reported as null, not missing), and the code checks (reference
    compiles and defines the entry point, tests are Python) run whenever the fields they need
    are usable, whatever is wrong elsewhere."""
    if not isinstance(record, dict):
        return [ProblemIssue(source, index, None, "<record>",
                             f"expected an object, got {_show(record)}", KIND_TYPE)]
    raw_id = record.get("id")
    pid = None if raw_id is None else (raw_id if isinstance(raw_id, str) else repr(raw_id))
    issues: list[ProblemIssue] = []

    def add(field: str, reason: str, kind: str) -> None:
        issues.append(ProblemIssue(source, index, pid, field, reason, kind))

    usable: dict[str, Any] = {}  # the fields that passed their own checks
    for name in REQUIRED:
        if name not in record:
            add(name, "missing field", KIND_MISSING)
        elif record[name] is None:
            what = "a list of tests" if name == "baseline_tests" else "a non-empty string"
            add(name, f"is null (expected {what})", KIND_NULL)
        elif name in STRING_FIELDS:
            value = record[name]
            if not isinstance(value, str) or not value.strip():
                add(name, f"expected a non-empty string, got {_show(value)}", KIND_TYPE)
            else:
                usable[name] = value
        else:
            tests = record[name]
            if isinstance(tests, str | bytes | dict) or not hasattr(tests, "__iter__"):
                add(name, f"expected a list, got {_show(tests)}", KIND_TYPE)
            else:
                usable[name] = list(tests)
    for name in OPTIONAL_STRINGS:
        value = record.get(name)
        if value is not None and not (isinstance(value, str) and value.strip()):
            add(name, f"expected a non-empty string or no value, got {_show(value)}", KIND_TYPE)
    difficulty = record.get("difficulty")
    if difficulty is not None:
        if not isinstance(difficulty, str):
            add("difficulty", f"expected one of easy, medium, hard, got {_show(difficulty)}",
                KIND_DIFFICULTY)
        elif difficulty.strip().lower() not in DIFFICULTY_VALUES:
            add("difficulty", f"{difficulty!r} is not easy, medium or hard", KIND_DIFFICULTY)
    tags = record.get("tags")
    if tags is not None:
        if isinstance(tags, str | bytes | dict) or not hasattr(tags, "__iter__"):
            add("tags", f"expected a list of strings, got {_show(tags)}", KIND_TAGS)
        else:
            for i, tag in enumerate(tags):
                if not isinstance(tag, str):
                    add(f"tags[{i}]", f"expected a string, got {_show(tag)}", KIND_TAGS)

    fn = None
    if "function_signature" in usable:
        fn = _signature_def(usable["function_signature"])
        if fn is None:
            add("function_signature", "not a Python function signature: "
                f"{usable['function_signature']!r:.80}", KIND_SIGNATURE)
    entry = record.get("entry_point")
    entry_point = entry if isinstance(entry, str) and entry.strip() else (
        fn.name if fn is not None else None)
    method = fn is not None and bool(fn.args.args) and fn.args.args[0].arg == "self"
    given = record.get("preamble")
    preamble = LEETCODE_PREAMBLE if method else (
        given if isinstance(given, str) and given.strip() else TYPING_PREAMBLE)
    signature = _plain_signature(fn) if method else usable.get("function_signature")

    reference = usable.get("reference_solution")
    if reference is not None:
        if method and entry_point and re.search(r"^class Solution\b", reference, re.M) \
                and not _defines_function(reference, entry_point):
            # LeetCode: the reference is a ``class Solution``; a module-level function of the
            # same name makes it callable the way candidates' plain functions are.
            reference = (f"{reference.rstrip()}\n\n\ndef {entry_point}(*args, **kwargs):\n"
                         f"    return Solution().{entry_point}(*args, **kwargs)\n")
        program = f"{preamble}\n{reference}"
        label = pid if pid is not None else f"#{index}"
        try:
            compile(program, f"<{label} reference>", "exec")
        except (SyntaxError, ValueError) as exc:
            # line numbers of the reference as recorded, not of the program with the preamble
            lineno = getattr(exc, "lineno", None)
            line = f" (line {lineno - preamble.count(chr(10)) - 1})" if lineno else ""
            add("reference_solution", f"does not compile: {getattr(exc, 'msg', exc)}{line}",
                KIND_COMPILE)
        else:
            if entry_point and not _defines(program, entry_point):
                add("reference_solution", f"entry point {entry_point!r} is not defined",
                    KIND_ENTRY)

    snippets: list[str] = []
    tests = usable.get("baseline_tests")
    if tests is not None and not tests:
        add("baseline_tests", "no baseline tests", KIND_NO_TESTS)
    n_params = len(_params(fn)) if fn is not None else None
    for i, test in enumerate(tests or ()):
        if isinstance(test, str):
            snippet = test
        elif isinstance(test, list | tuple):
            if n_params is None or entry_point is None:
                continue  # the signature's issue is reported; the shape cannot be checked
            if len(test) != n_params + 1:
                add(f"baseline_tests[{i}]", f"expected {n_params} argument(s) and the expected "
                    f"value ({n_params + 1} items), got {len(test)}", KIND_TEST_SHAPE)
                continue
            snippet = literal_call_test(entry_point, list(test))
        else:
            add(f"baseline_tests[{i}]", "expected an assert string or an [args..., expected] "
                f"list, got {_show(test)}", KIND_TEST_SHAPE)
            continue
        try:
            compile(snippet, f"<test {i}>", "exec")
        except (SyntaxError, ValueError) as exc:
            add(f"baseline_tests[{i}]", f"not runnable Python: {getattr(exc, 'msg', exc)}: "
                f"{snippet!r:.80}", KIND_TEST_SYNTAX)
            continue
        snippets.append(snippet)
    if issues:
        return issues
    return Problem(
        id=usable["id"],
        description=usable["description"].strip(),
        function_signature=signature.strip(),
        entry_point=entry_point,
        baseline_tests=tuple(snippets),
        reference_solution=reference,
        difficulty=(difficulty or "unknown").strip().lower(),
        tags=tuple(tags or ()),
        preamble=preamble,
        source=source,
    )


def _defines_function(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body)


def structural_issues(problem: Problem, index: int) -> list[ProblemIssue]:
    """Checks that need no execution: compiles, defines the entry point, tests parse. (Seed
    records get these in ``convert_record``; this is the check of built ``Problem``s.)"""
    out: list[ProblemIssue] = []

    def add(field: str, reason: str, kind: str) -> None:
        out.append(ProblemIssue(problem.source, index, problem.id, field, reason, kind))

    try:
        compile(problem.reference_program, f"<{problem.id} reference>", "exec")
    except (SyntaxError, ValueError) as exc:
        line = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) else ""
        add("reference_solution", f"does not compile: {getattr(exc, 'msg', exc)}{line}",
            KIND_COMPILE)
    else:
        if not _defines(problem.reference_program, problem.entry_point):
            add("reference_solution", f"entry point {problem.entry_point!r} is not defined",
                KIND_ENTRY)
    if not problem.baseline_tests:
        add("baseline_tests", "no baseline tests", KIND_NO_TESTS)
    for i, test in enumerate(problem.baseline_tests):
        try:
            compile(test, f"<{problem.id} test {i}>", "exec")
        except (SyntaxError, ValueError) as exc:
            add(f"baseline_tests[{i}]", f"not runnable Python: {getattr(exc, 'msg', exc)}: "
                f"{test!r:.80}", KIND_TEST_SYNTAX)
    if problem.difficulty not in DIFFICULTY_VALUES:
        add("difficulty", f"{problem.difficulty!r} is not easy, medium or hard", KIND_DIFFICULTY)
    return out


# -- HumanEval ---------------------------------------------------------------------------------

def _split_check(test: str, entry_point: str) -> list[str] | None:
    """HumanEval's ``check(candidate)`` as one snippet per assert, or ``None`` when its body is
    more than asserts (loops, helpers), in which case it runs whole."""
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    check = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    others = [n for n in tree.body if n not in check and not (
        isinstance(n, ast.Assign) and all(isinstance(t, ast.Name) and t.id == "METADATA"
                                          for t in n.targets))
        and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if len(check) != 1 or others:
        return None
    body = [n for n in check[0].body
            if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if not body or not all(isinstance(n, ast.Assert) for n in body):
        return None

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name(entry_point, node.ctx) if node.id == "candidate" else node

    return [ast.unparse(Rename().visit(n)) for n in body]


def convert_humaneval(record: dict[str, Any], index: int) -> Problem | list[ProblemIssue]:
    entry_point = record["entry_point"]
    prompt = record["prompt"]
    try:
        tree = ast.parse(prompt + "    pass\n")
    except SyntaxError as exc:
        return [ProblemIssue("humaneval", index, record["task_id"], "prompt", str(exc))]
    target = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
                   and n.name == entry_point), None)
    if target is None:
        return [ProblemIssue("humaneval", index, record["task_id"], "entry_point",
                             f"{entry_point!r} not defined by the prompt")]
    lines = prompt.splitlines()
    # Everything before the entry point (imports, helper functions) is the problem's preamble.
    preamble = "\n".join(lines[: (target.decorator_list[0].lineno if target.decorator_list
                                  else target.lineno) - 1]).strip() + "\n"
    signature = "\n".join(lines[target.lineno - 1: target.body[0].lineno - 1]).strip()
    description = ast.get_docstring(target) or ""
    tests = _split_check(record["test"], entry_point) or [
        f"{record['test'].strip()}\n\ncheck({entry_point})"]
    return Problem(
        id=record["task_id"],
        description=description,
        function_signature=signature,
        entry_point=entry_point,
        baseline_tests=tuple(tests),
        reference_solution=prompt + record["canonical_solution"],
        difficulty="unknown",
        tags=("humaneval",),
        preamble=preamble if preamble.strip() else "",
        source="humaneval",
    )
