"""A small, safe evaluator for assert expressions, run in the trusted process.

Calls into candidate code have already been replaced by *slots* holding plain data that came
back from the jail (see ``split``). What remains is evaluated here over builtin values only:
constants, displays, comparisons, boolean and arithmetic operators, subscripts, a whitelist of
builtins (``len``, ``sorted``, ``abs``, ...), ``math`` functions and a few read-only methods of
plain types. No name lookup reaches the host's globals.

Both the candidate's values and the test's own expressions are hostile, so evaluation is
bounded by a cost model rather than by a list of known traps:

- every value has a *weight*, its size in rough machine words: ``len`` for ``str``/``bytes``
  (plus one), 64-bit limbs for ``int``, 1 for ``float``/``None``/``bool``, 1 plus the weights of
  the items for containers (shared items count each time they occur, as printing or comparing
  them would cost); weights are memoised by ``id`` for one evaluation, the objects kept alive;
- every operation is charged its cost in the same units before it runs (roughly the weights of
  its inputs and output; ``n log n`` for sorting; products of limb counts for big-int
  division, modulo and gcd, Karatsuba for multiplication) against a per-evaluation work
  budget, and refused (``EvalLimit``) when that cost, or its result's weight, is over the limit;
- a wall-clock deadline is checked at every node and every few thousand items, a backstop;
- sets, frozensets and dicts are never built with more than ``MAX_COLLISIONS`` distinct
  members of one hash value (which would make building them quadratic);
- iterables that are not collections (iterators, ranges, a candidate's replayed generator)
  are drawn a chunk at a time, each chunk weighed and charged; no builtin is ever handed an
  unbounded iterable, and only whitelisted callables run (a ``key=`` function is called back
  through the evaluator).

A unit is about 5-20 ns of CPython work, so ``MAX_WORK`` is about a second at most.
"""

from __future__ import annotations

import ast
import itertools
import math
import operator
import sys
import time
from collections import Counter
from types import BuiltinFunctionType
from typing import Any

from sandbox.plain import MAX_COLLISIONS

SLOT_PREFIX = "\x00slot"  # a name no source text can spell

MAX_WEIGHT = 10_000_000  # heaviest value one evaluation may build (~80 MB of list, 10 MB of str)
MAX_WORK = 50_000_000    # work units one evaluation may spend in all (about a second)
MAX_SECONDS = 2.0        # wall-clock backstop for one evaluation
MAX_BITS = 1 << 20       # largest int a ** or << may build
MAX_NESTING = 100        # deepest expression evaluated here; deeper tests run whole in the jail
REPR_FACTOR = 26         # characters one weight unit can print as (a float: 24, ', ': 2)
OTHER_WEIGHT = 4         # functions, types, iterators: printed as a short fixed text
ITEM_COST = 32           # drawing an item from an iterator here (in chunks of CHUNK)
DRAWN = 4                # weight of a drawn item's own object, beyond its content's
HASH_COST = 32           # an item put in a set or dict here (its hash checked, then inserted)
CALL_COST = 200          # a call made through the evaluator (a key= function's, say): ~3 us
CHUNK = 4096


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
# Codecs bytes.decode / str(b, encoding) may use: linear ones only (punycode/idna are not).
SAFE_CODECS = {"utf-8", "utf8", "ascii", "us-ascii", "latin-1", "latin1", "iso-8859-1",
               "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be",
               "cp1252"}
SAFE_ERRORS = {"strict", "ignore", "replace", "backslashreplace", "surrogateescape",
               "surrogatepass"}

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

_NONE = type(None)
_INTS = (int, bool)
_CONTAINERS = (list, tuple, set, frozenset, dict)
_KEYS, _VALUES, _ITEMS = type({}.keys()), type({}.values()), type({}.items())
_SETLIKE = (set, frozenset, _KEYS, _ITEMS)
_COLLECTIONS = (list, tuple, set, frozenset, dict, str, bytes, range, _KEYS, _VALUES, _ITEMS)
_SMALL = 16  # containers this short, holding no container, are weighed afresh, not memoised
_FLAT = {list, tuple, set, frozenset}


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


class Budget:
    """Work units and wall-clock time left to one evaluation (or to the planning of one test,
    shared by the evaluators of its constants)."""

    def __init__(self, work: int = MAX_WORK, seconds: float = MAX_SECONDS,
                 max_weight: int = MAX_WEIGHT):
        self.left = work
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.max_weight = max_weight

    def charge(self, units: int, what: str) -> None:
        if units > self.left:
            raise EvalLimit(f"{what} would cost too much to evaluate here")
        self.left -= units

    def fits(self, weight: int, what: str) -> None:
        if weight > self.max_weight:
            raise EvalLimit(f"{what} would be too large")

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise EvalLimit(f"evaluation took over {self.seconds:g} s")


def _limbs(x: int) -> int:
    return x.bit_length() // 64 + 1


def _mul_cost(a: int, b: int) -> int:
    """Multiplying ints of ``a`` and ``b`` limbs (schoolbook, then Karatsuba as CPython)."""
    small, big = (a, b) if a <= b else (b, a)
    if small <= 40:
        return small * big + 1
    return (big // small + 1) * int(small ** 1.585) + 1


def _div_cost(a: int, b: int) -> int:
    """Dividing an ``a``-limb int by a ``b``-limb one (CPython: schoolbook, quadratic)."""
    return (a - b + 1) * b + a + b if a >= b else a + b


_INT64_MIN, _INT64_MAX = 1 - (1 << 63), (1 << 63) - 1  # ints of one 64-bit limb
_HASH_MODULUS = sys.hash_info.modulus  # 2**61 - 1: ints below it hash to themselves


def _unclashing(items: Any) -> bool:
    """Whether ``items`` certainly have at most two members per hash value, checked at C
    speed: ints within +-(2**61 - 1) (only -1 and -2 share a hash), or str/bytes only (their
    hashes are keyed with a per-process secret)."""
    types = set(map(type, items))
    if types <= {int, bool}:
        return not items or (-_HASH_MODULUS < min(items) and max(items) < _HASH_MODULUS)
    return types <= {str} or types <= {bytes}


def _range_len(r: range) -> int:
    try:
        return len(r)
    except OverflowError:
        return sys.maxsize + 1


def _int_digits_limited() -> bool:
    """Whether int<->decimal-str conversion is capped (CPython's default 4300 digits)."""
    limit = sys.get_int_max_str_digits()
    return 0 < limit <= 100_000


def _codec(name: Any, errors: Any) -> None:
    if name is not None and (type(name) is not str
                             or name.lower().replace("_", "-").replace(" ", "-")
                             not in SAFE_CODECS):
        raise EvalLimit(f"codec {name!r} is not supported here")
    if errors is not None and errors not in SAFE_ERRORS:
        raise EvalLimit(f"error handler {errors!r} is not supported here")


def _arg(args: list, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _no_kwargs(name: str, kwargs: dict, allowed: tuple[str, ...] = ()) -> None:
    for k in kwargs:
        if k not in allowed:
            raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")


class Evaluator:
    """Evaluates expressions; ``slots`` maps slot names to ``("ok", value)`` or
    ``(status, message)`` for calls that did not return plain data. One evaluator is one
    evaluation: its ``budget`` (work and time, fresh unless given) covers every ``eval`` call."""

    def __init__(self, slots: dict[str, tuple[str, Any]], budget: Budget | None = None):
        self.slots = slots
        self.budget = budget if budget is not None else Budget()
        self._weights: dict[int, tuple[Any, int]] = {}  # id -> (object kept alive, weight)
        self._clashes: dict[int, tuple[Any, int]] = {}  # id -> (object, most members/hash)
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

    # -- weights ----------------------------------------------------------------------------

    def weight(self, value: Any) -> int:
        t = type(value)
        if t is int:
            return value.bit_length() // 64 + 1
        if t is str or t is bytes:
            return len(value) + 1
        if t is float or t is bool or value is None:
            return 1
        if t in _CONTAINERS:
            hit = self._weights.get(id(value))
            if hit is not None:
                return hit[1]
            small = self._small(value)
            return small if small is not None else self._walk(value)
        if t is range:
            return 1 + _limbs(value.start) + _limbs(value.stop) + _limbs(value.step)
        if t in (_KEYS, _VALUES, _ITEMS):
            return self.weight(value.mapping) + OTHER_WEIGHT
        return OTHER_WEIGHT

    def _known(self, value: Any) -> int | None:
        """``value``'s weight if that is known or cheap to know, else None."""
        t = type(value)
        if t in _CONTAINERS:
            hit = self._weights.get(id(value))
            return hit[1] if hit is not None else self._small(value)
        if t in (_KEYS, _VALUES, _ITEMS):
            return None
        return self.weight(value)

    def _remember(self, value: Any, weight: int) -> Any:
        if type(value) in _CONTAINERS:
            self._weights[id(value)] = (value, weight)
        return value

    def _small(self, value: Any) -> int | None:
        """The weight of a short container of non-containers; None for any other."""
        if len(value) > _SMALL:
            return None
        total = 1
        for part in (value.keys(), value.values()) if type(value) is dict else (value,):
            for v in part:
                t = type(v)
                if t in _CONTAINERS:
                    return None
                total += self.weight(v)
        return total

    def _part(self, part: Any, pending: list) -> int:
        """The summed weight of ``part``'s items; containers not weighed yet go to ``pending``.
        Uniform parts are summed at C speed: scalars at once, and lists, tuples or sets
        (rows, pairs, ...) a level at a time, flattened (and charged what they hold)."""
        total = 0
        while True:
            types = set(map(type, part))
            if types.isdisjoint(_CONTAINERS):
                return total + self._scalars(part, types)
            if not types <= _FLAT:
                break
            size = sum(map(len, part))
            if size > self.budget.max_weight:  # (shared rows: weighed once each, below)
                break
            self.budget.charge(2 * size, "weighing a value")
            self.budget.tick()
            total += len(part)
            part = list(itertools.chain.from_iterable(part))
        memo = self._weights
        queued: set[int] = set()
        for v in part:
            if type(v) in _CONTAINERS:
                hit = memo.get(id(v))
                if hit is not None:
                    total += hit[1]
                    continue
                small = self._small(v)
                if small is not None:
                    total += small
                elif id(v) not in queued:
                    queued.add(id(v))
                    pending.append(v)
            else:
                total += self.weight(v)
        return total

    def _scalars(self, items: Any, types: set) -> int:
        """The summed weight of ``items``, none of them a container."""
        n = len(items)
        if types <= {int, bool}:
            if not n or (_INT64_MIN <= min(items) and max(items) <= _INT64_MAX):
                return n  # one limb each
            return n + sum(map(int.bit_length, items)) // 64
        if types <= {float, bool, _NONE}:
            return n
        if types == {str} or types == {bytes}:
            return n + sum(map(len, items))
        self.budget.charge(4 * n, "weighing a value")  # mixed: one by one, in Python
        total = n
        for v in items:
            t = type(v)
            if t is str or t is bytes:
                total += len(v)
            elif t is int:
                total += v.bit_length() // 64
            elif t is not float and t is not bool and v is not None:
                total += self.weight(v) - 1
        return total

    def _walk(self, root: Any) -> int:
        """Weigh a container (iteratively: any depth), memoising every big or nested one."""
        memo = self._weights
        stack = [root]
        while stack:
            value = stack[-1]
            if id(value) in memo:
                stack.pop()
                continue
            pending: list = []
            if type(value) is dict:
                total = self._part(value.keys(), pending) + self._part(value.values(), pending)
            else:
                total = self._part(value, pending)
            self.budget.charge(4 * len(value) + ITEM_COST, "weighing a value")
            self.budget.tick()
            if pending:
                stack.extend(pending)
                continue
            memo[id(value)] = (value, 1 + total)
            stack.pop()
        return memo[id(root)][1]

    def _sum_weights(self, items: Any) -> int:
        """Summed weight of a collection's items (a view, list, set, ...)."""
        pending: list = []
        total = self._part(items, pending)
        return total + sum(self.weight(v) for v in pending)

    def _items(self, x: Any, what: str) -> tuple[Any, int]:
        """``x``'s items as a bounded collection (``x`` itself when it is one) and their summed
        weight (an upper bound for a range); anything else iterable is drawn item by item."""
        t = type(x)
        if t is list or t is tuple or t is set or t is frozenset:
            return x, self.weight(x) - 1
        if t is dict or t is _KEYS or t is _VALUES:
            return x, self._sum_weights(x)
        if t is _ITEMS:
            return x, self.weight(x.mapping) - 1 + len(x)
        if t is str:
            return x, 2 * len(x)
        if t is bytes:
            return x, len(x)
        if t is range:
            n = _range_len(x)
            weight = n * (1 + max(_limbs(x.start), _limbs(x.stop)))
            self.budget.fits(weight, what)
            self.budget.charge(n, what)
            return x, weight
        out: list = []
        total = 0
        for chunk in self._chunks(x, what):  # an iterator: drawn a chunk at a time, weighed
            total += self._sum_weights(chunk)
            out += chunk
            # (items drawn are fresh objects, heavier than their weight: DRAWN more each)
            if total + DRAWN * len(out) > self.budget.max_weight:
                raise EvalLimit(f"{what} would be too large")
        return self._remember(out, 1 + total), total

    def _chunks(self, x: Any, what: str) -> Any:
        """``x``'s items (``x`` any iterable, perhaps endless) in lists of up to CHUNK, each
        charged and the deadline checked before the next is drawn."""
        it = iter(x)  # TypeError if not iterable, as Python raises
        while True:
            self.budget.tick()
            chunk = list(itertools.islice(it, CHUNK))  # (a chunk costs little: CHUNK items)
            self.budget.charge(ITEM_COST * len(chunk) + 1, what)
            if not chunk:
                return
            yield chunk

    # -- hashing ----------------------------------------------------------------------------

    def _clash(self, value: Any) -> int:
        """Most members of ``value`` (a set, frozenset or dict) that share one hash value."""
        hit = self._clashes.get(id(value))
        if hit is not None:
            return hit[1]
        self.budget.charge(self.weight(value) + HASH_COST // 2 * len(value), "hashing")
        if _unclashing(value):
            most = 2 if value else 0
        else:
            hashes = list(map(hash, value))
            most = 1 if len(set(hashes)) == len(hashes) else max(Counter(hashes).values())
        self._clashes[id(value)] = (value, most)
        return most

    def _distinct(self, items: Any, what: str) -> None:
        """Refuse ``items`` (re-iterable) when more than MAX_COLLISIONS distinct ones share a
        hash value: a set or dict of them would take quadratic time to build."""
        if _unclashing(items):
            return
        hashes = list(map(hash, items))  # TypeError for an unhashable item, as set() raises
        if len(set(hashes)) == len(hashes) or max(Counter(hashes).values()) <= MAX_COLLISIONS:
            return
        seen: set = set()  # duplicates are fine: count distinct members per hash value
        per_hash: dict[int, int] = {}
        for item in items:
            size = len(seen)
            seen.add(item)  # never compares it to more than MAX_COLLISIONS members
            if len(seen) > size:
                h = hash(item)
                per_hash[h] = per_hash.get(h, 0) + 1
                if per_hash[h] > MAX_COLLISIONS:
                    raise EvalLimit(f"{what}: too many hash collisions")

    def _hashed(self, items: Any, kind: type, weight: int, what: str) -> Any:
        """``kind(items)`` for kind set or frozenset, collisions bounded."""
        self.budget.fits(1 + weight, what)
        self.budget.charge(weight + HASH_COST * len(items) + 1, what)
        if type(items) not in (set, frozenset, dict):  # those are bounded already
            self._distinct(items, what)
        return kind(items)

    def _union(self, a: Any, b: Any, what: str) -> None:
        """Refuse a union (of sets, frozensets or dicts' keys) with too many collisions."""
        self.budget.fits(self.weight(a) + self.weight(b), what)
        if self._clash(a) + self._clash(b) > MAX_COLLISIONS:
            self._distinct(list(itertools.chain(a, b)), what)

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
        if t in (set, frozenset, dict, _KEYS, _ITEMS):
            self.budget.charge((MAX_COLLISIONS + 1) * self.weight(x) + 1, what)
        elif t in (list, tuple, _VALUES):  # each item compared: at most the lighter side
            wx = self._known(x)
            cost = len(container) * (wx + 1) if wx is not None else self.weight(container)
            self.budget.charge(cost + 1, what)
        elif t is str or t is bytes:
            self.budget.charge(len(container) + self.weight(x) + 1, what)
        elif t is range:
            if type(x) in _INTS:
                self.budget.charge(self.weight(x) + 1, what)
            else:  # anything but an int is looked for item by item
                self.budget.charge(_range_len(container) + 1, what)
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
        if ta in _INTS and tb in _INTS:
            return self._intop(op, a, b)
        if (ta is float and tb in (int, bool, float)) or (tb is float and ta in _INTS):
            self.budget.charge(self.weight(a) + self.weight(b), "arithmetic")
            return fn(a, b)
        if op is ast.Mod and ta in (str, bytes):  # "%999999999d" % 1 allocates a GB
            raise EvalLimit("%-formatting is not supported")
        if op is ast.Mult and (ta in _INTS) != (tb in _INTS):
            seq, n = (b, a) if ta in _INTS else (a, b)
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
        la, lb = _limbs(a), _limbs(b)
        what = "int arithmetic"
        if op is ast.Mult:
            self.budget.fits(la + lb, what)
            cost = _mul_cost(la, lb)
        elif op in (ast.FloorDiv, ast.Mod):
            cost = _div_cost(la, lb)
        elif op is ast.Pow:
            if b < 0 or -1 <= a <= 1:  # a float, or 0/1/-1: cheap
                cost = la + lb
            else:
                bits = a.bit_length() * b
                if bits > MAX_BITS:
                    raise EvalLimit("** result too large")
                half = bits // 128 + 1
                cost = 2 * _mul_cost(half, half) + 64 * lb + la
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
        if type(a) in (_KEYS, _ITEMS) or type(b) in (_KEYS, _ITEMS):
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

    # -- calls ------------------------------------------------------------------------------

    def call(self, func: Any, args: list, kwargs: dict) -> Any:
        """Call a whitelisted function or method, its cost bounded."""
        self.budget.tick()
        self.budget.charge(CALL_COST, f"calling {_name(func)}")
        handler = None
        entry = _FUNCS.get(id(func))
        if entry is not None and entry[0] is func:
            handler = entry[1]
        elif (type(func) is BuiltinFunctionType and type(func.__self__) in SAFE_METHODS
              and func.__name__ in SAFE_METHODS[type(func.__self__)]):
            handler = Evaluator._method
        if handler is None:
            raise TypeError(f"calling {type(func).__name__} {_name(func)} is not supported")
        return handler(self, func, list(args), dict(kwargs))

    def _keyfunc(self, key: Any, items: Any, weight: int, what: str) -> Any:
        """``key`` as ``sorted``/``min``/``max`` may call it on ``items`` (of summed
        ``weight``): as is, charged up front, when it costs at most an item's weight on any
        item (``len``, ``abs``, ``d.get``, ...); else a wrapper calling back through ``call``."""
        entry = _FUNCS.get(id(key))
        lookup = (type(key) is BuiltinFunctionType and type(key.__self__) is dict
                  and key.__name__ == "get")  # at most MAX_COLLISIONS + 1 compares an item
        if lookup or (entry is not None and entry[0] is key and entry[1] in _PER_ITEM):
            factor = MAX_COLLISIONS + 1 if lookup else 1
            self.budget.charge(factor * weight + 4 * len(items), what)
            return key

        def keyed(item: Any) -> Any:
            return self.call(key, [item], {})
        return keyed

    def _generic(self, func: Any, args: list, kwargs: dict) -> Any:
        """Cheap builtins (``isinstance``, ``chr``, ``math.sin``, ...): charged their inputs."""
        cost = 1 + sum(self.weight(a) for a in args) + sum(self.weight(v)
                                                           for v in kwargs.values())
        self.budget.charge(cost, f"{_name(func)}()")
        return func(*args, **kwargs)

    def _constant_time(self, func: Any, args: list, kwargs: dict) -> Any:
        """``len``, ``bool``, ``type`` (one argument), ...: O(1) whatever the argument."""
        self.budget.charge(1, f"{_name(func)}()")
        if func is type and (len(args) != 1 or kwargs):
            raise TypeError("type() takes exactly one argument here")
        return func(*args, **kwargs)

    def _isinstance(self, func: Any, args: list, kwargs: dict) -> Any:
        """O(1) in the object; a tuple of types is walked."""
        self.budget.charge(1 + sum(self.weight(a) for a in args[1:]), "isinstance()")
        return func(*args, **kwargs)

    def _lazy(self, func: Any, args: list, kwargs: dict) -> Any:
        """``reversed``, ``enumerate``, ``zip``: lazy; whatever consumes them is bounded."""
        self.budget.charge(1 + len(args), f"{_name(func)}()")
        return func(*args, **kwargs)

    def _text(self, func: Any, args: list, kwargs: dict) -> Any:
        """``str(x)`` / ``repr(x)``: at most REPR_FACTOR characters a weight unit."""
        what = f"{_name(func)}()"
        if func is str and (len(args) > 1 or "encoding" in kwargs or "errors" in kwargs):
            _codec(_arg(args, kwargs, 1, "encoding"), _arg(args, kwargs, 2, "errors"))
            source = _arg(args, kwargs, 0, "object", b"")
            n = len(source) if type(source) is bytes else 1
            self.budget.fits(4 * n + 1, what)
            self.budget.charge(n + 1, what)
            return func(*args, **kwargs)
        if len(args) + len(kwargs) > 1:
            raise TypeError(f"{what} takes one argument here")
        value = args[0] if args else kwargs.get("object", "")
        if func is str and type(value) is str:
            return value
        w = self.weight(value)
        bound = REPR_FACTOR * w + (0 if _int_digits_limited() else w * w)
        self.budget.charge(bound, what)  # checked before it runs...
        text = func(*args, **kwargs)
        self.budget.left += bound - len(text)  # ...and charged what it cost
        self.budget.fits(len(text) + 1, what)
        return text

    def _int(self, func: Any, args: list, kwargs: dict) -> Any:
        x = args[0] if args else None
        what = f"{_name(func)}()"
        if type(x) in (str, bytes):
            n = len(x)
            cost = n + 1 + (0 if _int_digits_limited() or func is float else n * n // 64)
            self.budget.charge(cost, what)
            return func(*args, **kwargs)
        return self._generic(func, args, kwargs)

    def _round(self, func: Any, args: list, kwargs: dict) -> Any:
        number = _arg(args, kwargs, 0, "number")
        ndigits = _arg(args, kwargs, 1, "ndigits")
        if type(number) in _INTS and type(ndigits) in _INTS and ndigits < 0:
            # round(n, -k) computes 10 ** k: when that is over twice n the answer is 0.
            if -ndigits >= (number.bit_length() + 1) * 0.30103 + 1:
                self.budget.charge(1, "round()")
                return 0
            n = _limbs(number) + 1
            self.budget.charge(2 * _mul_cost(n, n) + _div_cost(2 * n, n), "round()")
            return func(*args, **kwargs)
        return self._generic(func, args, kwargs)

    def _divmod(self, func: Any, args: list, kwargs: dict) -> Any:
        if len(args) == 2 and not kwargs and all(type(a) in _INTS for a in args):
            self.budget.charge(_div_cost(_limbs(args[0]), _limbs(args[1])), "divmod()")
            return func(*args)
        return self._generic(func, args, kwargs)

    def _gcd(self, func: Any, args: list, kwargs: dict) -> Any:
        if all(type(a) in _INTS for a in args):
            cost, acc = 1, 0
            for a in args:
                cost += _limbs(acc) * _limbs(a) + _limbs(a)
                acc = max(acc, abs(a))
            self.budget.charge(cost, "math.gcd()")
        return func(*args, **kwargs)

    def _collect(self, func: Any, args: list, kwargs: dict) -> Any:
        """``list``, ``tuple``, ``set``, ``frozenset``, ``math.fsum``: of bounded items."""
        what = f"{_name(func)}()"
        if kwargs:
            raise TypeError(f"{what} takes no keyword arguments")
        if len(args) > 1:
            raise TypeError(f"{_name(func)} expected at most 1 argument, got {len(args)}")
        if not args:
            return func()
        items, weight = self._items(args[0], what)
        if func is set or func is frozenset:
            return self._hashed(items, func, weight, what)
        self.budget.fits(1 + weight, what)
        self.budget.charge(weight + len(items) + 1, what)
        out = func(items)
        if type(args[0]) is not range:  # a range's weight was only bounded
            self._remember(out, 1 + weight)
        return out

    def _dict(self, func: Any, args: list, kwargs: dict) -> Any:
        what = "dict()"
        if len(args) > 1:
            raise TypeError(f"dict expected at most 1 argument, got {len(args)}")
        if not args or type(args[0]) is dict:
            source = args[0] if args else {}
            self.budget.charge(self.weight(source) + len(kwargs) + 1, what)
            if kwargs and source:
                self._union(source, kwargs, what)
            return func(*args, **kwargs)
        items, weight = self._items(args[0], what)
        self.budget.fits(1 + weight, what)
        self.budget.charge(weight + HASH_COST * len(items) + 1, what)
        if (set(map(type, items)) <= {list, tuple} and set(map(len, items)) <= {2}
                and type(items) in (list, tuple)):  # pairs (the usual case): at C speed
            self._distinct(list(map(operator.itemgetter(0), items)) + list(kwargs), what)
            return func(items, **kwargs)
        self.budget.charge(4 * ITEM_COST * len(items), what)  # one by one, in Python
        pairs, keys = [], []
        for i, item in enumerate(items):
            if type(item) not in (list, tuple) and type(item) not in (int, bool, float, _NONE):
                size = _range_len(item) if type(item) is range else (
                    len(item) if type(item) in _COLLECTIONS else 2)
                if size != 2:
                    raise ValueError(f"dictionary update sequence element #{i} has length "
                                     f"{size}; 2 is required")
                item = tuple(self._items(item, what)[0])  # a 2-item iterable, drawn bounded
            pairs.append(item)
            if type(item) in (list, tuple) and len(item) == 2:
                keys.append(item[0])
        self._distinct(keys + list(kwargs), what)
        return func(pairs, **kwargs)

    def _sorted(self, func: Any, args: list, kwargs: dict) -> Any:
        what = "sorted()"
        _no_kwargs("sorted", kwargs, ("key", "reverse"))
        if len(args) != 1:
            raise TypeError(f"sorted expected 1 argument, got {len(args)}")
        items, weight = self._items(args[0], what)
        n = len(items)
        self.budget.fits(1 + weight, what)
        reverse = kwargs.get("reverse", False)
        key = kwargs.get("key")
        if key is None:
            self.budget.charge((weight + n + 1) * max(1, n.bit_length()), what)
            out = func(items, reverse=reverse)
        else:
            seq = items if type(items) in (list, tuple) else list(items)
            keyed = self._keyfunc(key, seq, weight, what)
            keys = list(map(keyed, seq))
            self.budget.charge((self._sum_weights(keys) + n + 1) * max(1, n.bit_length()), what)
            order = func(range(n), key=keys.__getitem__, reverse=reverse)
            out = [seq[i] for i in order]
        if type(args[0]) is not range:
            self._remember(out, 1 + weight)
        return out

    def _minmax(self, func: Any, args: list, kwargs: dict) -> Any:
        what = f"{_name(func)}()"
        _no_kwargs(_name(func), kwargs, ("key", "default"))
        if not args:
            raise TypeError(f"{_name(func)} expected at least 1 argument, got 0")
        if len(args) == 1:
            items, weight = self._items(args[0], what)
            call_args: list = [items]
        else:
            items, weight, call_args = args, sum(self.weight(a) for a in args), args
        self.budget.charge(weight + len(items) + 1, what)
        if kwargs.get("key") is not None:
            kwargs["key"] = self._keyfunc(kwargs["key"], items, weight, what)
        return func(*call_args, **kwargs)

    def _sum(self, func: Any, args: list, kwargs: dict) -> Any:
        what = "sum()"
        _no_kwargs("sum", kwargs, ("start",))
        if not 1 <= len(args) <= 2:
            raise TypeError(f"sum() takes at most 2 arguments ({len(args)} given)")
        start = args[1] if len(args) == 2 else kwargs.get("start", 0)
        items, weight = self._items(args[0], what)
        n = len(items)
        if type(start) in (list, tuple):  # each step copies the sum so far: quadratic
            size, cost = len(start), 0
            for item in items:
                if type(item) is not type(start):
                    break  # Python raises TypeError here
                size += len(item)
                cost += size
            self.budget.fits(self.weight(start) + weight, what)
            self.budget.charge(cost + n + 1, what)
        elif type(start) in (int, bool, float):  # each step costs the sum's limbs
            widest = self._widest([start, *items]) + n.bit_length() // 64 + 1
            self.budget.charge((n + 1) * (widest + 2), what)
        else:  # str/bytes: refused at once; anything else: TypeError at the first item
            self.budget.charge(n + 1, what)
        return func(items, start)

    def _widest(self, items: Any) -> int:
        """Most limbs of any int among ``items`` (0 when there is none)."""
        types = set(map(type, items))
        if types <= {int, bool}:
            return max(map(int.bit_length, items), default=0) // 64 + 1
        return max((_limbs(v) for v in items if type(v) in _INTS), default=0)

    def _allany(self, func: Any, args: list, kwargs: dict) -> Any:
        what = f"{_name(func)}()"
        _no_kwargs(_name(func), kwargs)
        if len(args) != 1:
            raise TypeError(f"{what} takes exactly one argument ({len(args)} given)")
        x = args[0]
        if type(x) in (list, tuple, set, frozenset, dict, str, bytes):
            self.budget.charge(len(x) + 1, what)
            return func(x)
        for chunk in self._chunks(x, what):  # ranges and iterators may be endless
            if func(chunk) is (func is any):
                return func is any
        return func is all

    def _fsum(self, func: Any, args: list, kwargs: dict) -> Any:
        if len(args) != 1 or kwargs:
            raise TypeError("math.fsum() takes exactly one argument")
        items, weight = self._items(args[0], "math.fsum()")
        self.budget.charge(weight + len(items) + 1, "math.fsum()")
        return func(items)

    def _method(self, method: Any, args: list, kwargs: dict) -> Any:  # noqa: C901
        receiver, name = method.__self__, method.__name__
        t = type(receiver)
        what = f"{t.__name__}.{name}()"
        charge, fits = self.budget.charge, self.budget.fits
        inputs = sum(self.weight(a) for a in args) + sum(self.weight(v) for v in kwargs.values())
        if t is str or t is bytes:
            n = len(receiver)
            if name in ("lower", "upper", "title", "capitalize", "casefold"):
                fits(3 * n + 1, what)  # 'ß'.upper() == 'SS'; no case mapping gives more than 3
                charge(3 * n + 1, what)
            elif name in ("strip", "lstrip", "rstrip"):
                chars = _arg(args, kwargs, 0, "chars")
                k = len(chars) if type(chars) in (str, bytes) else 1
                charge((n + 1) * (1 + k // 16), what)
            elif name in ("split", "splitlines"):
                fits(3 * n + 3, what)
                charge(3 * n + inputs + 3, what)
                out = method(*args, **kwargs)
                return self._remember(out, 1 + len(out) + sum(map(len, out)))
            elif name == "decode":
                _codec(_arg(args, kwargs, 0, "encoding"), _arg(args, kwargs, 1, "errors"))
                fits(4 * n + 1, what)
                charge(n + 1, what)
            else:  # count, find, index, startswith, endswith, is*: linear
                charge(n + inputs + 1, what)
            return method(*args, **kwargs)
        if t is list or t is tuple:
            if name == "copy":
                charge(len(receiver) + 1, what)
                return self._remember(method(), self.weight(receiver))
            charge(self.weight(receiver) + inputs + 1, what)  # count, index
            return method(*args, **kwargs)
        if t is dict:
            if name == "get":
                charge((MAX_COLLISIONS + 1) * inputs + 1, what)
            elif name == "copy":
                charge(len(receiver) + 1, what)
                return self._remember(method(), self.weight(receiver))
            else:  # keys, values, items: views
                charge(1, what)
            return method(*args, **kwargs)
        if t is set or t is frozenset:
            _no_kwargs(f"{t.__name__}.{name}", kwargs)
            others = []
            for other in args:
                if type(other) not in (set, frozenset, dict):
                    items, weight = self._items(other, what)
                    # set(other) is what union/issubset build: bounded here instead.
                    other = (self._hashed(items, set, weight, what)
                             if name in ("union", "issubset") else items)
                others.append(other)
            charge(self.weight(receiver) + sum(self.weight(o) for o in others) + 1, what)
            if name == "union":
                out = receiver.copy()
                for other in others:
                    self._union(out, other, what)
                    out = out.union(other)
                return out
            return getattr(receiver, name)(*others)
        charge(self.weight(receiver) + inputs + 1, what)  # float.is_integer, int.bit_*
        return method(*args, **kwargs)


def _name(func: Any) -> str:
    name = getattr(func, "__name__", None)
    return name if type(name) is str else type(func).__name__


_HANDLERS: dict[Any, Any] = {
    len: Evaluator._constant_time, bool: Evaluator._constant_time,
    type: Evaluator._constant_time, chr: Evaluator._constant_time,
    ord: Evaluator._constant_time,
    abs: Evaluator._generic, isinstance: Evaluator._isinstance, hash: Evaluator._generic,
    str: Evaluator._text, repr: Evaluator._text,
    int: Evaluator._int, float: Evaluator._int,
    round: Evaluator._round, divmod: Evaluator._divmod,
    list: Evaluator._collect, tuple: Evaluator._collect, set: Evaluator._collect,
    frozenset: Evaluator._collect, dict: Evaluator._dict,
    sorted: Evaluator._sorted, min: Evaluator._minmax, max: Evaluator._minmax,
    sum: Evaluator._sum, all: Evaluator._allany, any: Evaluator._allany,
    reversed: Evaluator._lazy, enumerate: Evaluator._lazy, zip: Evaluator._lazy,
    math.gcd: Evaluator._gcd, math.fsum: Evaluator._fsum,
}
for _math_name in MATH_NAMES:  # floats in, a float or a small int out
    _math_value = getattr(math, _math_name)
    if callable(_math_value) and _math_value not in _HANDLERS:
        _HANDLERS[_math_value] = Evaluator._generic
assert set(SAFE_FUNCS.values()) <= set(_HANDLERS)
_FUNCS: dict[int, tuple[Any, Any]] = {id(f): (f, h) for f, h in _HANDLERS.items()}
# Handlers of functions that cost at most their argument's weight, whatever it is: as a key=
# function they run natively (``len``, ``abs``, ``hash``, ``math.*``, ...).
_PER_ITEM = {Evaluator._constant_time, Evaluator._generic, Evaluator._isinstance}
