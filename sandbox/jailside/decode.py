"""Rebuilding one value from the data ``encode`` wrote (the format is ``codec``'s): fresh
objects of exactly the sent types, or ``ValueError``. Whatever a hostile peer writes, decoding
is a total, strict function bounded by the frame size and ``MAX_DEPTH``.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import base64
import collections
import datetime
import decimal
import fractions
import math
import struct

from .hints import DECODERS as HINT_DECODERS
from .shapes import MAX_DEPTH, MAX_HANDLES, PATH_TYPES, rebuild_set
from .stdnames import behaves, claimable, resolve_external


class Decoder:
    """The decoding of one value for ``codec``: ``known`` are this side's objects that the
    peer refers to by number (``{"A": n}``); ``built`` collects every container, in the
    pre-order numbering of the sender (``Encoder.keep``)."""

    def __init__(self, codec, known: list):
        self.codec, self.known = codec, known
        self.built: list = []  # containers in pre-order (the sender's numbering)
        # Decoding a class's bases: a standard-library name is taken there even from the
        # candidate process (the bases only shape the mirror class; nothing is run by name).
        self.structural = False
        # Decoding an annotation (``hints``): its tags are accepted there only.
        self.hinting = False

    def fork(self, hinting: bool) -> Decoder:
        """A decoder of a value of its own inside this one (see ``Encoder.fork``)."""
        sub = Decoder(self.codec, [])
        sub.hinting = hinting
        return sub

    def _new(self, obj: object) -> int:
        self.built.append(obj)
        return len(self.built) - 1

    def dec(self, x: object, depth: int):
        t = type(x)
        if x is None or t is bool or t is str or t is int or t is float:
            return x
        if depth > MAX_DEPTH + 2:
            raise ValueError("value nested too deeply")
        d = depth + 1
        if t is list:
            out: list = []
            self._new(out)
            out.extend(self.dec(i, d) for i in x)
            return out
        if t is not dict or len(x) != 1:
            raise ValueError("malformed value")
        (tag, v), = x.items()
        decoder = _DECODERS.get(tag)
        if decoder is None:
            raise ValueError(f"unknown tag {tag!r}")
        return decoder(self, v, d)

    def seq(self, v, d: int) -> list:
        if type(v) is not list:
            raise ValueError("malformed sequence")
        return [self.dec(i, d) for i in v]

    def pairs(self, v, d: int) -> list:
        if type(v) is not list:
            raise ValueError("malformed mapping")
        out = []
        for pair in v:
            if type(pair) is not list or len(pair) != 2:
                raise ValueError("malformed mapping")
            out.append((self.dec(pair[0], d), self.dec(pair[1], d)))
        return out

    def mapping(self, obj, v, d: int):
        self._new(obj)
        return self.fill(obj, v, d)

    def fill(self, obj, v, d: int):
        try:
            for k, val in self.pairs(v, d):
                obj[k] = val  # exact stdlib types: no hostile __setitem__
        except TypeError as exc:  # an unhashable key
            raise ValueError(f"malformed mapping: {exc}") from None
        return obj

    def immutable(self, build, v, d: int):
        """A container built after its items (numbered first, as the sender numbered it)."""
        index = self._new(None)
        obj = build(v, d)
        self.built[index] = obj
        return obj


def _dec_ref(s: Decoder, v, d):
    if type(v) is not int or not 0 <= v < len(s.built) or s.built[v] is None:
        raise ValueError("malformed back-reference")
    return s.built[v]


def _dec_known(s: Decoder, v, d):
    if type(v) is not int or not 0 <= v < len(s.known):
        raise ValueError("malformed argument reference")
    return s.known[v]


def _dec_set(kind):
    def dec(s: Decoder, v, d):
        if type(v) is not list or len(v) != 2 or type(v[1]) is not int:
            raise ValueError("malformed set")

        def build(v, d):
            items = s.seq(v[0], d)
            try:
                return rebuild_set(items, v[1], kind)
            except TypeError as exc:
                raise ValueError(f"malformed set: {exc}") from None
        return s.immutable(build, v, d)
    return dec


def _dec_int(s, v, d):
    if type(v) is not str or len(v) > 100_000:
        raise ValueError("malformed int")
    try:
        return int(v, 16)
    except ValueError:
        raise ValueError("malformed int") from None


def _dec_bytes(kind):
    def dec(s, v, d):
        if type(v) is not str:
            raise ValueError("malformed bytes")
        try:
            data = base64.b64decode(v.encode(), validate=True)
        except (ValueError, TypeError):
            raise ValueError("malformed bytes") from None
        if kind is bytes:
            return data
        out = bytearray(data)
        s._new(out)
        return out
    return dec


def _dec_default(s: Decoder, v, d):
    if type(v) is not list or len(v) != 2:
        raise ValueError("malformed defaultdict")
    out: collections.defaultdict = collections.defaultdict()
    s._new(out)
    factory = s.dec(v[0], d)
    if factory is not None and not callable(factory):
        raise ValueError("malformed defaultdict factory")
    out.default_factory = factory
    return s.fill(out, v[1], d)


def _dec_deque(s: Decoder, v, d):
    if type(v) is not list or len(v) != 2 or not (v[1] is None or type(v[1]) is int):
        raise ValueError("malformed deque")
    if v[1] is not None and v[1] < 0:
        raise ValueError("malformed deque")
    out = collections.deque(maxlen=v[1])
    s._new(out)
    out.extend(s.seq(v[0], d))
    return out


def _dec_tuple(s: Decoder, v, d):
    return s.immutable(lambda v, d: tuple(s.seq(v, d)), v, d)


def _dec_namedtuple(s: Decoder, v, d):
    if type(v) is not list or len(v) != 2:
        raise ValueError("malformed namedtuple")
    cls = s.dec(v[0], d)
    if not (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_make")):
        raise ValueError("malformed namedtuple class")

    def build(v, d):
        items = s.seq(v[1], d)
        if len(items) != len(cls._fields):
            raise ValueError("malformed namedtuple")
        return cls._make(items)
    return s.immutable(build, v, d)


def _dec_scalar(kind, build):
    def dec(s, v, d):
        try:
            return build(s, v, d)
        except (TypeError, ValueError, ArithmeticError, OverflowError) as exc:
            raise ValueError(f"malformed {kind}: {type(exc).__name__}") from None
    return dec


def _dec_datetime(s, v, d):
    kind, text = v
    cls = {"date": datetime.date, "datetime": datetime.datetime, "time": datetime.time}[kind]
    if type(text) is not str or len(text) > 64:
        raise ValueError("malformed datetime")
    return cls.fromisoformat(text)


def _dec_path(s, v, d):
    name, text = v
    cls = {c.__name__: c for c in PATH_TYPES}[name]
    if type(text) is not str:
        raise ValueError("malformed path")
    return cls(text)


def _dec_view(kind):
    def dec(s: Decoder, v, d):
        items = s.seq(v, d)
        if kind == "dk":
            return dict.fromkeys(items).keys()
        if kind == "dv":
            return dict(enumerate(items)).values()
        try:
            return dict(items).items()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed dict view: {exc}") from None
    return dec


def _dec_external(s, v, d):
    if type(v) is not list or len(v) != 2:
        raise ValueError("malformed external name")
    obj = resolve_external(v[0], v[1])
    if not s.codec.trusts_peer and not s.structural and behaves(obj):
        raise ValueError(f"a function or class named {v[0]}.{v[1]} by the candidate process "
                         "(they travel as handles)")
    return obj


def _dec_handle(s: Decoder, v, d):
    if type(v) is not list or len(v) != 3 or type(v[0]) is not int or type(v[1]) is not str:
        raise ValueError("malformed handle")
    codec = s.codec
    meta = v[2]
    if not codec.trusts_peer and type(meta) is dict and meta.get("r") is not None \
            and not claimable(meta["r"]):
        # The standard-library class a candidate's class says it stands for is a name the
        # candidate controls: believed only for the few that grant nothing (``claimable``).
        meta = {**meta, "r": None}
    proxy = codec.proxies.get(v[0])
    if proxy is None and len(codec.proxies) >= MAX_HANDLES:
        raise ValueError("too many handles")
    # What the handle's description holds is decoded on its own terms (a class's bases as
    # ``structural``, its annotations as ``hinting``), never on its container's.
    outer = s.structural, s.hinting
    s.structural = s.hinting = False
    try:
        if proxy is None:
            proxy = codec.proxies[v[0]] = codec.make_proxy(v[0], v[1], meta, s, d)
        elif meta is not None and codec.revisit is not None:
            codec.revisit(proxy, v[1], meta, s, d)
    finally:
        s.structural, s.hinting = outer
    return proxy


def _dec_nan(s: Decoder, v, d):
    if type(v) is not str or len(v) != 16:
        raise ValueError("malformed NaN")
    try:
        (x,) = struct.unpack(">d", bytes.fromhex(v))
    except ValueError:
        raise ValueError("malformed NaN") from None
    if x == x:
        raise ValueError("malformed NaN")
    s._new(x)  # numbered as the sender numbered it (``Encoder._nan``)
    return x


def _dec_own(s: Decoder, v, d):
    return s.codec.own(v)


def _dec_exception(s: Decoder, v, d):
    if type(v) is not list or len(v) != 5 or type(v[3]) is not str:
        raise ValueError("malformed exception")
    cls = s.dec(v[0], d)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise ValueError("malformed exception class")
    args = s.dec(v[1], d)
    attrs = s.dec(v[2], d)
    if type(args) is not list or type(attrs) is not dict:
        raise ValueError("malformed exception")
    exc = build_exception(cls, tuple(args), attrs, v[3])
    cause = s.dec(v[4], d) if v[4] is not None else None
    if isinstance(cause, BaseException):
        exc.__cause__ = cause
    return exc


def build_exception(cls: type, args: tuple, attrs: dict, text: str) -> BaseException:
    """An instance of ``cls`` with these ``args``, attributes and ``str`` (as far as the class
    lets its ``str`` be set: see ``mirror``'s exception classes)."""
    try:
        exc = cls(*args)
    except Exception:
        exc = cls.__new__(cls)
    try:
        exc.args = args
    except Exception:
        pass
    for key, value in attrs.items():
        if isinstance(key, str) and (not key.startswith("__")
                                     or key == "__notes__" and type(value) is list):
            try:
                setattr(exc, key, value)
            except Exception:
                pass
    if getattr(cls, "__judge_mirror__", False):
        try:
            exc.__dict__["__judge_str__"] = text
        except Exception:
            pass
    return exc


_DECODERS = {
    "@": _dec_ref,
    "A": _dec_known,
    "t": _dec_tuple,
    "d": lambda s, v, d: s.mapping({}, v, d),
    "s": _dec_set(set),
    "f": _dec_set(frozenset),
    "I": _dec_int,
    "b": _dec_bytes(bytes),
    "ba": _dec_bytes(bytearray),
    "C": lambda s, v, d: s.mapping(collections.Counter(), v, d),
    "O": lambda s, v, d: s.mapping(collections.OrderedDict(), v, d),
    "D": _dec_default,
    "Q": _dec_deque,
    "N": _dec_namedtuple,
    "c": _dec_scalar("complex", lambda s, v, d: complex(*[float(x) for x in v][:2])
                     if len(v) == 2 and all(type(x) in (int, float) for x in v)
                     else complex("x")),
    "r": _dec_scalar("range", lambda s, v, d: range(*s.seq(v, d))),
    "sl": _dec_scalar("slice", lambda s, v, d: slice(*s.seq(v, d))),
    "E": lambda s, v, d: Ellipsis,
    "NI": lambda s, v, d: NotImplemented,
    "Fr": _dec_scalar("Fraction", lambda s, v, d: fractions.Fraction(*s.seq(v, d))
                      if all(type(i) is int for i in s.seq(v, d)) else fractions.Fraction("x")),
    "De": _dec_scalar("Decimal", lambda s, v, d: decimal.Decimal(v) if type(v) is str
                      and len(v) < 10_000 else decimal.Decimal("x")),
    "dt": _dec_scalar("datetime", _dec_datetime),
    "td": _dec_scalar("timedelta", lambda s, v, d: datetime.timedelta(*v)
                      if all(type(i) is int for i in v) else datetime.timedelta("x")),
    "P": _dec_scalar("path", _dec_path),
    "dk": _dec_view("dk"),
    "dv": _dec_view("dv"),
    "di": _dec_view("di"),
    "x": _dec_external,
    "h": _dec_handle,
    "H": _dec_own,
    "X": _dec_exception,
    "nan": lambda s, v, d: math.nan,
    "fn": _dec_nan,
    **HINT_DECODERS,
}
