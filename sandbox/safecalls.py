"""Calls made by the host's evaluator: each whitelisted builtin, ``math`` function and plain
method has a handler that charges its cost (``cost``) before it runs, hands it only bounded
collections, and calls a ``key=`` function back through the evaluator."""

from __future__ import annotations

import math
import operator
from types import BuiltinFunctionType
from typing import Any

from sandbox.cost import (
    CALL_COST,
    HASH_COST,
    INTS,
    ITEM_COST,
    ITEMS,
    KEYS,
    NONE,
    REPR_FACTOR,
    VALUES,
    Meter,
    div_cost,
    int_digits_limited,
    limbs,
    most_limbs,
    mul_cost,
    range_len,
)
from sandbox.plain import MAX_COLLISIONS
from sandbox.whitelist import MATH_NAMES, SAFE_FUNCS, SAFE_METHODS, check_codec

_COLLECTIONS = (list, tuple, set, frozenset, dict, str, bytes, range, KEYS, VALUES, ITEMS)


def _arg(args: list, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


def _no_kwargs(name: str, kwargs: dict, allowed: tuple[str, ...] = ()) -> None:
    for k in kwargs:
        if k not in allowed:
            raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")


class SafeCalls(Meter):
    """The call handlers of ``evaluate.Evaluator``: ``call`` runs a whitelisted function or
    method, its cost bounded."""

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
            handler = SafeCalls._method
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
            check_codec(_arg(args, kwargs, 1, "encoding"), _arg(args, kwargs, 2, "errors"))
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
        bound = REPR_FACTOR * w + (0 if int_digits_limited() else w * w)
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
            cost = n + 1 + (0 if int_digits_limited() or func is float else n * n // 64)
            self.budget.charge(cost, what)
            return func(*args, **kwargs)
        return self._generic(func, args, kwargs)

    def _round(self, func: Any, args: list, kwargs: dict) -> Any:
        number = _arg(args, kwargs, 0, "number")
        ndigits = _arg(args, kwargs, 1, "ndigits")
        if type(number) in INTS and type(ndigits) in INTS and ndigits < 0:
            # round(n, -k) computes 10 ** k: when that is over twice n the answer is 0.
            if -ndigits >= (number.bit_length() + 1) * 0.30103 + 1:
                self.budget.charge(1, "round()")
                return 0
            n = limbs(number) + 1
            self.budget.charge(2 * mul_cost(n, n) + div_cost(2 * n, n), "round()")
            return func(*args, **kwargs)
        return self._generic(func, args, kwargs)

    def _divmod(self, func: Any, args: list, kwargs: dict) -> Any:
        if len(args) == 2 and not kwargs and all(type(a) in INTS for a in args):
            self.budget.charge(div_cost(limbs(args[0]), limbs(args[1])), "divmod()")
            return func(*args)
        return self._generic(func, args, kwargs)

    def _gcd(self, func: Any, args: list, kwargs: dict) -> Any:
        if all(type(a) in INTS for a in args):
            cost, acc = 1, 0
            for a in args:
                cost += limbs(acc) * limbs(a) + limbs(a)
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
            if type(item) not in (list, tuple) and type(item) not in (int, bool, float, NONE):
                size = range_len(item) if type(item) is range else (
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
            widest = most_limbs([start, *items]) + n.bit_length() // 64 + 1
            self.budget.charge((n + 1) * (widest + 2), what)
        else:  # str/bytes: refused at once; anything else: TypeError at the first item
            self.budget.charge(n + 1, what)
        return func(items, start)

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
                check_codec(_arg(args, kwargs, 0, "encoding"), _arg(args, kwargs, 1, "errors"))
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
    len: SafeCalls._constant_time, bool: SafeCalls._constant_time,
    type: SafeCalls._constant_time, chr: SafeCalls._constant_time,
    ord: SafeCalls._constant_time,
    abs: SafeCalls._generic, isinstance: SafeCalls._isinstance, hash: SafeCalls._generic,
    str: SafeCalls._text, repr: SafeCalls._text,
    int: SafeCalls._int, float: SafeCalls._int,
    round: SafeCalls._round, divmod: SafeCalls._divmod,
    list: SafeCalls._collect, tuple: SafeCalls._collect, set: SafeCalls._collect,
    frozenset: SafeCalls._collect, dict: SafeCalls._dict,
    sorted: SafeCalls._sorted, min: SafeCalls._minmax, max: SafeCalls._minmax,
    sum: SafeCalls._sum, all: SafeCalls._allany, any: SafeCalls._allany,
    reversed: SafeCalls._lazy, enumerate: SafeCalls._lazy, zip: SafeCalls._lazy,
    math.gcd: SafeCalls._gcd, math.fsum: SafeCalls._fsum,
}
for _math_name in MATH_NAMES:  # floats in, a float or a small int out
    _math_value = getattr(math, _math_name)
    if callable(_math_value) and _math_value not in _HANDLERS:
        _HANDLERS[_math_value] = SafeCalls._generic
assert set(SAFE_FUNCS.values()) <= set(_HANDLERS)
_FUNCS: dict[int, tuple[Any, Any]] = {id(f): (f, h) for f, h in _HANDLERS.items()}
# Handlers of functions that cost at most their argument's weight, whatever it is: as a key=
# function they run natively (``len``, ``abs``, ``hash``, ``math.*``, ...).
_PER_ITEM = {SafeCalls._constant_time, SafeCalls._generic, SafeCalls._isinstance}
