"""A small, safe evaluator for assert expressions, run in the trusted process.

Calls into candidate code have already been replaced by *slots* holding plain data that came
back from the jail (see ``split``). What remains is evaluated here over builtin values only:
constants, displays, comparisons, boolean and arithmetic operators, subscripts, a whitelist of
builtins (``len``, ``sorted``, ``abs``, ...), ``math`` functions and a few read-only methods of
plain types. No name lookup reaches the host's globals, and operators whose cost grows with a
value the candidate chose (``**``, ``<<``, sequence repetition) are bounded, so a hostile return
value cannot make the trusted process hang or exhaust memory.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

SLOT_PREFIX = "\x00slot"  # a name no source text can spell


class EvalLimit(Exception):
    """The expression would cost too much to evaluate."""


class SlotRaised(Exception):
    """A candidate call the expression reached had raised (or returned non-plain data)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


SAFE_FUNCS: dict[str, Any] = {
    f.__name__: f for f in (len, sorted, set, frozenset, list, tuple, dict, abs, round, min,
                            max, sum, all, any, isinstance, int, float, str, bool,
                            reversed, enumerate, zip, type, repr, chr, ord, divmod, hash)
}
SAFE_VALUES: dict[str, Any] = {"int": int, "float": float, "str": str, "bool": bool,
                               "list": list, "tuple": tuple, "dict": dict, "set": set,
                               "frozenset": frozenset, "bytes": bytes, "NoneType": type(None)}
MATH_NAMES = {"isclose", "fabs", "sqrt", "floor", "ceil", "isnan", "isinf", "isfinite", "log",
              "log2", "log10", "exp", "trunc", "gcd", "copysign", "pi", "e", "inf", "nan",
              "sin", "cos", "tan", "hypot", "fsum"}  # no factorial/comb/prod: unbounded cost
# Read-only methods of plain types, by receiver type.
SAFE_METHODS: dict[type, set[str]] = {
    str: {"lower", "upper", "strip", "lstrip", "rstrip", "split", "startswith", "endswith",
          "count", "find", "index", "isdigit", "isalpha", "isalnum", "isspace", "islower",
          "isupper", "splitlines", "title", "capitalize", "casefold"},
    list: {"count", "index", "copy"}, tuple: {"count", "index"},
    dict: {"keys", "values", "items", "get", "copy"},
    set: {"issubset", "issuperset", "isdisjoint", "union", "intersection", "difference"},
    frozenset: {"issubset", "issuperset", "isdisjoint"},
    bytes: {"decode", "count", "startswith", "endswith"}, float: {"is_integer"},
    int: {"bit_length", "bit_count"},
}
MAX_BITS = 1 << 20      # largest int a ** or << may build
MAX_ITEMS = 10_000_000  # longest sequence a * may build

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
           ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Is: operator.is_, ast.IsNot: operator.is_not,
           ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_UNOPS = {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
          ast.Invert: operator.invert}
_SIMPLE = (ast.Constant, ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp,
           ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Load,
           ast.keyword, *_BINOPS, *_CMPOPS, *_UNOPS, ast.And, ast.Or)


def supported(node: ast.AST) -> bool:
    """Whether ``node`` (a candidate-call-free tree, slots in place) is something ``evaluate``
    handles; otherwise the test runs whole in the jail."""
    if isinstance(node, ast.Name):
        return node.id.startswith(SLOT_PREFIX) or node.id in SAFE_VALUES or node.id in SAFE_FUNCS
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "math":
            return node.attr in MATH_NAMES
        return any(node.attr in names for names in SAFE_METHODS.values()) and supported(
            node.value)
    if isinstance(node, ast.Call):
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            return False
        func_ok = (isinstance(node.func, ast.Name) and node.func.id in SAFE_FUNCS) or (
            isinstance(node.func, ast.Attribute) and supported(node.func))
        return func_ok and all(supported(c) for c in node.args + node.keywords)
    if not isinstance(node, _SIMPLE):
        return False
    return all(supported(c) for c in ast.iter_child_nodes(node))


def _check_cost(op: type, a: Any, b: Any) -> None:
    if op is ast.Pow and type(a) in (int, bool) and type(b) in (int, bool) and b > 0:
        if max(abs(a).bit_length(), 1) * b > MAX_BITS:
            raise EvalLimit("** result too large")
    if op is ast.LShift and type(b) in (int, bool) and b > MAX_BITS:
        raise EvalLimit("<< result too large")
    if op is ast.Mod and type(a) in (str, bytes):  # "%999999999d" % 1 allocates a GB
        raise EvalLimit("%-formatting is not supported")
    if op is ast.Mult:
        for seq, n in ((a, b), (b, a)):
            if type(seq) in (str, bytes, list, tuple) and type(n) in (int, bool):
                if len(seq) * n > MAX_ITEMS:
                    raise EvalLimit("sequence repetition too large")


class Evaluator:
    """Evaluates one expression; ``slots`` maps slot names to ``("ok", value)`` or
    ``(status, message)`` for calls that did not return plain data."""

    def __init__(self, slots: dict[str, tuple[str, Any]]):
        self.slots = slots

    def eval(self, node: ast.AST) -> Any:  # noqa: C901 - one branch per node type
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.slots:
                status, value = self.slots[node.id]
                if status != "ok":
                    raise SlotRaised(status, value)
                return value
            return SAFE_VALUES.get(node.id) or SAFE_FUNCS[node.id]
        if isinstance(node, ast.BoolOp):
            value = None
            for sub in node.values:
                value = self.eval(sub)
                if isinstance(node.op, ast.And) != bool(value):
                    return value
            return value
        if isinstance(node, ast.Compare):
            left = self.eval(node.left)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self.eval(comp)
                if not _CMPOPS[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BinOp):
            a, b = self.eval(node.left), self.eval(node.right)
            _check_cost(type(node.op), a, b)
            return _BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp):
            return _UNOPS[type(node.op)](self.eval(node.operand))
        if isinstance(node, ast.IfExp):
            return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)
        if isinstance(node, ast.Subscript):
            return self.eval(node.value)[self.eval(node.slice)]
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(None if p is None else self.eval(p) for p in parts))
        if isinstance(node, ast.Tuple):
            return tuple(self.eval(e) for e in node.elts)
        if isinstance(node, ast.List):
            return [self.eval(e) for e in node.elts]
        if isinstance(node, ast.Set):
            return {self.eval(e) for e in node.elts}
        if isinstance(node, ast.Dict):
            return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values,
                                                               strict=True)}
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "math":
                return getattr(math, node.attr)
            receiver = self.eval(node.value)
            if node.attr not in SAFE_METHODS.get(type(receiver), ()):
                raise TypeError(f"{type(receiver).__name__}.{node.attr} is not supported")
            return getattr(receiver, node.attr)
        if isinstance(node, ast.Call):
            func = self.eval(node.func)
            args = [self.eval(a) for a in node.args]
            kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
            return func(*args, **kwargs)
        raise TypeError(f"unsupported expression {type(node).__name__}")
