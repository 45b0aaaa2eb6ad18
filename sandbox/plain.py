"""Plain data across the jail boundary: exact-type encoding and strict decoding.

Only ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes`` and ``list``/``tuple``/``dict``/
``set``/``frozenset`` of them cross; a subclass (``class Yes(int)``) or any other object is
refused. Values travel as JSON in which every JSON object is a one-key tag, so decoding is a
total, strict function: whatever bytes a hostile process writes, the result is built from
fresh builtin objects or a ``ValueError``.

This file is stdlib-only and self-contained: the jail worker runs it from source.
"""

from __future__ import annotations

import base64

MAX_DEPTH = 200  # deeper values are refused (and would overflow the decoder's recursion)
BIG_INT = 1 << 4000  # ints this large go as hex: str(int) is capped at 4300 digits


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
    raise NotPlain(f"non-plain type {t.__name__}")


def decode(data, depth: int = 0):
    """Inverse of ``encode``; raises ``ValueError`` for anything ``encode`` cannot produce."""
    if depth > MAX_DEPTH + 1:
        raise ValueError("value nested too deeply")
    t = type(data)
    if data is None or t is bool or t is str or t is float or t is int:
        return data
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
        if tag == "t":
            return tuple(decode(v, depth + 1) for v in body)
        if tag == "s":
            return {decode(v, depth + 1) for v in body}
        if tag == "f":
            return frozenset(decode(v, depth + 1) for v in body)
        if tag == "d":
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise ValueError("malformed dict item")
                out[decode(pair[0], depth + 1)] = decode(pair[1], depth + 1)
            return out
    except TypeError as exc:  # unhashable set element or dict key
        raise ValueError(str(exc)) from None
    raise ValueError(f"unknown tag {tag!r}")
