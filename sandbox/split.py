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
import operator
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sandbox.cost import MAX_NESTING, Budget
from sandbox.evaluate import SLOT_PREFIX, Evaluator, supported
from sandbox.plain import MAX_COLLISIONS, encode

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


PLAN_SECONDS = 1.0            # planning one test (its constant arguments), at most
PLAN_ARG_WEIGHT = 2_000_000   # literal arguments of one split test, in all (see cost)
COMPILE_FREE_CONSTANTS = 2048  # a test with more constants is checked before it is compiled
COMPILE_FREE_SOURCE = 1 << 16  # a test ast.parse cannot take is compiled here only this short


def _constant(node: ast.expr, evaluator: Evaluator | None = None) -> Any:
    """The value of a literal, or of a constant expression (``3 * 19``, ``[0] * 5``,
    ``list(range(3))`` is not one) evaluated here by the safe evaluator (within its budget);
    ValueError if the node depends on anything else or costs too much (the test then runs
    whole in the jail)."""
    if not supported(node):
        raise ValueError("not a constant expression")
    try:
        return (evaluator or Evaluator({}, Budget(seconds=PLAN_SECONDS))).eval(node)
    except Exception as exc:  # EvalLimit, ZeroDivisionError, RecursionError, ...
        raise ValueError(str(exc)) from None


class _Slotter(ast.NodeTransformer):
    """Replace calls into candidate code by slot names; flag anything that cannot split.
    ``evaluator`` (one per test: one budget) evaluates the calls' literal arguments."""

    def __init__(self, candidate: set[str], calls: list[Call], evaluator: Evaluator,
                 sent: list[int]):
        self.candidate = candidate
        self.calls = calls
        self.evaluator = evaluator
        self.sent = sent  # [weight of the arguments of ``calls`` so far]
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
            args = tuple(_constant(a, self.evaluator) for a in node.args)
            kwargs = {k.arg: _constant(k.value, self.evaluator) for k in node.keywords
                      if k.arg is not None}
            if len(kwargs) != len(node.keywords):
                raise ValueError("**kwargs")
            weight = sum(map(self.evaluator.weight, args + tuple(kwargs.values())))
            if self.sent[0] + weight > PLAN_ARG_WEIGHT:
                raise ValueError("arguments too large to send: the test runs whole")
            self.evaluator.budget.charge(weight, "the arguments")  # (their encoding, below)
            encode(list(args)), encode(kwargs)  # complex etc. cannot cross the boundary
            self.sent[0] += weight
        except Exception:  # not a literal, too costly, not plain: the test runs whole
            self.ok = False
            return node
        self.calls.append(Call(func.id, args, kwargs))
        return ast.copy_location(
            ast.Name(id=f"{SLOT_PREFIX}{len(self.calls) - 1}", ctx=ast.Load()), node)


def _too_deep(node: ast.AST, limit: int = MAX_NESTING) -> bool:
    stack = [(node, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in ast.iter_child_nodes(node))
    return False


def plan_test(source: str, candidate: set[str]) -> SplitTest | WholeTest | BadTest:
    """How to run one test; ``candidate`` is ``defined_names(code)``. Plans are cached: in
    training the same tests meet many candidates (and the reference)."""
    return _plan(source, frozenset(candidate))


@functools.lru_cache(maxsize=16384)
def _plan(source: str, candidate: frozenset[str]) -> SplitTest | WholeTest | BadTest:
    try:
        tree = ast.parse(source)
    except (RecursionError, MemoryError):  # ast.parse gives up a little before compile()
        return _whole(source, parsed=False)
    except Exception as exc:  # SyntaxError, ValueError (a NUL byte), ...
        return BadTest(source, f"test does not compile: {exc}")
    try:
        return _split(source, tree, candidate)
    except Exception:  # RecursionError, MemoryError, ...: whatever the planner cannot handle
        return _whole(source)


def _split(source: str, tree: ast.Module, candidate: frozenset[str]
           ) -> SplitTest | WholeTest | BadTest:
    asserts: list[ast.expr] = []
    calls: list[Call] = []
    evaluator = Evaluator({}, Budget(seconds=PLAN_SECONDS))  # one budget for the whole test
    sent = [0]
    for stmt in tree.body:  # (the slotter rewrites the tree: _whole parses the source again)
        if isinstance(stmt, ast.Import) and all(a.name == "math" and a.asname is None
                                                for a in stmt.names):
            continue
        if not isinstance(stmt, ast.Assert):
            return _whole(source)
        if _too_deep(stmt.test):  # the slotter and the evaluator recurse: not this deep
            return _whole(source)
        slotter = _Slotter(candidate, calls, evaluator, sent)
        expr = slotter.visit(stmt.test)
        if not slotter.ok or not supported(expr):
            return _whole(source)
        asserts.append(expr)
    if not asserts:
        return _whole(source)
    return SplitTest(source, asserts, calls)


def clear_plan_cache() -> None:
    _plan.cache_clear()


def _whole(source: str, parsed: bool = True) -> WholeTest | BadTest:
    """A WholeTest if Python compiles the test, else a BadTest. The compile is checked here
    only where that is cheap: compiling keeps constants in dicts, so many constants crafted
    to share one hash value would take quadratic time; such a test is left to the jail."""
    try:
        if parsed:
            if _constants_clash(ast.parse(source)):
                return WholeTest(source)
        elif len(source) > COMPILE_FREE_SOURCE:
            return WholeTest(source)
        # parse() accepts some programs compile() rejects ('return' outside a function)
        compile(source, "<test>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        return BadTest(source, f"test does not compile: {exc}")
    except Exception:  # nothing else is expected; the jail will say
        return WholeTest(source)
    return WholeTest(source)


def _constants_clash(tree: ast.Module) -> bool:
    """Whether more than MAX_COLLISIONS distinct constants of ``tree`` (literals, and the
    tuples, frozensets and small arithmetic the compiler folds them into) share a hash."""
    nodes = list(ast.walk(tree))  # breadth-first: children after their parents
    if sum(isinstance(n, ast.Constant) for n in nodes) <= COMPILE_FREE_CONSTANTS:
        return False  # quadratic in this few is cheap
    folded: dict[int, Any] = {}
    per_hash: dict[int, int] = {}
    seen: set = set()
    for node in reversed(nodes):
        value = _fold(node, folded)
        if value is _NOT_CONSTANT:
            continue
        folded[id(node)] = value
        try:
            key = (type(value), value)
            size = len(seen)
            seen.add(key)  # compares it to at most MAX_COLLISIONS others
        except TypeError:
            continue
        if len(seen) > size:
            h = hash(key)
            per_hash[h] = per_hash.get(h, 0) + 1
            if per_hash[h] > MAX_COLLISIONS:
                return True
    return False


_NOT_CONSTANT = object()


def _fold(node: ast.AST, folded: dict[int, Any]) -> Any:
    """The constant the compiler may make of ``node``, its children already folded."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        if not node.elts or not all(id(e) in folded for e in node.elts):
            return _NOT_CONSTANT
        items = [folded[id(e)] for e in node.elts]
        if isinstance(node, ast.Set):  # a frozenset: only of items that do not clash
            try:
                hashes = [hash(i) for i in items]
            except TypeError:
                return _NOT_CONSTANT
            if max(Counter(hashes).values()) > MAX_COLLISIONS:
                return _NOT_CONSTANT  # (each is counted on its own anyway)
            return frozenset(items)
        return tuple(items)
    operands = ([node.left, node.right] if isinstance(node, ast.BinOp)
                else [node.operand] if isinstance(node, ast.UnaryOp) else None)
    if operands is None or not all(id(o) in folded for o in operands):
        return _NOT_CONSTANT
    values = [folded[id(o)] for o in operands]
    if not all(type(v) in (int, float, bool) and abs(v) < 1 << 4096 for v in values):
        return _NOT_CONSTANT
    try:
        if isinstance(node, ast.UnaryOp):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos,
                    ast.Invert: operator.invert}[type(node.op)](values[0])
        if isinstance(node.op, ast.Pow | ast.LShift):  # folded only to small results
            base, exp = values
            if type(exp) is not int or not 0 <= exp <= 128 or (
                    type(base) is int and abs(base).bit_length() * max(exp, 1) > 256):
                return _NOT_CONSTANT
            return base ** exp if isinstance(node.op, ast.Pow) else base << exp
        return {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv,
                ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
                ast.BitOr: operator.or_, ast.BitXor: operator.xor,
                ast.Div: operator.truediv}[type(node.op)](*values)
    except (KeyError, ArithmeticError, ValueError, TypeError):
        return _NOT_CONSTANT
