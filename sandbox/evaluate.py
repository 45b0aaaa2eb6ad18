"""A small, safe evaluator for assert expressions, run in the trusted process.

Calls into candidate code have already been replaced by *slots* holding plain data that came
back from the jail (see ``split``). What remains is evaluated here over builtin values only:
constants, displays, comparisons, boolean and arithmetic operators, subscripts, a whitelist of
builtins (``len``, ``sorted``, ``abs``, ...), ``math`` functions and a few read-only methods of
plain types. No name lookup reaches the host's globals.

Both the candidate's values and the test's own expressions are hostile, so evaluation is
bounded by a cost model (``cost``: value weights, a work budget, a deadline, bounded hash
collisions) rather than by a list of known traps; each whitelisted call (``whitelist``) is
priced by its handler (``safecalls``).
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any

from sandbox.cost import (
    INTS,
    ITEMS,
    KEYS,
    MAX_BITS,
    MAX_NESTING,
    VALUES,
    Budget,
    EvalLimit,
    div_cost,
    limbs,
    mul_cost,
    range_len,
)
from sandbox.plain import MAX_COLLISIONS
from sandbox.safecalls import SafeCalls
from sandbox.whitelist import MATH_NAMES, SAFE_FUNCS, SAFE_METHODS, SAFE_VALUES

# (``MAX_NESTING``, ``Budget`` and ``EvalLimit`` are ``cost``'s, re-exported for callers.)
__all__ = ["MAX_NESTING", "SLOT_PREFIX", "Budget", "EvalLimit", "Evaluator", "SlotRaised",
           "supported"]

SLOT_PREFIX = "\x00slot"  # a name no source text can spell


class SlotRaised(Exception):
    """A candidate call the expression reached had raised (or returned non-plain data)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


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

_SETLIKE = (set, frozenset, KEYS, ITEMS)


def supported(node: ast.AST) -> bool:
    """Whether ``node`` (a candidate-call-free tree, slots in place) is something ``evaluate``
    handles; otherwise the test runs whole in the jail. Iterative: any depth is answered,
    and trees deeper than ``MAX_NESTING`` are not supported."""
    stack = [(node, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            return False
        if isinstance(node, ast.Name):
            if not (node.id.startswith(SLOT_PREFIX) or node.id in SAFE_VALUES
                    or node.id in SAFE_FUNCS):
                return False
            continue
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "math":
                if node.attr not in MATH_NAMES:
                    return False
                continue
            if not any(node.attr in names for names in SAFE_METHODS.values()):
                return False
            stack.append((node.value, depth + 1))
            continue
        if isinstance(node, ast.Call):
            if any(isinstance(a, ast.Starred) for a in node.args) or any(
                    k.arg is None for k in node.keywords):
                return False
            if isinstance(node.func, ast.Name):
                if node.func.id not in SAFE_FUNCS:
                    return False
            elif isinstance(node.func, ast.Attribute):
                stack.append((node.func, depth + 1))
            else:
                return False
            stack.extend((c, depth + 1) for c in node.args + node.keywords)
            continue
        if not isinstance(node, _SIMPLE) or (isinstance(node, ast.Dict) and None in node.keys):
            return False  # (a None key is ``**mapping`` unpacking)
        stack.extend((c, depth + 1) for c in ast.iter_child_nodes(node))
    return True


class Evaluator(SafeCalls):
    """Evaluates expressions; ``slots`` maps slot names to ``("ok", value)`` or
    ``(status, message)`` for calls that did not return plain data. One evaluator is one
    evaluation: its ``budget`` (work and time, fresh unless given) covers every ``eval`` call."""

    def __init__(self, slots: dict[str, tuple[str, Any]], budget: Budget | None = None):
        super().__init__(budget)
        self.slots = slots
        self._depth = 0

    # -- expressions ------------------------------------------------------------------------

    def eval(self, node: ast.AST) -> Any:
        self.budget.tick()
        self.budget.charge(1, "the expression")
        self._depth += 1
        try:
            if self._depth > MAX_NESTING + 1:
                raise EvalLimit("expression nested too deeply")
            return self._eval(node)
        finally:
            self._depth -= 1

    def _eval(self, node: ast.AST) -> Any:  # noqa: C901 - one branch per node type
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.slots:
                status, value = self.slots[node.id]
                if status != "ok":
                    raise SlotRaised(status, value)
                return value
            if node.id in SAFE_VALUES:
                return SAFE_VALUES[node.id]
            return SAFE_FUNCS[node.id]
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
                if not self._compare(type(op), left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BinOp):
            a, b = self.eval(node.left), self.eval(node.right)
            return self._binop(type(node.op), a, b)
        if isinstance(node, ast.UnaryOp):
            value = self.eval(node.operand)
            if type(node.op) is not ast.Not:
                self.budget.charge(self.weight(value), "a unary operator")
            return _UNOPS[type(node.op)](value)
        if isinstance(node, ast.IfExp):
            return self.eval(node.body) if self.eval(node.test) else self.eval(node.orelse)
        if isinstance(node, ast.Subscript):
            return self._subscript(self.eval(node.value), self.eval(node.slice))
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(None if p is None else self.eval(p) for p in parts))
        if isinstance(node, ast.Tuple | ast.List):
            items = [self.eval(e) for e in node.elts]
            weight = 1 + sum(self.weight(v) for v in items)
            self.budget.fits(weight, "a display")
            value = tuple(items) if isinstance(node, ast.Tuple) else items
            return self._remember(value, weight)
        if isinstance(node, ast.Set):
            items = [self.eval(e) for e in node.elts]
            return self._hashed(items, set, self._sum_weights(items), "a set display")
        if isinstance(node, ast.Dict):
            if None in node.keys:
                raise TypeError("** in a dict display is not supported")
            keys, values = [], []
            for k, v in zip(node.keys, node.values, strict=True):
                keys.append(self.eval(k))
                values.append(self.eval(v))
            weight = 1 + self._sum_weights(keys) + self._sum_weights(values)
            self.budget.fits(weight, "a dict display")
            self._distinct(keys, "a dict display")
            return dict(zip(keys, values, strict=True))
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
            return self.call(func, args, kwargs)
        raise TypeError(f"unsupported expression {type(node).__name__}")

    # -- operators --------------------------------------------------------------------------

    def _compare(self, op: type, a: Any, b: Any) -> bool:
        if op is ast.Is or op is ast.IsNot:
            return _CMPOPS[op](a, b)
        if op is ast.In or op is ast.NotIn:
            found = self._contains(b, a)
            return found if op is ast.In else not found
        # Comparing costs at most the lighter side: a side already weighed (an expected value,
        # usually) bounds it without weighing the other (a candidate's value, usually).
        known = [w for w in (self._known(a), self._known(b)) if w is not None]
        cost = min(known) if known else min(self.weight(a), self.weight(b))
        self.budget.charge(cost + 1, "a comparison")
        return _CMPOPS[op](a, b)

    def _contains(self, container: Any, x: Any) -> bool:
        t = type(container)
        what = "an 'in' test"
        if t in (set, frozenset, dict, KEYS, ITEMS):
            self.budget.charge((MAX_COLLISIONS + 1) * self.weight(x) + 1, what)
        elif t in (list, tuple, VALUES):  # each item compared: at most the lighter side
            wx = self._known(x)
            cost = len(container) * (wx + 1) if wx is not None else self.weight(container)
            self.budget.charge(cost + 1, what)
        elif t is str or t is bytes:
            self.budget.charge(len(container) + self.weight(x) + 1, what)
        elif t is range:
            if type(x) in INTS:
                self.budget.charge(self.weight(x) + 1, what)
            else:  # anything but an int is looked for item by item
                self.budget.charge(range_len(container) + 1, what)
        elif hasattr(t, "__iter__"):  # an iterator: draw items until found
            for chunk in self._chunks(container, what):
                self.budget.charge(self._sum_weights(chunk) + self.weight(x), what)
                if x in chunk:  # (drawing a little past it changes nothing here)
                    return True
            return False
        return x in container  # not iterable: raises TypeError as Python does

    def _binop(self, op: type, a: Any, b: Any) -> Any:  # noqa: C901 - one case per operand kind
        ta, tb = type(a), type(b)
        fn = _BINOPS[op]
        if ta in INTS and tb in INTS:
            return self._intop(op, a, b)
        if (ta is float and tb in (int, bool, float)) or (tb is float and ta in INTS):
            self.budget.charge(self.weight(a) + self.weight(b), "arithmetic")
            return fn(a, b)
        if op is ast.Mod and ta in (str, bytes):  # "%999999999d" % 1 allocates a GB
            raise EvalLimit("%-formatting is not supported")
        if op is ast.Mult and (ta in INTS) != (tb in INTS):
            seq, n = (b, a) if ta in INTS else (a, b)
            if type(seq) in (str, bytes, list, tuple):
                count = max(int(n), 0)
                if type(seq) in (str, bytes):
                    weight = len(seq) * count + 1
                else:
                    weight = (self.weight(seq) - 1) * count + 1
                self.budget.fits(weight, "sequence repetition")
                self.budget.charge(len(seq) * count + 1, "sequence repetition")
                return self._remember(fn(a, b), weight)
        if op is ast.Add and ta is tb and ta in (str, bytes, list, tuple):
            weight = self.weight(a) + self.weight(b) - 1
            self.budget.fits(weight, "concatenation")
            self.budget.charge(len(a) + len(b) + 1, "concatenation")
            return self._remember(fn(a, b), weight)
        if op in (ast.BitOr, ast.BitAnd, ast.BitXor, ast.Sub) and (
                ta in _SETLIKE or tb in _SETLIKE):
            return self._setop(op, a, b)
        if op is ast.BitOr and ta is dict and tb is dict:
            self._union(a, b, "dict union")
            self.budget.charge(self.weight(a) + self.weight(b), "dict union")
            return fn(a, b)
        # Anything else is cheap or a TypeError (list - list, str + int, ...).
        self.budget.charge(self.weight(a) + self.weight(b), "an operator")
        return fn(a, b)

    def _intop(self, op: type, a: int, b: int) -> Any:
        la, lb = limbs(a), limbs(b)
        what = "int arithmetic"
        if op is ast.Mult:
            self.budget.fits(la + lb, what)
            cost = mul_cost(la, lb)
        elif op in (ast.FloorDiv, ast.Mod):
            cost = div_cost(la, lb)
        elif op is ast.Pow:
            if b < 0 or -1 <= a <= 1:  # a float, or 0/1/-1: cheap
                cost = la + lb
            else:
                bits = a.bit_length() * b
                if bits > MAX_BITS:
                    raise EvalLimit("** result too large")
                half = bits // 128 + 1
                cost = 2 * mul_cost(half, half) + 64 * lb + la
        elif op is ast.LShift:
            if b > MAX_BITS:
                raise EvalLimit("<< result too large")
            cost = la + max(b, 0) // 64 + 1
            self.budget.fits(cost, what)
        else:  # + - / >> & | ^: linear
            cost = la + lb
        self.budget.charge(cost, what)
        return _BINOPS[op](a, b)

    def _setop(self, op: type, a: Any, b: Any) -> Any:
        what = "a set operation"
        if type(a) in (KEYS, ITEMS) or type(b) in (KEYS, ITEMS):
            # A dict view takes any iterable here: make both sides sets (bounded) first.
            sides = []
            for side in (a, b):
                if type(side) not in (set, frozenset):
                    items, weight = self._items(side, what)
                    side = self._hashed(items, set, weight, what)
                sides.append(side)
            a, b = sides
        if type(a) in (set, frozenset) and type(b) in (set, frozenset):
            if op in (ast.BitOr, ast.BitXor):
                self._union(a, b, what)
            self.budget.charge(self.weight(a) + self.weight(b), what)
        return _BINOPS[op](a, b)  # set with a non-set: TypeError, as in Python

    def _subscript(self, value: Any, index: Any) -> Any:
        t = type(value)
        if t is dict:
            self.budget.charge((MAX_COLLISIONS + 1) * self.weight(index) + 1, "a lookup")
        elif type(index) is slice and t in (list, tuple, str, bytes):
            n = len(range(*index.indices(len(value))))
            self.budget.charge(n + 1, "a slice")
        else:
            self.budget.charge(1, "a subscript")
        return value[index]
