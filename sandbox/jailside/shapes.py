"""What the encoding (``encode``) and the decoding (``decode``) of values share: their limits,
the value types both know by class, and how a value whose layout is more than its content (a
set's iteration order, a namedtuple's class) is rebuilt the same on the receiving side.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import collections
import pathlib
import sys

MAX_DEPTH = 300          # nesting of a value (deeper values travel as handles)
MAX_HANDLES = 200_000    # objects one side may hand out in a session
PATH_TYPES = (pathlib.PosixPath, pathlib.PurePosixPath, pathlib.Path, pathlib.PurePath)
DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


class NotEncodable(Exception):
    """A value whose structure cannot be copied (too deep, or a cycle through an immutable);
    the caller sends it as a handle instead."""


def table_size(s: set | frozenset) -> int:
    """Slots of a set's hash table (its iteration order follows them)."""
    extra = sys.getsizeof(s) - sys.getsizeof(set())
    return 8 if extra <= 0 else extra // 16


def rebuild_set(items: list, size: int, kind: type) -> set | frozenset:
    """A set of ``items`` that iterates in their order where CPython's layout allows: built
    plainly, else in a table of the sender's size (``set(dict)`` allocates for twice the
    dict's keys and inserts them in order; placeholders after the items only set the size)."""
    made = kind(items)
    if _same_order(made, items) or not isinstance(size, int) or not 8 < size <= 1 << 22:
        return made
    need = max(size // 4, len(items))
    if 2 * need >= size:
        return made
    keys = dict.fromkeys(items)
    placeholders = [object() for _ in range(need - len(items))]
    keys.update(dict.fromkeys(placeholders))
    laid = set(keys)
    for p in placeholders:
        laid.discard(p)
    if _same_order(laid, items):
        return laid if kind is set else frozenset(laid)
    return made


def _same_order(s, items: list) -> bool:
    return len(s) == len(items) and all(a is b for a, b in zip(s, items, strict=False))


def is_namedtuple_class(cls: type) -> bool:
    """A class made by ``collections.namedtuple`` (or ``typing.NamedTuple``) with nothing
    added: pure data, so the receiver may rebuild it."""
    fields = cls.__dict__.get("_fields")
    if cls.__bases__ != (tuple,) or not isinstance(fields, tuple) or "_make" not in cls.__dict__:
        return False
    if not all(type(f) is str for f in fields):
        return False
    plain = collections.namedtuple("_probe", fields)
    extra = set(cls.__dict__) - set(plain.__dict__) - {"__annotations__", "__orig_bases__",
                                                      "_field_defaults", "__match_args__"}
    return not extra


_NAMEDTUPLES: dict[tuple, type] = {}


def namedtuple_class(name: str, qualname: str, module: str, fields: list,
                     defaults: list) -> type:
    """The receiver's copy of a pure namedtuple class (one per distinct definition)."""
    key = (name, qualname, module, tuple(fields), len(defaults))
    cls = _NAMEDTUPLES.get(key)
    if cls is None:
        cls = collections.namedtuple(name, fields, defaults=defaults or None, module=module)
        cls.__qualname__ = qualname
        _NAMEDTUPLES[key] = cls
    return cls


def namedtuple_meta(cls: type) -> list:
    defaults = list(getattr(cls, "_field_defaults", {}).values())
    return [list(cls._fields), defaults]
