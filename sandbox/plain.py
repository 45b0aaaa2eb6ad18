"""Plain data across the jail boundary: exact-type encoding and strict decoding.

Only ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``range`` and ``list``/``tuple``/
``dict``/``set``/``frozenset`` of them cross; a subclass (``class Yes(int)``) or any other object
is refused. An iterator a candidate returns is drawn in its own process (bounded) and arrives
as a generator that replays the items, then its end (see ``child``). Every NaN decodes to
``math.nan``, so ``[nan] == [math.nan]`` holds here as it would in one process. Values travel
as JSON in which every JSON object is a one-key tag, so decoding is a total, strict
function: whatever bytes a hostile process writes, the result is built from fresh builtin
objects or a ``ValueError``.

This file is stdlib-only and self-contained: the jail worker runs it from source.
"""

from __future__ import annotations

import base64
import math

MAX_DEPTH = 200  # deeper values are refused (and would overflow the decoder's recursion)
BIG_INT = 1 << 4000  # ints this large go as hex: str(int) is capped at 4300 digits


class IteratorEnd(RuntimeError):
    """A candidate's iterator ended abnormally: it raised, or it was longer than was drawn."""


# How a replayed iterator's abnormal end is raised; the test process swaps in its own (which
# rebuilds the candidate's exception, or fails the test for good). A list, so both the host
# module and the jail's single-file copy share one mutable slot.
ITER_END_HOOK: list = [lambda end: IteratorEnd(f"candidate iterator ended with {end!s:.200}")]


def _replay(items: list, end):
    """A candidate's iterator, as drawn in its process: the items, then how it ended."""
    yield from items
    if end is not None:
        raise ITER_END_HOOK[0](end)


class NotPlain(TypeError):
    """The value (or something inside it) is not plain data."""


def encode(value, depth: int = 0):
    """``value`` as JSON-able tagged data; raises ``NotPlain`` for anything else."""
    if depth > MAX_DEPTH:
        raise NotPlain("value nested too deeply")
    t = type(value)
    if value is None or t is bool or t is str or t is float:
        return value
    if t is int:
        return value if -BIG_INT < value < BIG_INT else {"I": format(value, "x")}
    if t is list:
        return [encode(v, depth + 1) for v in value]
    if t is tuple:
        return {"t": [encode(v, depth + 1) for v in value]}
    if t is set:
        return {"s": [encode(v, depth + 1) for v in value]}
    if t is frozenset:
        return {"f": [encode(v, depth + 1) for v in value]}
    if t is dict:
        return {"d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if t is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if t is range:
        return {"r": [encode(value.start), encode(value.stop), encode(value.step)]}
    raise NotPlain(f"non-plain type {t.__name__}")


MAX_COLLISIONS = 8  # distinct set members or dict keys sharing one hash value, at most


def decode(data, depth: int = 0):
    """Inverse of ``encode``; raises ``ValueError`` (and nothing else) for anything ``encode``
    cannot produce. Linear in the data: a set, frozenset or dict with more than
    ``MAX_COLLISIONS`` distinct members of one hash value (which would make building it
    quadratic: hostile ints such as multiples of 2**61 - 1 all hash alike) is refused."""
    if depth == 0:  # the outermost call: whatever the data, only ValueError leaves decode
        try:
            return decode(data, 1)
        except ValueError:
            raise
        except Exception as exc:  # RecursionError on a deep stack, MemoryError, ...
            raise ValueError(f"undecodable value ({type(exc).__name__})") from None
    if depth > MAX_DEPTH + 2:
        raise ValueError("value nested too deeply")
    t = type(data)
    if data is None or t is bool or t is str or t is int:
        return data
    if t is float:  # every NaN is math.nan, so [nan] == [math.nan] holds as it does in-process
        return data if data == data else math.nan
    if t is list:
        return [decode(v, depth + 1) for v in data]
    if t is not dict or len(data) != 1:
        raise ValueError(f"malformed plain value of type {t.__name__}")
    (tag, body), = data.items()
    try:
        if tag == "I" and type(body) is str:
            return int(body, 16)
        if tag == "b" and type(body) is str:
            return base64.b64decode(body.encode("ascii"), validate=True)
        if type(body) is not list:
            raise ValueError(f"malformed tagged value {tag!r}")
        if tag == "r" and len(body) == 3:
            bounds = [decode(v, depth + 1) for v in body]
            if any(type(b) is not int for b in bounds) or bounds[2] == 0:
                raise ValueError("malformed range")
            return range(*bounds)
        if tag == "it" and len(body) == 2 and type(body[0]) is list:
            return _replay([decode(v, depth + 1) for v in body[0]], body[1])
        if tag == "t":
            return tuple(decode(v, depth + 1) for v in body)
        if tag in ("s", "f", "d"):
            out = set() if tag != "d" else {}
            per_hash: dict = {}  # hash value -> distinct members with it so far
            for item in body:
                if tag != "d":
                    key = decode(item, depth + 1)
                    size = len(out)
                    out.add(key)
                else:
                    if type(item) is not list or len(item) != 2:
                        raise ValueError("malformed dict item")
                    key = decode(item[0], depth + 1)
                    size = len(out)
                    out[key] = decode(item[1], depth + 1)
                if len(out) > size:  # a new member: at most MAX_COLLISIONS were compared to it
                    h = hash(key)
                    per_hash[h] = per_hash.get(h, 0) + 1
                    if per_hash[h] > MAX_COLLISIONS:
                        raise ValueError("too many hash collisions")
            return frozenset(out) if tag == "f" else out  # a set's copy compares nothing
    except TypeError as exc:  # unhashable set element or dict key
        raise ValueError(str(exc)) from None
    raise ValueError(f"unknown tag {tag!r}")
