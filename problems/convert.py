"""Turn raw problem records (seed JSON, JSONL, Parquet rows, HumanEval) into ``Problem``s.

Each converter returns either a ``Problem`` or the list of issues that stop it from being one;
nothing here raises on bad input.
"""

from __future__ import annotations

import ast
import copy
import re
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
from math import inf, gcd, sqrt, comb
"""
# Seed-format function problems annotate with ``List[int]`` too.
TYPING_PREAMBLE = "from typing import *\n"

REQUIRED = ("id", "description", "function_signature", "reference_solution", "baseline_tests")


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


def convert_record(record: Any, source: str, index: int) -> Problem | list[ProblemIssue]:
    """One seed-format record (function problem or LeetCode ``class Solution``) -> Problem."""
    pid = record.get("id") if isinstance(record, dict) else None
    pid = str(pid) if pid is not None else None

    def issue(field: str, reason: str) -> list[ProblemIssue]:
        return [ProblemIssue(source, index, pid, field, reason)]

    if not isinstance(record, dict):
        return issue("<record>", f"expected an object, got {type(record).__name__}")
    missing = [f for f in REQUIRED if f not in record or record[f] is None]
    if missing:
        return [ProblemIssue(source, index, pid, f, "missing field") for f in missing]
    for name in ("id", "description", "function_signature", "reference_solution"):
        if not isinstance(record[name], str) or not record[name].strip():
            return issue(name, f"expected a non-empty string, got {record[name]!r:.60}")
    tests = record["baseline_tests"]
    if isinstance(tests, str) or not hasattr(tests, "__iter__"):
        return issue("baseline_tests", f"expected a list, got {type(tests).__name__}")
    tests = list(tests)

    fn = _signature_def(record["function_signature"])
    if fn is None:
        return issue("function_signature",
                     f"not a Python function signature: {record['function_signature']!r:.80}")
    entry_point = record.get("entry_point") or fn.name
    method = bool(fn.args.args) and fn.args.args[0].arg == "self"
    reference = record["reference_solution"]
    signature = record["function_signature"]
    preamble = record.get("preamble") or TYPING_PREAMBLE
    if method:
        # LeetCode: the reference is a ``class Solution``; a module-level function of the same
        # name makes it callable the way candidates' plain functions are.
        preamble = LEETCODE_PREAMBLE
        signature = _plain_signature(fn)
        if re.search(r"^class Solution\b", reference, re.M) and not _defines_function(
                reference, entry_point):
            reference = (f"{reference.rstrip()}\n\n\ndef {entry_point}(*args, **kwargs):\n"
                         f"    return Solution().{entry_point}(*args, **kwargs)\n")

    issues: list[ProblemIssue] = []
    snippets: list[str] = []
    n_params = len(_params(fn))
    for i, test in enumerate(tests):
        if isinstance(test, str):
            snippets.append(test)
        elif isinstance(test, list | tuple):
            if len(test) != n_params + 1:
                issues += issue(f"baseline_tests[{i}]",
                                f"expected {n_params} argument(s) and the expected value "
                                f"({n_params + 1} items), got {len(test)}")
            else:
                snippets.append(literal_call_test(entry_point, list(test)))
        else:
            issues += issue(f"baseline_tests[{i}]",
                            f"expected an assert string or an [args..., expected] list, got "
                            f"{type(test).__name__}")
    if issues:
        return issues
    tags = record.get("tags") or ()
    return Problem(
        id=str(record["id"]),
        description=record["description"].strip(),
        function_signature=signature.strip(),
        entry_point=entry_point,
        baseline_tests=tuple(snippets),
        reference_solution=reference,
        difficulty=str(record.get("difficulty") or "unknown").lower(),
        tags=tuple(str(t) for t in tags),
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
    """Checks that need no execution: compiles, defines the entry point, tests parse."""
    out: list[ProblemIssue] = []

    def add(field: str, reason: str) -> None:
        out.append(ProblemIssue(problem.source, index, problem.id, field, reason))

    try:
        compile(problem.reference_program, f"<{problem.id} reference>", "exec")
    except SyntaxError as exc:
        add("reference_solution", f"does not compile: {exc.msg} (line {exc.lineno})")
    else:
        if not _defines(problem.reference_program, problem.entry_point):
            add("reference_solution", f"entry point {problem.entry_point!r} is not defined")
    if not problem.baseline_tests:
        add("baseline_tests", "no baseline tests")
    for i, test in enumerate(problem.baseline_tests):
        try:
            compile(test, f"<{problem.id} test {i}>", "exec")
        except SyntaxError as exc:
            add(f"baseline_tests[{i}]", f"not runnable Python: {exc.msg}: {test!r:.80}")
    if problem.difficulty not in ("easy", "medium", "hard", "unknown"):
        add("difficulty", f"{problem.difficulty!r} is not easy, medium or hard")
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
