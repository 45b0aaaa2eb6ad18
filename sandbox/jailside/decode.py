"""Rebuilding one value from the data ``encode`` wrote (the format is ``codec``'s): fresh
objects of exactly the sent types, or ``ValueError``. Whatever a hostile peer writes, decoding
is a total, strict function bounded by the frame size and ``MAX_DEPTH``; every type is picked
here, by tag, from this module's own tables, and what comes from the candidate process is
checked to be well-formed data of that type (never taken for a type by a name it sends).

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

from . import proxies
from .hints import DECODERS as HINT_DECODERS
from .hints import decode_hints
from .shapes import (
    CONTENT_BASES,
    ENUM_KINDS,
    ENUM_MIXINS,
    FORWARDED,
    IP_TYPES,
    MAX_DEPTH,
    MAX_HANDLES,
    PATH_TYPES,
    VALUE_BASES,
    rebuild_set,
)
from .stdnames import claimable, inert, resolve_external


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
        self.outlined: list | None = None  # the pieces of a deep value (``Encoder.root``)

    def fork(self, hinting: bool) -> Decoder:
        """A decoder of a value of its own inside this one (see ``Encoder.fork``)."""
        sub = Decoder(self.codec, [])
        sub.hinting, sub.outlined = hinting, self.outlined
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
            for i in x:  # a loop, not a generator: no C stack per level of nesting
                out.append(self.dec(i, d))
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


def root(s: Decoder, data: object):
    """A whole value: its outlined pieces (``Encoder.root``) are taken here only."""
    if type(data) is dict and len(data) == 1 and "Z" in data:
        v = data["Z"]
        if type(v) is not list or len(v) != 2 or type(v[1]) is not list:
            raise ValueError("malformed value")
        s.outlined = [[False, piece] for piece in v[1]]
        return s.dec(v[0], 0)
    return s.dec(data, 0)


def _dec_piece(s: Decoder, v, d):
    pieces = s.outlined
    if pieces is None or type(v) is not int or not 0 <= v < len(pieces) or pieces[v][0]:
        raise ValueError("malformed piece of a value")
    pieces[v][0] = True  # each piece stands in one place
    return s.dec(pieces[v][1], d - 1)


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
    if type(v) is not str or len(v) > 4_000_000:  # hex: linear to read, whatever its size
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


def _dec_clock(s, v, d):
    """A ``datetime``/``time`` with its time zone and fold (``encode._enc_clock``)."""
    if type(v) is not list or len(v) != 4 or v[0] not in ("datetime", "time") \
            or type(v[1]) is not list or not all(type(i) is int for i in v[1]) \
            or v[3] not in (0, 1):
        raise ValueError("malformed datetime")
    tz = None if v[2] is None else s.dec(v[2], d)
    if tz is not None and type(tz) not in (datetime.timezone, zoneinfo.ZoneInfo):
        raise ValueError("malformed time zone")
    cls = datetime.datetime if v[0] == "datetime" else datetime.time
    return cls(*v[1], tzinfo=tz, fold=v[3])


def _dec_timezone(s, v, d):
    if type(v) is not list or len(v) not in (3, 4) or not all(type(i) is int for i in v[:3]) \
            or len(v) == 4 and (type(v[3]) is not str or len(v[3]) > 200):
        raise ValueError("malformed timezone")
    offset = datetime.timedelta(v[0], v[1], v[2])
    return datetime.timezone(offset, *v[3:])


def _dec_zone(s, v, d):
    """A ``zoneinfo.ZoneInfo`` by its key: the receiver's own (``ZoneInfo`` caches one per
    key, so it is the test's ``ZoneInfo(key)``)."""
    if type(v) is not str or not 0 < len(v) < 256:
        raise ValueError("malformed zone key")
    try:
        return zoneinfo.ZoneInfo(v)
    except (ValueError, KeyError, OSError) as exc:
        raise ValueError(f"the time zone zoneinfo.ZoneInfo({v!r}) is not available here: "
                         f"{type(exc).__name__}") from None


def _dec_namespace(s: Decoder, v, d):
    out = types.SimpleNamespace()
    s._new(out)
    for key, value in s.pairs(v, d):
        if type(key) is not str or key.startswith("__"):
            raise ValueError("malformed namespace")
        setattr(out, key, value)
    return out


def _dec_chainmap(s: Decoder, v, d):
    out = collections.ChainMap()
    s._new(out)
    maps = s.seq(v, d)
    if not maps or not all(type(m) in (dict, collections.Counter, collections.OrderedDict,
                                       collections.defaultdict) for m in maps):
        raise ValueError("malformed ChainMap")
    out.maps[:] = maps
    return out


def _dec_array(s, v, d):
    if type(v) is not list or len(v) != 2 or v[0] not in array.typecodes \
            or type(v[1]) is not str:
        raise ValueError("malformed array")
    out = array.array(v[0])
    out.frombytes(base64.b64decode(v[1].encode(), validate=True))
    return out


def _dec_ip(s, v, d):
    name, text = v
    cls = {c.__name__: c for c in IP_TYPES}[name]
    if type(text) is not str or len(text) > 100:
        raise ValueError("malformed address")
    return cls(text)


def _dec_structseq(s: Decoder, v, d):
    """A standard-library record, built by the receiver's own class from its fields."""
    if type(v) is not list or len(v) != 3 or type(v[0]) is not list or len(v[0]) != 2:
        raise ValueError("malformed record")
    cls = resolve_external(*v[0])
    if not (isinstance(cls, type) and issubclass(cls, tuple)
            and hasattr(cls, "n_sequence_fields")):
        raise ValueError(f"{v[0]} is no record type")
    fields, named = s.dec(v[1], d), s.dec(v[2], d)
    if type(fields) is not tuple or type(named) is not dict:
        raise ValueError("malformed record")
    try:
        return cls(fields, named)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed {cls.__name__}: {exc}") from None


def _dec_pattern(s: Decoder, v, d):
    if type(v) is not list or len(v) != 2 or type(v[1]) is not int:
        raise ValueError("malformed pattern")
    source = s.dec(v[0], d)
    if type(source) not in (str, bytes):
        raise ValueError("malformed pattern")
    try:
        return re.compile(source, v[1])
    except (re.error, ValueError, TypeError) as exc:
        raise ValueError(f"malformed pattern: {exc}") from None


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
    if s.codec.trusts_peer:
        return obj
    if s.structural and isinstance(obj, type):  # a class's base: shapes its mirror only
        return obj
    if not inert(obj):
        raise ValueError(f"{v[0]}.{v[1]} named by the candidate process (only modules, "
                         "exception classes and typing's forms are taken by name from it)")
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
        if proxy is None and v[1] == "c" and not codec.trusts_peer and type(meta) is dict \
                and meta.get("v") is not None:
            proxy = _value_class(s, meta, d)
            codec.adopt(v[0], proxy, meta["v"]["k"])
        elif proxy is None:
            proxy = codec.proxies[v[0]] = codec.make_proxy(v[0], v[1], meta, s, d)
            if v[1] == "c" and type(meta) is dict:
                _exception_constants(proxy, meta.get("ca"))
                if not codec.trusts_peer:
                    _compare_by_content(codec, proxy, meta.get("cb"))
        elif meta is not None and codec.revisit is not None:
            codec.revisit(proxy, v[1], meta, s, d)
    finally:
        s.structural, s.hinting = outer
    return proxy


def _value_class(s: Decoder, meta: dict, d: int) -> type:
    """The test process's own copy of a candidate's value class (``shapes.value_class``): a
    subclass of the builtin type, or an ``Enum`` of the members' values, built here from
    data; its methods, properties and ``fw`` special methods go back to the owner. Its bases
    and annotations are decoded as a mirror class's are (the handles first described there
    must exist here)."""
    name, qualname, module, vm = meta.get("n"), meta.get("q"), meta.get("m"), meta["v"]
    if not (all(isinstance(x, str) and x for x in (name, qualname, module))
            and name.isidentifier() and type(vm) is dict and vm.get("k") in (*VALUE_BASES, "enum")):
        raise ValueError("malformed value class")
    outer, s.structural = s.structural, True
    try:
        for base in meta.get("b") or []:
            s.dec(base, d)
    finally:
        s.structural = outer
    namespace = _owner_names(vm)
    namespace.update({"__module__": module, "__qualname__": qualname})
    try:
        if vm["k"] == "enum":
            cls = _enum_class(s, name, module, qualname, vm, namespace, d)
        else:
            cls = _builtin_subclass(s, name, vm, namespace, d)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"malformed value class {name}: {exc}") from None
    hints = decode_hints(s, meta.get("an"), d)
    if hints is not None:
        type.__setattr__(cls, "__annotations__", hints)
    return cls


def _owner_names(vm: dict) -> dict:
    """Stand-ins for what the owner's class runs: methods, other attributes (properties,
    class variables), and the special methods of ``shapes.FORWARDED`` (never a comparison or
    ``hash``: those are the builtin type's own)."""
    peer, out = proxies.PEER, {}
    for key, make in (("mt", lambda n: proxies.method_forwarder(peer, n)),
                      ("at", proxies.Attribute),
                      ("fw", lambda n: proxies.forwarder(peer, None, n))):
        names = vm.get(key) if type(vm.get(key)) is list else []
        for n in names[:500]:
            if not (isinstance(n, str) and n.isidentifier()) or n in out:
                continue
            dunder = n.startswith("__") and n.endswith("__")
            if dunder == (key == "fw") and (not dunder or n in FORWARDED):
                out[n] = make(n)
    return out


def _constructed_by_owner(cls, *args, **kwargs):
    """``MyInt(5)`` in the test: the owner's class constructs (its ``__new__``/``__init__``)."""
    return proxies.PEER.request("call", cls, args, kwargs)


def _builtin_subclass(s: Decoder, name: str, vm: dict, namespace: dict, d: int) -> type:
    base = VALUE_BASES[vm["k"]]
    fields = vm.get("f")
    if fields is None:
        namespace["__new__"] = _constructed_by_owner
        return type(name, (base,), namespace)
    if base is not tuple or type(fields) is not list or type(vm.get("df")) is not list:
        raise ValueError("fields")
    defaults = [s.fork(hinting=False).dec(x, d) for x in vm["df"]]
    # A namedtuple of these fields, built here: its construction, ``_replace``, ``_asdict``
    # are ``collections``' own code, the same as the owner's.
    plain = collections.namedtuple(name, fields, defaults=defaults or None)
    body = {k: v for k, v in vars(plain).items() if k not in ("__dict__", "__weakref__")}
    body.update(namespace)
    return type(name, (tuple,), body)


def _enum_class(s: Decoder, name, module, qualname, vm: dict, namespace: dict, d: int) -> type:
    kind, mixin = ENUM_KINDS[vm["ek"]], ENUM_MIXINS[vm["mx"]]
    members = vm.get("em")
    if type(members) is not list or not members:
        raise ValueError("members")
    pairs = []
    for entry in members[:10_000]:
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not str \
                or not entry[0].isidentifier() or entry[0].startswith("_"):
            raise ValueError("member")
        pairs.append((entry[0], s.fork(hinting=False).dec(entry[1], d)))
    extra = {} if mixin is None or kind not in (enum.Enum, enum.Flag) else {"type": mixin}
    cls = kind(name, pairs, module=module, qualname=qualname, **extra)
    for key, value in namespace.items():
        if key not in ("__module__", "__qualname__") and key not in cls._member_map_:
            type.__setattr__(cls, key, value)
    return cls


def _exception_constants(cls: object, constants: object) -> None:
    """An exception class's public constants (``describe._exception_constants``) on its
    mirror: plain data, never over a name the class has here (its bases' methods)."""
    if type(constants) is not list or not (isinstance(cls, type)
                                          and issubclass(cls, BaseException)):
        return
    for entry in constants[:50]:
        if type(entry) is list and len(entry) == 2 and type(entry[0]) is str \
                and entry[0].isidentifier() and not entry[0].startswith("_") \
                and type(entry[1]) in (int, float, str, bool, type(None)) \
                and not hasattr(cls, entry[0]):
            type.__setattr__(cls, entry[0], entry[1])


def _compare_by_content(codec, cls: type, kind: object) -> None:
    """A mirror class of the candidate's ``list``/``dict``/``set`` subclass (``shapes.
    content_base``) compares with a value of that type by its content: the owner's plain
    ``list(obj)``/``dict(obj)``/``set(obj)`` of it, a value, compared here with the builtin
    type's own ``==``."""
    base = CONTENT_BASES.get(kind) if type(kind) is str else None
    if base is None or not isinstance(cls, type):
        return
    original = cls.__dict__.get("__eq__")

    def __eq__(self, other):
        if codec.peer_ref_of(other) is None and isinstance(other, base):
            return proxies.PEER.request("call", base, (self,), {}) == other
        return original(self, other) if original is not None else NotImplemented

    def __ne__(self, other):
        result = __eq__(self, other)
        return result if result is NotImplemented else not result

    type.__setattr__(cls, "__eq__", __eq__)
    type.__setattr__(cls, "__ne__", __ne__)


def _dec_value(s: Decoder, v, d):
    """An instance of a value class: the class (the receiver's copy, or in the candidate
    process its own class sent back), and the builtin value it is."""
    if type(v) is not list or len(v) != 3:
        raise ValueError("malformed value")
    cls = s.dec(v[0], d)
    kind = s.codec.value_kind(cls) if isinstance(cls, type) else None
    if kind is None:
        raise ValueError("malformed value: not a value class")
    if kind == "enum":
        return _enum_member(s, cls, v[1], d)
    payload = s.dec(v[1], d)
    base = VALUE_BASES[kind]
    if type(payload) is not base:
        raise ValueError(f"malformed {cls.__name__} value")
    fields = getattr(cls, "_fields", None)
    if base is tuple and type(fields) is tuple and len(fields) != len(payload):
        raise ValueError(f"malformed {cls.__name__} value")
    obj = base.__new__(cls, payload)
    attrs = s.dec(v[2], d) if v[2] is not None else None
    if type(attrs) is dict and hasattr(obj, "__dict__"):
        obj.__dict__.update((k, x) for k, x in attrs.items()
                            if type(k) is str and not k.startswith("__"))
    return obj


def _enum_member(s: Decoder, cls: type, v, d):
    if type(v) is not list or len(v) != 2 or v[0] not in ("n", "v"):
        raise ValueError("malformed enum member")
    if v[0] == "n":
        member = cls._member_map_.get(v[1]) if type(v[1]) is str else None
        if member is None:
            raise ValueError(f"malformed {cls.__name__} member")
        return member
    try:
        return cls(s.dec(v[1], d))
    except (ValueError, TypeError):
        raise ValueError(f"malformed {cls.__name__} member") from None


def _dec_stdlib_member(s: Decoder, v, d):
    """A member of a standard-library ``Enum``, looked up in the receiver's own class (by
    name, or a ``Flag``'s combination by its ``int`` value)."""
    if type(v) is not list or len(v) != 3 or type(v[0]) is not list or len(v[0]) != 2:
        raise ValueError("malformed enum member")
    cls = resolve_external(*v[0])
    if not isinstance(cls, enum.EnumType):
        raise ValueError(f"{v[0]} is no Enum")
    if v[1] == "n" and type(v[2]) is str and v[2] in cls._member_map_:
        return cls._member_map_[v[2]]
    if v[1] == "v" and type(v[2]) is int and issubclass(cls, enum.Flag):
        try:
            return cls(v[2])
        except ValueError:
            pass
    raise ValueError(f"malformed {cls.__name__} member")


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
        # Never over a method of the class here (``with_traceback``, ``add_note``): the
        # peer's attributes are data, and the class's methods stay this process's own.
        if isinstance(key, str) and not callable(getattr(cls, key, None)) \
                and (not key.startswith("__") or key == "__notes__" and type(value) is list):
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
    "dz": _dec_scalar("datetime", _dec_clock),
    "tz": _dec_scalar("timezone", _dec_timezone),
    "zi": _dec_zone,
    "uu": _dec_scalar("UUID", lambda s, v, d: uuid.UUID(hex=v) if type(v) is str
                      and len(v) == 32 else uuid.UUID("x")),
    "ar": _dec_scalar("array", _dec_array),
    "ip": _dec_scalar("address", _dec_ip),
    "sn": _dec_namespace,
    "ss": _dec_structseq,
    "rp": _dec_pattern,
    "cm": _dec_chainmap,
    "mp": _dec_scalar("mappingproxy", lambda s, v, d: types.MappingProxyType(
        s.mapping({}, v, d))),
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
    "V": _dec_value,
    "z": _dec_piece,
    "em": _dec_stdlib_member,
    **HINT_DECODERS,
}
