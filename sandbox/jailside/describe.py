"""What an object of ours that travels by handle is, for the peer to build its proxy from
(``mirror``): a function (``f``), a class (``c``) or an instance (``o``), with what the proxy
needs to behave as the object does (names, signature, special methods, methods, bases, the
standard-library class it stands for, dataclass fields).

This runs on the owner's side, over the owner's own objects: in the candidate process, over
the candidate's. What it reports only shapes the peer's proxy; every call, attribute and
operation of the proxy still comes back here.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types

from .hints import encode_hints
from .shapes import content_base, is_namedtuple_class, namedtuple_meta, value_class
from .stdnames import external_name, is_stdlib_module

SPECIAL = (
    "__len__", "__iter__", "__next__", "__reversed__", "__contains__", "__getitem__",
    "__setitem__", "__delitem__", "__bool__", "__call__", "__enter__", "__exit__",
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__",
    "__rmul__", "__imul__", "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__",
    "__rfloordiv__", "__ifloordiv__", "__mod__", "__rmod__", "__imod__", "__pow__",
    "__rpow__", "__ipow__", "__matmul__", "__rmatmul__", "__and__", "__rand__", "__iand__",
    "__or__", "__ror__", "__ior__", "__xor__", "__rxor__", "__ixor__", "__lshift__",
    "__rlshift__", "__rshift__", "__rrshift__", "__neg__", "__pos__", "__abs__", "__invert__",
    "__int__", "__float__", "__complex__", "__index__", "__round__", "__length_hint__",
    "__fspath__", "__format__", "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__",
)
META_SPECIAL = ("__iter__", "__len__", "__contains__", "__getitem__", "__reversed__",
                "__bool__")  # of a class itself (an Enum's members), forwarded by its metaclass
MAX_METHODS = 500


def _defined(cls: type, name: str, base: type = object) -> bool:
    """``cls`` has its own ``name`` (not ``base``'s default)."""
    try:
        value = getattr(cls, name)
    except Exception:
        return False
    return value is not getattr(base, name, None)


def _signature(fn) -> list | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return [[p.name, int(p.kind), p.default is not inspect.Parameter.empty]
            for p in list(sig.parameters.values())[:100]]


def _methods(cls: type) -> list[str]:
    """Names a proxy instance should call as methods (not dunders, callables on the class)."""
    names: list[str] = []
    seen: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, value in list(vars(klass).items()):
            if name.startswith("__") or name in seen or len(names) >= MAX_METHODS:
                continue
            seen.add(name)  # the first class in the MRO that defines a name decides it
            # Only instance methods: a mirror class's method stands for ``callm`` on the
            # instance it is called on, so ``Account.joint("a", "b")`` (a classmethod or
            # staticmethod read from the class) would call it on "a". Those, and names a
            # subclass turned into plain attributes, are left to the attribute read
            # (``MirrorMeta.__getattr__``, ``Remote.__getattr__``), which returns the owner's
            # bound method or function, as in one process.
            if isinstance(value, staticmethod | classmethod | types.ClassMethodDescriptorType):
                continue
            if inspect.isfunction(value) or inspect.ismethoddescriptor(value):
                names.append(name)
    return names


def _attributes(cls: type) -> list[str]:
    """The class's other public names (class variables, properties, class and static
    methods): a mirror class holds a stand-in for each, so that ``monkeypatch`` and
    ``mock.patch``, which save ``cls.__dict__[name]`` and set it back, restore the owner's
    own attribute (see ``MirrorMeta.__setattr__``) instead of deleting it."""
    methods = set(_methods(cls))
    names: list[str] = []
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name in list(vars(klass)):
            if len(names) >= MAX_METHODS:
                return names
            if not name.startswith("__") and name not in methods and name not in names:
                names.append(name)
    return names


def _dataclass_fields(cls: type) -> list | None:
    """``[[name, init], ...]`` of a dataclass's fields, so that ``dataclasses.fields``,
    ``asdict``, ``astuple``, ``replace`` and ``is_dataclass`` work on its proxies."""
    if not isinstance(getattr(cls, "__dict__", {}).get("__dataclass_fields__"), dict) \
            and not any("__dataclass_fields__" in vars(k) for k in cls.__mro__):
        return None
    try:
        return [[f.name, bool(f.init)] for f in dataclasses.fields(cls)][:MAX_METHODS]
    except TypeError:
        return None


def describe(obj: object, state) -> tuple[str, dict]:
    """``(kind, meta)`` of an object of ours that travels by handle.

    The parts of ``meta`` that hold handles (``state`` encodes them) are encoded in the order
    ``mirror`` decodes them: a class's bases (``b``), then its annotations (``an``, last); a
    handle met again in the same value goes without its description (``Encoder.handle``),
    which the receiver must have decoded first."""
    if isinstance(obj, type):
        special = [n for n in SPECIAL if _defined(obj, n)]
        hash_kind = "none" if obj.__hash__ is None else (
            "own" if obj.__hash__ is not object.__hash__ else "default")
        nt = namedtuple_meta(obj) if _is_pure_namedtuple(obj) else None
        return "c", {"n": obj.__name__, "q": obj.__qualname__,
                     "m": str(getattr(obj, "__module__", "") or ""),
                     "b": [state.handle_or_name(b, structural=True)
                           for b in obj.__bases__[:20]],
                     "e": issubclass(obj, BaseException), "s": special, "h": hash_kind,
                     "mt": _methods(obj), "at": _attributes(obj), "nt": nt,
                     "r": _stdlib_type(obj), "df": _dataclass_fields(obj),
                     "ms": [n for n in META_SPECIAL if _defined(type(obj), n, type)],
                     "cg": _defined(obj, "__class_getitem__"), "v": _value_meta(obj, state),
                     "ca": _exception_constants(obj),
                     "cb": content_base(obj),
                     "an": None if nt is not None or issubclass(obj, BaseException)
                     else encode_hints(state, _own(obj, "__annotations__"))}
    if callable(obj) and not _has_instance_protocol(obj):
        return "f", {"n": str(getattr(obj, "__name__", type(obj).__name__)),
                     "q": str(getattr(obj, "__qualname__", type(obj).__name__)),
                     "m": str(getattr(obj, "__module__", "") or ""),
                     "d": (obj.__doc__ if isinstance(getattr(obj, "__doc__", None), str)
                           else None),
                     "sig": _signature(obj), "a": _bound_methods(obj),
                     "an": encode_hints(state, _own(obj, "__annotations__"))}
    return "o", {"c": state.handle(type(obj))}


def _exception_constants(cls: type) -> list | None:
    """``[[name, value], ...]`` of an exception class's own public constants (``code =
    404``), plain data only, so that its mirror class has them too (``NotFound.code``)."""
    if not issubclass(cls, BaseException):
        return None
    out = []
    for klass in cls.__mro__:
        if is_stdlib_module(getattr(klass, "__module__", None)):
            continue
        for name, value in list(vars(klass).items())[:50]:
            if not name.startswith("_") and type(value) in _CONSTANTS \
                    and name not in (n for n, _ in out):
                out.append([name, value])
    return out or None


_CONSTANTS = (int, float, str, bool, type(None))


def _value_meta(cls: type, state) -> dict | None:
    """What the peer builds its copy of a value class from (``shapes.value_class``), with the
    values in it (members' values, fields' defaults) encoded, each a value of its own."""
    if state.codec.value_kind(cls) is None:
        return None
    meta = dict(value_class(cls))
    if meta.get("em") is not None:
        meta["em"] = [[name, state.fork().enc(value, 0)] for name, value in meta["em"]]
    if meta.get("df") is not None:
        meta["df"] = [state.fork().enc(value, 0) for value in meta["df"]]
    return meta


def _own(obj: object, name: str) -> object:
    """``obj``'s own ``name`` (a class's from its ``__dict__``, not inherited: a mirror class
    has its bases' as the owner's class has), None where reading it fails."""
    try:
        if isinstance(obj, type):
            return type.__dict__["__dict__"].__get__(obj).get(name)
        return getattr(obj, name, None)
    except Exception:
        return None


def _stdlib_type(cls: type) -> list | None:
    """``[module, name]`` of a standard-library class (``generator``, ``map``,
    ``itertools.count``, ``io.StringIO``...) that the receiver has too, so its proxies answer
    ``isinstance`` as the real object would (the mirror class cannot subclass it)."""
    name = external_name(cls)
    if name is not None:
        return name
    if cls.__module__ == "builtins":  # generator, coroutine...: named only in ``types``
        for attr, value in vars(types).items():
            if value is cls and not attr.startswith("_"):
                return ["types", attr]
    if issubclass(cls, enum.Enum):  # the candidate's Enum: its members are ``Enum``s (so
        for base in cls.__mro__:    # pytest names a parameter by ``str(member)``)
            name = external_name(base) if base.__module__ == "enum" else None
            if name is not None:
                return name
    return None


def _bound_methods(fn) -> list[str]:
    """Public methods of a callable that is more than a plain function (``lru_cache``'s
    ``cache_info``/``cache_clear``), which its proxy forwards."""
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return []
    names = []
    for name in dir(type(fn))[:MAX_METHODS]:
        if not name.startswith("_"):
            try:
                value = getattr(fn, name)
            except Exception:
                continue
            if inspect.ismethod(value) or inspect.isbuiltin(value):
                names.append(name)
    return names


def _has_instance_protocol(obj: object) -> bool:
    """A callable object that is more than a function: an instance of a class of the
    candidate's with ``__call__`` (travels as an instance, so its attributes work too)."""
    cls = type(obj)
    return not (inspect.isroutine(obj) or external_name(cls) is not None
                or cls.__module__ in ("functools", "builtins"))


def _is_pure_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and is_namedtuple_class(cls)
