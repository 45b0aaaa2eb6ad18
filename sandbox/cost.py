"""The cost model of the host's evaluator (``evaluate``): limits, prices, and the weighing of
values.

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

import itertools
import sys
import time
from collections import Counter
from typing import Any

from sandbox.plain import MAX_COLLISIONS

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


class EvalTimeout(EvalLimit):
    """The wall-clock backstop passed before the work budget ran out: on a loaded host that
    can be the host's slowness, not the expression's cost (the judge retries once)."""


NONE = type(None)
INTS = (int, bool)
_CONTAINERS = (list, tuple, set, frozenset, dict)
KEYS, VALUES, ITEMS = type({}.keys()), type({}.values()), type({}.items())
_SMALL = 16  # containers this short, holding no container, are weighed afresh, not memoised
_FLAT = {list, tuple, set, frozenset}


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
            raise EvalTimeout(f"evaluation took over {self.seconds:g} s")


def limbs(x: int) -> int:
    return x.bit_length() // 64 + 1


def mul_cost(a: int, b: int) -> int:
    """Multiplying ints of ``a`` and ``b`` limbs (schoolbook, then Karatsuba as CPython)."""
    small, big = (a, b) if a <= b else (b, a)
    if small <= 40:
        return small * big + 1
    return (big // small + 1) * int(small ** 1.585) + 1


def div_cost(a: int, b: int) -> int:
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


def range_len(r: range) -> int:
    try:
        return len(r)
    except OverflowError:
        return sys.maxsize + 1


def most_limbs(items: Any) -> int:
    """Most limbs of any int among ``items`` (0 when there is none)."""
    types = set(map(type, items))
    if types <= {int, bool}:
        return max(map(int.bit_length, items), default=0) // 64 + 1
    return max((limbs(v) for v in items if type(v) in INTS), default=0)


def int_digits_limited() -> bool:
    """Whether int<->decimal-str conversion is capped (CPython's default 4300 digits)."""
    limit = sys.get_int_max_str_digits()
    return 0 < limit <= 100_000


class Meter:
    """Weighs values for one evaluation and builds collections at a bounded cost: weights are
    memoised by ``id`` (the objects kept alive), iterables drawn in charged chunks, sets and
    dicts built with hash collisions bounded; all of it charged to ``budget`` (fresh unless
    given)."""

    def __init__(self, budget: Budget | None = None):
        self.budget = budget if budget is not None else Budget()
        self._weights: dict[int, tuple[Any, int]] = {}  # id -> (object kept alive, weight)
        self._clashes: dict[int, tuple[Any, int]] = {}  # id -> (object, most members/hash)

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
            return 1 + limbs(value.start) + limbs(value.stop) + limbs(value.step)
        if t in (KEYS, VALUES, ITEMS):
            return self.weight(value.mapping) + OTHER_WEIGHT
        return OTHER_WEIGHT

    def _known(self, value: Any) -> int | None:
        """``value``'s weight if that is known or cheap to know, else None."""
        t = type(value)
        if t in _CONTAINERS:
            hit = self._weights.get(id(value))
            return hit[1] if hit is not None else self._small(value)
        if t in (KEYS, VALUES, ITEMS):
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
        if types <= {float, bool, NONE}:
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
        if t is dict or t is KEYS or t is VALUES:
            return x, self._sum_weights(x)
        if t is ITEMS:
            return x, self.weight(x.mapping) - 1 + len(x)
        if t is str:
            return x, 2 * len(x)
        if t is bytes:
            return x, len(x)
        if t is range:
            n = range_len(x)
            weight = n * (1 + max(limbs(x.start), limbs(x.stop)))
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
