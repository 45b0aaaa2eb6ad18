"""The requests one side serves to the other (``rpc``): what each ``op`` does with the
server's own objects, and what a restricted server (T serving C) refuses.

- ``call``/``callm``: call a callable, or a method by name;
- ``get``/``set``/``del``: an attribute; ``restore`` undoes the test's last ``set`` of one
  (``monkeypatch``/``mock.patch`` setting back a mirror's stand-in, see ``mirror``);
- ``op``: one special method (``OPS``);
- ``state`` (C only): the test's environment, working directory, recursion limit, patches
  of the standard library and the version of the test's ``random`` generator
  (``procstate``); ``randstate`` (T only): the test's ``random`` state, for the candidate;
- ``nextn`` (C only): items of an iterator read ahead (``proxies.ReadAhead``);
- ``stdin`` (T only): the candidate reads the test's ``input()``/``sys.stdin``
  (see ``candidate``).

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import builtins
import collections
import copy
import operator
import os
import sys

from . import procstate
from .layout import MODULE

MAX_RESTORES = 100     # remembered earlier values of one attribute (``Operations._remember``)
MAX_READAHEAD = 4096   # items of one iterator sent at once (``proxies.ReadAhead``)
MAX_PLAIN = 1000       # characters of a string item that may be read ahead
_ABSENT = object()

OPS = {
    "__len__": len, "__iter__": iter, "__next__": next, "__reversed__": reversed,
    "__contains__": lambda a, b: b in a, "__getitem__": operator.getitem,
    "__setitem__": operator.setitem, "__delitem__": operator.delitem, "__bool__": bool,
    "__hash__": hash, "__repr__": repr, "__str__": str, "__format__": format,
    "__enter__": lambda a: a.__enter__(), "__exit__": lambda a, *x: a.__exit__(*x),
    "__eq__": operator.eq, "__ne__": operator.ne, "__lt__": operator.lt,
    "__le__": operator.le, "__gt__": operator.gt, "__ge__": operator.ge,
    "__neg__": operator.neg, "__pos__": operator.pos, "__abs__": abs,
    "__invert__": operator.invert, "__int__": int, "__float__": float, "__complex__": complex,
    "__index__": operator.index, "__round__": round, "__length_hint__": operator.length_hint,
    "__fspath__": os.fspath, "__copy__": copy.copy, "__deepcopy__": copy.deepcopy,
}
for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                   ("mod", operator.mod), ("pow", operator.pow), ("matmul", operator.matmul),
                   ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lshift", operator.lshift), ("rshift", operator.rshift)):
    OPS[f"__{_name}__"] = _fn
    OPS[f"__r{_name}__"] = (lambda fn: lambda a, b: fn(b, a))(_fn)
    OPS[f"__i{_name}__"] = getattr(operator, f"i{_name}")


class Operations:
    """Serving requests, for ``rpc.Endpoint``: ``restricted`` (T serving C), ``originals``
    (see ``_remember``) and ``_echo`` come from the endpoint."""

    restricted: bool
    originals: dict
    requests: int  # requests this side made so far
    logs: list | None

    def _execute(self, op: str, parts: list):
        if op == "call":
            target, args, kwargs = _unpack(parts, 3)
            self._check_call(target)
            return target(*_args(args), **_kwargs(kwargs))
        if op == "callm":
            target, name, args, kwargs = _unpack(parts, 4)
            return getattr(target, self._public(name))(*_args(args), **_kwargs(kwargs))
        if op == "get":
            target, name = _unpack(parts, 2)
            return getattr(target, self._public(name))
        if op == "set":
            target, name, value = _unpack(parts, 3)
            name = self._public(name)
            if not self.restricted:
                self._remember(target, name)
            return setattr(target, name, value)
        if op == "restore" and not self.restricted:
            target, name = _unpack(parts, 2)
            return self._restore(target, self._public(name))
        if op == "del":
            target, name = _unpack(parts, 2)
            return delattr(target, self._public(name))
        if op == "state" and not self.restricted:  # C: see ``procstate``
            return procstate.apply(*_unpack(parts, 6))
        if op == "randstate" and self.restricted:  # T: the test's generator, for C
            _unpack(parts, 0)
            return procstate.test_random_state()
        if op == "stdin" and self.restricted:  # T: the candidate reads the test's stdin
            method, args, out, err = _unpack(parts, 4)
            self._echo([out, err], None)  # what it printed before (a prompt's order)
            if method == "input":
                return builtins.input(*_args(args)[:1])
            if method not in ("read", "readline", "readlines"):
                raise ValueError(f"unknown stdin method {method!r}")
            return getattr(sys.stdin, method)(*_args(args)[:1])
        if op == "nextn" and not self.restricted:  # C: see ``proxies.ReadAhead``
            target, n = _unpack(parts, 2)
            return self._next_items(target, n)
        if op == "op":
            name, target, args = _unpack(parts, 3)
            fn = OPS.get(name) if isinstance(name, str) else None
            if fn is None:
                raise ValueError(f"unknown operation {name!r}")
            return fn(target, *_args(args))
        raise ValueError(f"unknown request {op!r}")

    def _next_items(self, target, n) -> list:
        """Up to ``n`` items of the iterator ``target``, and how it ended (None: it may go
        on). Stops after an item that is not plain data, or whose making printed, logged or
        asked the test: the test sees those in their place."""
        if type(n) is not int or not 0 < n <= MAX_READAHEAD or \
                not hasattr(type(target), "__next__"):
            raise ValueError("malformed read-ahead")
        items: list = []
        asked, mark = self.requests, _module_mark()
        for _ in range(n):
            try:
                item = next(target)
            except BaseException as exc:  # StopIteration too: raised when the test gets here
                return [items, exc, None]
            items.append(item)
            if self._noticed():  # the last item's output: shown when the test takes it
                return [items, None, self._take_output()]
            if not _plain(item) or self.requests != asked or _module_mark() != mark:
                break
        return [items, None, None]

    def _noticed(self) -> bool:
        """Whether the call being served printed or logged anything so far."""
        return bool(getattr(sys.stdout, "size", 0) or getattr(sys.stderr, "size", 0)
                    or self.logs)

    def _take_output(self) -> list:
        """What the call printed and logged so far, taken out of its answer's own."""
        out = [s.drain() if hasattr(s, "drain") else "" for s in (sys.stdout, sys.stderr)]
        logs = list(self.logs or ())
        if self.logs:
            self.logs.clear()
        return [*out, logs]

    def _remember(self, target, name: str) -> None:
        """Before the test sets an attribute of ours: what ``target.__dict__`` held under
        ``name`` (or that it held nothing), for ``restore``."""
        try:
            own = vars(target)
        except TypeError:  # no __dict__ (slots): nothing a restore could put back
            return
        entry = self.originals.setdefault((id(target), name), (target, []))
        entry[1].append(own.get(name, _ABSENT))
        del entry[1][:-MAX_RESTORES]

    def _restore(self, target, name: str) -> None:
        """The test undoes its last ``set`` of ``target.name`` (``monkeypatch``/``mock``
        setting back the stand-in of a mirror class, see ``mirror``): our own attribute
        comes back, or goes away if there was none."""
        entry = self.originals.get((id(target), name))
        if entry is None or entry[0] is not target or not entry[1]:
            return
        old = entry[1].pop()
        if old is not _ABSENT:
            setattr(target, name, old)
        elif name in vars(target):
            delattr(target, name)

    def _public(self, name: object) -> str:
        if not isinstance(name, str):
            raise ValueError("malformed attribute name")
        if self.restricted and name.startswith("_"):
            raise AttributeError(f"the candidate may not use the test's attribute {name!r}")
        return name

    def _check_call(self, target) -> None:
        if self.restricted and isinstance(target, type):
            raise TypeError("the candidate may not construct the test's classes")


_PLAIN = (int, float, str, bytes, bool, type(None))
_SIZED = (list, dict, set, bytearray, collections.deque)


def _module_mark() -> list:
    """What the candidate module's globals are bound to, and the sizes of its containers: an
    item whose making changed them (``count += 1``, ``seen.append(x)``) ends a read-ahead,
    so the test reads the module as it would after taking that item."""
    module = sys.modules.get(MODULE)
    names = getattr(module, "__dict__", None)
    if type(names) is not dict:
        return []
    return [(id(v), len(v) if type(v) in _SIZED else -1) for v in names.values()]


def _plain(item) -> bool:
    """Small plain data (a number, a short string, a short tuple of those): an item read
    ahead that holds nothing of the candidate's that could change before the test takes
    it."""
    if type(item) in _PLAIN:
        return not isinstance(item, (str, bytes)) or len(item) <= MAX_PLAIN
    return type(item) is tuple and len(item) <= 16 and all(
        type(x) in _PLAIN and (not isinstance(x, (str, bytes)) or len(x) <= MAX_PLAIN)
        for x in item)


def _unpack(parts: list, n: int) -> list:
    if len(parts) != n:
        raise ValueError("malformed request")
    return parts


def _args(args) -> tuple:
    if type(args) not in (list, tuple):
        raise ValueError("malformed arguments")
    return tuple(args)


def _kwargs(kwargs) -> dict:
    if type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
        raise ValueError("malformed keyword arguments")
    return kwargs
