"""Annotations across the boundary: the ``__annotations__`` of a function or class that
travels by handle go with its description (``describe``), so that its proxy has them
(``typing.get_type_hints``, ``inspect.signature``, ``dataclasses.fields(...)[i].type``).

An annotation travels as what it is: a string stays a string (``from __future__ import
annotations``; the receiver evaluates it where ``typing`` looks, see ``mirror``), a class of
the sender's own travels as a handle (its mirror class), and a standard-library type by name,
``int``, ``list[str]``, ``int | None``, ``typing.Optional[Point]``, ``Callable[[int], str]``
rebuilt from their parts (tags ``xa``, ``ga``, ``un``, ``ty``, ``hl``), so that they equal
the receiver's own.

Those tags are decoded only inside an annotation (``Decoder.hinting``), and there a
standard-library name from the candidate process is taken only for a *type* (a class or one
of ``typing``'s special forms), never for a function: elsewhere a class named by the candidate
is refused (``codec.Codec``), because the test would construct or call the real one in place
of the candidate's; an annotation is a type hint that a test compares, and the candidate's
functions and classes it could call still arrive as handles everywhere else. What the
candidate can do with it is make a hint read as a real standard-library type.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import collections.abc
import functools
import operator
import types
import typing

from .stdnames import external_name, resolve_external

MAX_HINTS = 200        # annotations of one function or class
MAX_NESTED = 8         # classes described inside annotations inside annotations...
_CALLABLES = (typing.Callable, collections.abc.Callable)


def encode_hints(encoder, annotations) -> list | None:
    """``[[name, hint], ...]`` of an ``__annotations__`` dict (None when there is none)."""
    if not isinstance(annotations, dict) or not annotations:
        return None
    out = []
    encoder.hinting += 1
    try:
        for name, value in list(annotations.items())[:MAX_HINTS]:
            if type(name) is not str:
                continue
            # Each annotation is a value of its own (``decode_hints`` decodes it so): what it
            # numbers never shifts the numbering of the value the description is part of.
            described = dict(encoder.described)
            try:
                out.append([name, _hint(encoder.fork(), value, 0)])
            except Exception:  # whatever the candidate's objects do: its text stands in
                encoder.described.clear()  # (and what it described was never sent)
                encoder.described.update(described)
                out.append([name, _text(value)])
    finally:
        encoder.hinting -= 1
    return out


def _hint(e, x, depth: int):
    if x is None or type(x) is str:
        return x
    if depth > 30:
        return _text(x)
    d = depth + 1
    if type(x) is typing.ForwardRef:
        return _text(x.__forward_arg__)
    if type(x) is types.GenericAlias:  # list[str], tuple[int, ...]
        return {"ga": [_hint(e, x.__origin__, d), [_hint(e, a, d) for a in x.__args__]]}
    if type(x) is types.UnionType:  # int | None
        return {"un": [_hint(e, a, d) for a in x.__args__]}
    if x is type(None):
        return {"xa": ["types", "NoneType"]}
    if isinstance(x, type) or type(x).__module__ == "typing":
        name = external_name(x)
        if name is not None:
            return {"xa": name}
    form = _subscription(x)
    if form is not None:
        return {"ty": [_hint(e, form[0], d), [_hint(e, a, d) for a in form[1]]]}
    if type(x) is list:  # the parameters of ``Callable[[int], str]``
        return {"hl": [_hint(e, a, d) for a in x]}
    if isinstance(x, type) and (id(x) in e.describing or e.hinting > MAX_NESTED):
        # A class whose description is under way (``next: Node`` in ``Node``), or too deep:
        # by name, as a forward reference, which ``get_type_hints`` resolves on arrival.
        return _text(x.__name__)
    return e.enc(x, d)


def _subscription(x) -> tuple | None:
    """``(form, parameters)`` such that ``form[parameters] == x`` for a ``typing`` alias
    (``List[int]``, ``Optional[X]``, ``Literal["a"]``, ``Callable[[int], str]``,
    ``Annotated[int, ...]``), checked here; None for anything else."""
    origin, args = getattr(x, "__origin__", None), getattr(x, "__args__", None)
    if origin is None or type(args) is not tuple:
        return None
    if hasattr(x, "__metadata__"):  # Annotated[int, "meta"]: its __origin__ is int
        forms, params = [typing.Annotated], [origin, *x.__metadata__]
    else:
        name = getattr(x, "_name", None)
        # ``List[int]`` is subscribed from ``typing.List`` (its origin is ``list``),
        # ``Optional[int]`` from its origin ``Union``
        forms = [getattr(typing, name, None) if isinstance(name, str) else None, origin]
        params = list(args)
        if any(f in _CALLABLES for f in forms) and args:
            params = [args[0], args[-1]] if args[0] is Ellipsis else [list(args[:-1]), args[-1]]
    for form in forms:
        # A form of the sender's own (``Box[int]`` of its ``Generic`` class) is not used:
        # the alias then travels as any object does.
        if form is None or external_name(form) is None:
            continue
        try:
            if subscribe(form, params) == x:
                return form, params
        except Exception:
            continue
    return None


def subscribe(form, params: list):
    return form[params[0] if len(params) == 1 else tuple(params)]


def _text(x) -> str:
    try:
        return str(x)[:200]
    except Exception:
        return "?"


# ----- the receiver's side ---------------------------------------------------------------------
def decode_hints(decoder, data, depth: int) -> dict | None:
    """The ``__annotations__`` dict ``encode_hints`` sent (None for none; ``ValueError`` for
    anything malformed)."""
    if data is None:
        return None
    if type(data) is not list or len(data) > MAX_HINTS:
        raise ValueError("malformed annotations")
    hints = {}
    for entry in data:
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not str:
            raise ValueError("malformed annotations")
        hints[entry[0]] = decoder.fork(hinting=True).dec(entry[1], depth)
    return hints


def _is_type(obj) -> bool:
    """A class or one of ``typing``'s special forms (``Any``, ``Optional``, ``List``, a
    ``TypeVar``): what an annotation names, and nothing a test runs as code under test."""
    return isinstance(obj, type) or (type(obj).__module__ == "typing"
                                     and not isinstance(obj, types.FunctionType))


def _inside(s) -> None:
    if not s.hinting:
        raise ValueError("an annotation's tag outside an annotation")


def _dec_name(s, v, d):
    _inside(s)
    if type(v) is not list or len(v) != 2:
        raise ValueError("malformed annotation name")
    obj = resolve_external(v[0], v[1])
    if not s.codec.trusts_peer and not _is_type(obj):
        raise ValueError(f"an annotation names {v[0]}.{v[1]}, which is no type")
    return obj


def _dec_generic(s, v, d):
    _inside(s)
    if type(v) is not list or len(v) != 2:
        raise ValueError("malformed generic alias")
    origin, args = s.dec(v[0], d), s.seq(v[1], d)
    if not isinstance(origin, type):
        raise ValueError("malformed generic alias")
    return types.GenericAlias(origin, tuple(args))


_UNION_ARGS = (types.GenericAlias, types.UnionType, typing.TypeVar)


def _dec_union(s, v, d):
    _inside(s)
    args = s.seq(v, d)
    if not args or not all(isinstance(a, type) or a is None or type(a) in _UNION_ARGS
                           for a in args):
        raise ValueError("malformed union")
    try:
        return functools.reduce(operator.or_, args)
    except TypeError as exc:
        raise ValueError(f"malformed union: {exc}") from None


def _dec_subscription(s, v, d):
    _inside(s)
    if type(v) is not list or len(v) != 2:
        raise ValueError("malformed annotation")
    form, params = s.dec(v[0], d), s.seq(v[1], d)
    # Only a form of the receiver's own (never a proxy: subscribing one would ask its owner).
    if not _is_type(form) or s.codec.peer_ref_of(form) is not None:
        raise ValueError("malformed annotation form")
    try:
        return subscribe(form, params)
    except Exception as exc:
        raise ValueError(f"malformed annotation: {type(exc).__name__}") from None


def _dec_list(s, v, d):
    _inside(s)
    return s.seq(v, d)


DECODERS = {"xa": _dec_name, "ga": _dec_generic, "un": _dec_union, "ty": _dec_subscription,
            "hl": _dec_list}
