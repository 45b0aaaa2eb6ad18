"""Writing one value as JSON-ready data (the format is ``codec``'s): copies by exact type,
shared and cyclic structure as back-references, everything else as a handle or a
standard-library name.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import array
import base64
import collections
import datetime
import decimal
import enum
import fractions
import math
import re
import struct
import types
import uuid
import zoneinfo

from .shapes import (
    DICT_VIEWS,
    IP_TYPES,
    MAX_DEPTH,
    OUTLINE,
    PATH_TYPES,
    NotEncodable,
    TooDeep,
    is_namedtuple_class,
    table_size,
)
from .stdnames import external_name, is_stdlib_module

_BIG = 1 << 53  # ints beyond what every JSON reader keeps exact travel as hex


class Encoder:
    """The encoding of one value (one frame's worth) for ``codec``: ``describe(obj, self)``
    returns ``(kind, meta)`` of an object that travels as a handle; ``known`` maps ``id()`` of
    objects the peer already holds to their numbers (``{"A": n}``)."""

    def __init__(self, codec, describe, known: dict):
        self.codec, self.describe, self.known = codec, describe, known
        self.memo: dict[int, int] = {}
        self.keep: list = []
        self.open: set[int] = set()  # immutables being encoded (a cycle through one: refuse)
        # Handles described in this value: a second one goes without its description (the
        # receiver built its proxy from the first, earlier in the same value), so that
        # classes the descriptions name (in annotations: ``hints``) are described once.
        self.described: dict[int, str] = {}
        self.describing: set[int] = set()  # id() of objects whose description is under way
        self.hinting = 0  # annotations being encoded, nested (``hints``)
        # Pieces of a deep value, each at most ``OUTLINE`` levels of JSON (``{"z": i}`` in
        # its place), so that no frame nests deeper than a JSON reader's stack allows.
        self.outlined: list = []

    def fork(self) -> Encoder:
        """An encoder of a value of its own inside this one (an annotation, see ``hints``):
        its own numbering, this one's handles described and nesting of annotations."""
        sub = Encoder(self.codec, self.describe, {})
        sub.described, sub.describing, sub.hinting, sub.outlined = \
            self.described, self.describing, self.hinting, self.outlined
        return sub

    def handle(self, obj: object) -> object:
        peer_ref = self.codec.peer_ref_of(obj)
        if peer_ref is not None:
            return {"H": peer_ref}
        if self.describe is None:
            raise NotEncodable(f"{type(obj).__name__} cannot be sent")
        if not self.codec.trusts_peer and is_pytest_object(obj):
            raise TypeError(f"pytest's {type(obj).__name__} is not handed to the candidate "
                            "(nothing of the test process's pytest crosses the boundary)")
        ref = self.codec.ref_of(obj)
        kind = self.described.get(ref)
        if kind is not None:
            return {"h": [ref, kind, None]}
        self.describing.add(id(obj))
        try:
            kind, meta = self.describe(obj, self)
        finally:
            self.describing.discard(id(obj))
        self.described[ref] = kind
        return {"h": [ref, kind, meta]}

    def _container(self, obj: object, immutable: bool = False) -> object | None:
        """A back-reference if ``obj`` was sent before in this value, else register it."""
        key = id(obj)
        if key in self.known:
            return {"A": self.known[key]}
        if key in self.memo:
            if key in self.open:
                raise NotEncodable("a cycle through an immutable container")
            return {"@": self.memo[key]}
        self.memo[key] = len(self.memo)
        self.keep.append(obj)
        if immutable:
            self.open.add(key)
        return None

    def enc(self, x: object, depth: int) -> object:
        t = type(x)
        if x is None or t is bool or t is str:
            return x
        if t is int:
            return x if -_BIG < x < _BIG else {"I": hex(x)}
        if t is float:
            return x if x == x else self._nan(x)
        if depth > MAX_DEPTH:
            raise TooDeep(f"a {t.__name__} nested more than {MAX_DEPTH} levels deep cannot "
                          "cross between the test and the candidate")
        if depth and depth % OUTLINE == 0:
            index = len(self.outlined)
            self.outlined.append(None)
            self.outlined[index] = self._enc(x, t, depth)
            return {"z": index}
        return self._enc(x, t, depth)

    def root(self, data: object) -> object:
        """The whole value: ``data`` with the pieces ``enc`` outlined."""
        return {"Z": [data, self.outlined]} if self.outlined else data

    def _enc(self, x: object, t: type, depth: int) -> object:
        d = depth + 1
        if t is list:
            ref = self._container(x)
            return ref if ref is not None else [self.enc(i, d) for i in x]
        if t is tuple:
            ref = self._container(x, immutable=True)
            if ref is not None:
                return ref
            out = {"t": [self.enc(i, d) for i in x]}
            self.open.discard(id(x))
            return out
        if t is dict:
            ref = self._container(x)
            return ref if ref is not None else {"d": self.items(x, d)}
        if t is set or t is frozenset:
            ref = self._container(x, immutable=t is frozenset)
            if ref is not None:
                return ref
            out = {"s" if t is set else "f": [[self.enc(i, d) for i in x], table_size(x)]}
            self.open.discard(id(x))
            return out
        peer_ref = self.codec.peer_ref_of(x)
        if peer_ref is not None:  # the peer's own object, going home
            return {"H": peer_ref}
        if t is bytes:
            return {"b": base64.b64encode(x).decode()}
        if t is bytearray:
            ref = self._container(x)
            return ref if ref is not None else {"ba": base64.b64encode(x).decode()}
        special = _SPECIAL.get(t)
        if special is None and not self.codec.names_callables:
            special = _FROM_CANDIDATE.get(t)
        if special is not None:
            return special(self, x, d)
        if isinstance(x, BaseException):
            return self._exception(x, d)
        if t in DICT_VIEWS:
            tag = "dk" if t is DICT_VIEWS[0] else "dv" if t is DICT_VIEWS[1] else "di"
            return {tag: [self.enc(i, d) for i in x]}
        if t in PATH_TYPES:
            return {"P": [t.__name__, str(x)]}
        if isinstance(x, tuple) and is_namedtuple_class(t):
            ref = self._container(x, immutable=True)
            if ref is not None:
                return ref
            out = {"N": [self.handle_or_name(t), [self.enc(i, d) for i in x]]}
            self.open.discard(id(x))
            return out
        if isinstance(x, enum.Enum):
            member = self._stdlib_member(x, t, d)
            if member is not None:
                return member
        if isinstance(x, tuple) and hasattr(t, "n_sequence_fields"):
            record = self._structseq(x, t, d)
            if record is not None:
                return record
        kind = self.codec.value_kind(t)
        if kind is not None:
            return self._value(x, t, kind, d)
        name = external_name(x, self.codec.names_callables)
        if name is not None:
            return {"x": name}
        return self.handle(x)

    def _value(self, x, t: type, kind: str, d: int) -> object:
        """An instance of a value class (``shapes.value_class``): its class, the builtin value
        it is (an ``Enum`` member by name, a ``Flag`` combination by value) and its own
        attributes."""
        cls = self.handle(t)  # first, as the receiver decodes it first
        if kind == "enum":
            name = x._name_
            payload = ["n", name] if t._member_map_.get(name) is x \
                else ["v", self.enc(x._value_, d)]
        elif kind == "tuple":
            payload = self.enc(tuple(tuple.__iter__(x)), d)
        else:
            payload = self.enc(_VALUE_OF[kind](x), d)
        attrs = getattr(x, "__dict__", None) if kind != "enum" else None
        attrs = self.enc(dict(list(attrs.items())[:50]), d) if attrs else None
        return {"V": [cls, payload, attrs]}

    def _structseq(self, x, t: type, d: int) -> object | None:
        """A standard-library record (``time.struct_time``, ``os.stat_result``) as its class's
        name, its fields and its named-only fields (``tm_zone``)."""
        cls = external_name(t)
        if cls is None:
            return None
        _, (fields, named) = x.__reduce__()
        return {"ss": [cls, self.enc(tuple(fields), d), self.enc(dict(named), d)]}

    def _stdlib_member(self, x, t: type, d: int) -> object | None:
        """A member of a standard-library ``Enum`` (``HTTPStatus.OK``, ``re.IGNORECASE``, a
        combination of ``re`` flags) as its class's name and its own name or value: the
        receiver looks it up in its own class."""
        cls = external_name(t)
        if cls is None or not isinstance(t, enum.EnumType):
            return None
        name = x._name_
        if isinstance(name, str) and t._member_map_.get(name) is x:
            return {"em": [cls, "n", name]}
        if type(x._value_) is int:
            return {"em": [cls, "v", x._value_]}
        return None

    def _nan(self, x: float) -> object:
        """A NaN keeps its identity, which containers' ``==`` relies on (``[nan] == [nan]``
        holds for one NaN object only, as ``nan != nan``): ``math.nan`` arrives as the
        receiver's ``math.nan``; any other NaN is numbered as a container is, so one sent
        twice, or sent back to its owner, is one object (and its bits, sign and payload
        included, are kept)."""
        if x is math.nan:
            return {"nan": 0}
        ref = self._container(x)
        return ref if ref is not None else {"fn": struct.pack(">d", x).hex()}

    def handle_or_name(self, cls: type, structural: bool = False) -> object:
        """``cls`` by its standard-library name where it has one, else as a handle.
        ``structural``: named even by the candidate process (a class's bases, which the
        receiver only builds its mirror class from; see ``Decoder.structural``)."""
        name = external_name(cls, self.codec.names_callables or structural)
        return {"x": name} if name is not None else self.handle(cls)

    def items(self, mapping, d: int) -> list:
        return [[self.enc(k, d), self.enc(v, d)] for k, v in mapping.items()]

    def _exception(self, exc: BaseException, d: int) -> object:
        try:
            text = str(exc)
        except Exception:
            text = f"<unprintable {type(exc).__name__}>"
        attrs = {}
        for key, value in list(getattr(exc, "__dict__", {}).items())[:50]:
            if isinstance(key, str) and (not key.startswith("__") or key == "__notes__"):
                attrs[key] = value
        for key, value in _builtin_fields(exc) + _class_fields(exc, attrs):
            attrs.setdefault(key, value)
        cause = exc.__cause__ if d < 20 else None
        return {"X": [self.handle_or_name(type(exc)), self.enc(list(exc.args), d),
                      self.enc(attrs, d), text[:2000],
                      self.enc(cause, d) if isinstance(cause, BaseException) else None]}


# The builtin value an instance of a value class is (an exact ``int``/``float``/``str``: the
# builtin type's own conversion, never a method of the class).
_VALUE_OF = {"int": int.__int__, "float": float.__float__, "str": str.__str__}

_ZONEINFO = zoneinfo.ZoneInfo

_NOT_FIELDS = frozenset({"args", "message", "exceptions", "obj"})  # derived, or a whole object


def _builtin_fields(exc: BaseException) -> list:
    """The fields a builtin exception class keeps in C slots, not in ``__dict__`` nor always
    in ``args`` (``OSError.filename``/``errno``, ``ImportError.name``, ``SyntaxError.lineno``,
    ``AttributeError.name``...), read through the builtin class's own descriptor (a subclass's
    property of the same name is the subclass's business)."""
    fields = []
    for klass in type(exc).__mro__:
        if klass.__module__ != "builtins":
            continue
        for key, slot in vars(klass).items():
            if key.startswith("__") or key in _NOT_FIELDS or not isinstance(
                    slot, types.MemberDescriptorType | types.GetSetDescriptorType):
                continue
            try:
                value = slot.__get__(exc, klass)
            except Exception:  # an unset field (``characters_written``)
                continue
            if value is not None:  # None is unset (``OSError.filename2`` would show it)
                fields.append((key, value))
    return fields


def _class_fields(exc: BaseException, found: dict) -> list:
    """The public names an exception's own class (the candidate's, not the standard
    library's) gives it: class attributes (``code = 404``), properties, read here, and methods
    (which travel as handles), so that ``excinfo.value.code`` reads in the test what it reads
    in one process."""
    fields = []
    for klass in type(exc).__mro__:
        if is_stdlib_module(getattr(klass, "__module__", None)):
            continue
        for key in list(vars(klass))[:50]:
            if key.startswith("_") or key in found or len(fields) >= 50:
                continue
            try:
                fields.append((key, getattr(exc, key)))
            except Exception:  # a property that raises: absent, as its read would fail
                continue
    return fields


def _enc_clock(s: Encoder, x, d: int, kind: str) -> object:
    """A ``datetime``/``time``: naive ones as ISO text; with a time zone or a ``fold``, its
    fields, its ``tzinfo`` (a ``timezone``, or a ``zoneinfo.ZoneInfo`` by its key) and fold.
    Any other ``tzinfo`` (a class of the candidate's) is code: the value travels as a
    handle."""
    tz = x.tzinfo
    if tz is None and not x.fold:
        return {"dt": [kind, x.isoformat()]}
    if tz is not None and type(tz) is not datetime.timezone \
            and not (type(tz) is _ZONEINFO and isinstance(getattr(tz, "key", None), str)):
        return s.handle(x)
    fields = [x.hour, x.minute, x.second, x.microsecond]
    if kind == "datetime":
        fields = [x.year, x.month, x.day, *fields]
    return {"dz": [kind, fields, None if tz is None else s.enc(tz, d), x.fold]}


def _enc_timezone(s: Encoder, x, d: int) -> object:
    offset, *name = x.__getinitargs__()
    return {"tz": [offset.days, offset.seconds, offset.microseconds, *name]}


def _enc_zone(s: Encoder, x, d: int) -> object:
    key = getattr(x, "key", None)
    return {"zi": key} if isinstance(key, str) else s.handle(x)


def _enc_counter(s: Encoder, x, d: int):
    ref = s._container(x)
    return ref if ref is not None else {"C": s.items(x, d)}


def _enc_ordered(s: Encoder, x, d: int):
    ref = s._container(x)
    return ref if ref is not None else {"O": s.items(x, d)}


def _enc_default(s: Encoder, x, d: int):
    ref = s._container(x)
    if ref is not None:
        return ref
    factory = None if x.default_factory is None else s.enc(x.default_factory, d)
    return {"D": [factory, s.items(x, d)]}


def _enc_deque(s: Encoder, x, d: int):
    ref = s._container(x)
    return ref if ref is not None else {"Q": [[s.enc(i, d) for i in x], x.maxlen]}


_SPECIAL = {
    collections.Counter: _enc_counter,
    collections.OrderedDict: _enc_ordered,
    collections.defaultdict: _enc_default,
    collections.deque: _enc_deque,
    complex: lambda s, x, d: {"c": [x.real, x.imag]},
    range: lambda s, x, d: {"r": [s.enc(x.start, d), s.enc(x.stop, d), s.enc(x.step, d)]},
    slice: lambda s, x, d: {"sl": [s.enc(x.start, d), s.enc(x.stop, d), s.enc(x.step, d)]},
    type(Ellipsis): lambda s, x, d: {"E": 0},
    type(NotImplemented): lambda s, x, d: {"NI": 0},
    fractions.Fraction: lambda s, x, d: {"Fr": [s.enc(x.numerator, d), s.enc(x.denominator, d)]},
    decimal.Decimal: lambda s, x, d: {"De": str(x)},
    datetime.date: lambda s, x, d: {"dt": ["date", x.isoformat()]},
    datetime.datetime: lambda s, x, d: _enc_clock(s, x, d, "datetime"),
    datetime.time: lambda s, x, d: _enc_clock(s, x, d, "time"),
    datetime.timezone: _enc_timezone,
    zoneinfo.ZoneInfo: _enc_zone,
    datetime.timedelta: lambda s, x, d: {"td": [x.days, x.seconds, x.microseconds]},
    uuid.UUID: lambda s, x, d: {"uu": x.hex},
    re.Pattern: lambda s, x, d: {"rp": [s.enc(x.pattern, d), x.flags]},
    array.array: lambda s, x, d: {"ar": [x.typecode, base64.b64encode(x.tobytes()).decode()]},
    **{cls: (lambda s, x, d: {"ip": [type(x).__name__, str(x)]}) for cls in IP_TYPES},
}


def _enc_namespace(s: Encoder, x, d: int) -> object:
    ref = s._container(x)
    if ref is not None:
        return ref
    return {"sn": [[k, s.enc(v, d)] for k, v in vars(x).items() if type(k) is str]}


def _enc_chainmap(s: Encoder, x, d: int) -> object:
    if not all(type(m) in _PLAIN_MAPS for m in x.maps):
        return s.handle(x)
    ref = s._container(x)
    return ref if ref is not None else {"cm": [s.enc(m, d) for m in x.maps]}


_PLAIN_MAPS = (dict, collections.Counter, collections.OrderedDict, collections.defaultdict)

# Copies of mutable standard-library objects the candidate returns. The test's own travel to
# the candidate as handles, so that what the candidate changes in them is changed in the
# test's object, as in one process.
_FROM_CANDIDATE = {
    types.SimpleNamespace: _enc_namespace,
    collections.ChainMap: _enc_chainmap,
    types.MappingProxyType: lambda s, x, d: {"mp": s.items(x, d)},
}


_PYTEST_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig")


def is_pytest_object(obj: object) -> bool:
    """Whether ``obj`` is pytest's own (a fixture's value such as ``request``, ``capsys`` or
    ``monkeypatch``, a config, an item or node, a pytest function or class, a module):
    the test process never hands one to the candidate, so a candidate cannot reach the
    session that judges it."""
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
    elif isinstance(obj, type | types.FunctionType | types.BuiltinFunctionType
                    | types.MethodType):
        name = getattr(obj, "__module__", None)
    else:
        name = type(obj).__module__
    return isinstance(name, str) and name.split(".", 1)[0] in _PYTEST_PACKAGES
