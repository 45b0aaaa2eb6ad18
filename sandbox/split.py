"""Split tests into candidate calls (run in the jail) and assertions (judged in the host).

A test that is only ``assert`` statements (plus ``import math``), whose every call into
candidate code has literal arguments, becomes a ``SplitTest``: the jail receives just the
calls (name + literal arguments), never the expected values. Anything else (loops, helpers,
``def test_*``) is a ``WholeTest`` and runs whole in a jailed process that holds no candidate
code (see ``worker``).
"""

from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass, field
from typing import Any

from sandbox.evaluate import SLOT_PREFIX, Evaluator, supported
from sandbox.plain import encode

# Names every whole test sees from a fixed, trusted prelude (never from candidate code), so a
# candidate cannot rebind ``math`` or ``isinstance`` under the test's feet.
TEST_PRELUDE = """\
import math, collections, itertools, functools, heapq, bisect, string, re, operator, random
from typing import *
from collections import Counter, defaultdict, deque, OrderedDict
from math import inf, gcd, sqrt, comb, isclose
"""
_PRELUDE_NAMES = {
    "math", "collections", "itertools", "functools", "heapq", "bisect", "string", "re",
    "operator", "random", "Counter", "defaultdict", "deque", "OrderedDict", "inf", "gcd", "sqrt",
    "comb", "isclose", "List", "Dict", "Tuple", "Set", "Optional", "Any", "Union", "Callable",
    "Iterable", "Sequence"}


@dataclass(frozen=True)
class Call:
    """One call into candidate code, with literal arguments."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        parts = [_short(a) for a in self.args] + [f"{k}={_short(v)}" for k, v in
                                                  self.kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


@dataclass
class SplitTest:
    source: str
    asserts: list[ast.expr]          # assert expressions with candidate calls as slot names
    calls: list[Call]                # slot i is ``f"{SLOT_PREFIX}{i}"``


@dataclass
class WholeTest:
    source: str


@dataclass
class BadTest:
    source: str
    message: str


def _short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except ValueError:  # int too large to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def defined_names(code: str) -> set[str]:
    """Top-level names the code binds (defs, classes, assignments, imports)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    return names


def proxy_names(names: set[str]) -> list[str]:
    """Candidate names a whole test may call: what the code binds (``defined_names``), minus
    builtins, dunders and the trusted prelude's names."""
    return sorted(n for n in names if not n.startswith("__")
                  and n not in _PRELUDE_NAMES and not hasattr(builtins, n) and n != "*")


def _constant(node: ast.expr) -> Any:
    """The value of a literal, or of a constant expression (``3 * 19``, ``[0] * 5``,
    ``list(range(3))`` is not one) evaluated here by the safe evaluator; ValueError if the
    node depends on anything else."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        pass
    if not supported(node):
        raise ValueError("not a constant expression")
    try:
        return Evaluator({}).eval(node)
    except Exception as exc:  # EvalLimit, ZeroDivisionError, ...: let the test run whole
        raise ValueError(str(exc)) from None


class _Slotter(ast.NodeTransformer):
    """Replace calls into candidate code by slot names; flag anything that cannot split."""

    def __init__(self, candidate: set[str], calls: list[Call]):
        self.candidate = candidate
        self.calls = calls
        self.ok = True

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        # A candidate-defined name wins over a builtin it shadows (as in Python); names the
        # candidate does not define are evaluated here if whitelisted, else the test runs whole.
        if not (isinstance(func, ast.Name) and func.id in self.candidate):
            return self.generic_visit(node)
        try:
            if any(isinstance(a, ast.Starred) for a in node.args):
                raise ValueError("starred argument")
            args = tuple(_constant(a) for a in node.args)
            kwargs = {k.arg: _constant(k.value) for k in node.keywords if k.arg is not None}
            if len(kwargs) != len(node.keywords):
                raise ValueError("**kwargs")
            encode(list(args)), encode(kwargs)  # complex etc. cannot cross the boundary
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            self.ok = False
            return node
        self.calls.append(Call(func.id, args, kwargs))
        return ast.copy_location(
            ast.Name(id=f"{SLOT_PREFIX}{len(self.calls) - 1}", ctx=ast.Load()), node)


def plan_test(source: str, candidate: set[str]) -> SplitTest | WholeTest | BadTest:
    """How to run one test; ``candidate`` is ``defined_names(code)``. Plans are cached: in
    training the same tests meet many candidates (and the reference)."""
    return _plan(source, frozenset(candidate))


@functools.lru_cache(maxsize=16384)
def _plan(source: str, candidate: frozenset[str]) -> SplitTest | WholeTest | BadTest:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return BadTest(source, f"test does not compile: {exc}")
    asserts: list[ast.expr] = []
    calls: list[Call] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import) and all(a.name == "math" and a.asname is None
                                                for a in stmt.names):
            continue
        if not isinstance(stmt, ast.Assert):
            return _whole(source, tree)
        slotter = _Slotter(candidate, calls)
        expr = slotter.visit(stmt.test)
        if not slotter.ok or not supported(expr):
            return _whole(source, ast.parse(source))
        asserts.append(expr)
    if not asserts:
        return _whole(source, tree)
    return SplitTest(source, asserts, calls)


def clear_plan_cache() -> None:
    _plan.cache_clear()


def _whole(source: str, tree: ast.Module) -> WholeTest | BadTest:
    try:  # parse() accepts some programs compile() rejects ('return' outside a function)
        compile(tree, "<test>", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return BadTest(source, f"test does not compile: {exc}")
    return WholeTest(source)
