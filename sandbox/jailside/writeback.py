"""Argument mutations written back: the mutable containers a call received are snapshotted
before it runs (``snapshot``); those it changed go back as their new content (``contents``),
written into the caller's own objects (``set_contents``), so a test sees ``xs.sort()`` or a
debit done by the candidate, as in one process.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import operator
from collections import Counter, OrderedDict, defaultdict, deque

from .shapes import rebuild_set, table_size

MUTABLE = (list, dict, set, bytearray, Counter, OrderedDict, defaultdict, deque)


def snapshot(x):
    t = type(x)
    if t is bytearray:
        return bytes(x)
    if t is list or t is deque or t is set:
        return list(x)
    return list(x.items())


def changed(x, snap) -> bool:
    t = type(x)
    if t is bytearray:
        return bytes(x) != snap
    if len(x) != len(snap):
        return True
    if t is list or t is deque or t is set:
        return not all(map(operator.is_, x, snap))
    return not all(k is k2 and v is v2 for (k, v), (k2, v2) in zip(x.items(), snap, strict=True))


def contents(codec, describe, x, known: dict):
    """The new content of a changed argument ``x`` (encoded as a fresh value of its type;
    the caller writes it into its own object)."""
    mine = {k: v for k, v in known.items() if k != id(x)}
    t = type(x)
    copy = (list(x) if t in (list, deque) else bytearray(x) if t is bytearray
            else set(x) if t is set else dict(x))
    if t is set:  # keep the iteration order the candidate's set has
        return [codec.encode(list(x), describe, mine), table_size(x)]
    return codec.encode(copy, describe, mine)


def set_contents(target, new) -> None:
    """Write ``new`` (a fresh value sent back) into the caller's own ``target``."""
    t = type(target)
    if t is list:
        target[:] = list(new)
    elif t is bytearray:
        target[:] = bytes(new)
    elif t is deque:
        target.clear()
        target.extend(new)
    elif t is set:
        items, size = new
        target.clear()
        target.update(rebuild_set(list(items), size, set))
    else:
        if not isinstance(new, dict):
            raise ValueError("malformed write-back")
        target.clear()
        for key, value in new.items():
            target[key] = value
