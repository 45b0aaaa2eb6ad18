"""Proxies of a peer's objects: functions, classes and instances that live in the other process.

``describe.describe`` (the owner's side) says what an object that travels by handle is: a
function (``f``), a class (``c``) or an instance (``o``). ``Mirrors.make_proxy`` (the
receiver's side, this module) builds the local stand-in, from the classes of ``proxies``:

- a function becomes a real Python function of the same name, qualname, module, docstring and
  signature whose calls go to the owner (so pytest collects a candidate's ``test_*`` function
  exactly as it would collect the real one);
- a class becomes a *mirror class*: a real class, with the same name and the mirrors of its
  bases, whose instances are the proxies of the owner's instances, so ``type(p) is Point`` and
  ``isinstance(p, Shape)`` hold as in one process. Calling it constructs on the owner's side;
  reading, setting or deleting an attribute, calling a method and every special method the
  owner's class defines (``len``, ``iter``, ``next``, ``in``, ``[]``, arithmetic, ``hash``,
  ``bool``, ``repr``...) are forwarded;
- an exception class becomes a real local exception class with the mirrors of its bases (so
  ``raise``, ``except`` and ``pytest.raises`` work); its instances are local copies (``codec``).

The standard library and pytest see a proxy as they would see the object: the mirror of a
standard-library class (a generator, ``map``, ``itertools.count``) or of an ``Enum`` answers
``isinstance`` with the real class (through ``__class__``; never a value type); a dataclass's
mirror has its fields (``dataclasses.asdict``, ``replace``...); an ``Enum`` class iterates,
counts and indexes its members (its metaclass's special methods are forwarded); ``copy`` and
``deepcopy`` copy on the owner's side; ``Box[int]`` of a ``Generic`` class is the owner's
alias; an ``lru_cache`` function keeps ``cache_info``/``cache_clear``. Every attribute name of
the owner's class has a stand-in on its mirror, so ``monkeypatch`` and ``mock.patch``, which
save ``cls.__dict__[name]`` and set it back, undo a patch by restoring the owner's own
attribute (the ``restore`` request, see ``ops``).

One rule differs from a single process, on purpose: a proxy compares (``==``, ``!=``, ``<``,
``<=``, ``>``, ``>=``) only with proxies of the same owner, through the owner's operator. Against
anything else it returns ``NotImplemented``, so Python falls back to identity: a candidate's
object never sees a test's expected value to agree with it (the "always equal" hack), and
comparing two candidate objects (dataclasses, say) is exactly as in one process.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types

from .describe import MAX_METHODS, META_SPECIAL, SPECIAL
from .hints import decode_hints
from .layout import MODULE
from .proxies import (
    DEFAULT,
    Attribute,
    MirrorMeta,
    Remote,
    bound_method,
    caller,
    exception_str,
    forwarder,
    method_forwarder,
    readahead_forwarder,
)
from .shapes import namedtuple_class
from .stdnames import resolve_external


class _SolutionGlobals(dict):
    """The globals of the proxies of the candidate's functions, where ``typing`` evaluates
    their string annotations (``from __future__ import annotations``): a name is looked up in
    the ``solution`` module of this process (the candidate's names, as the test sees them).
    Empty itself: the proxy's own code reads no global."""

    def __missing__(self, name: str):
        module = sys.modules.get(MODULE)
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict) or name not in names:
            raise KeyError(name)
        return names[name]


SOLUTION_GLOBALS = _SolutionGlobals()
_NOT_CLAIMED = (bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set,
                frozenset, range, slice, type(None), BaseException, type, types.FunctionType,
                types.MethodType, types.BuiltinFunctionType, staticmethod, classmethod,
                property)  # a value's type, or a kind of callable pytest collects


class Mirrors:
    """The receiving side's proxies of its peer (see the module docstring).

    ``peer`` is the endpoint: ``peer.request(op, *parts)`` forwards; ``peer.strict`` says
    whether comparisons with non-proxies are refused (the test side: yes)."""

    def __init__(self, peer):
        self.peer = peer
        self.ids: dict[int, int] = {}  # id(proxy) -> the owner's ref

    def ref_of(self, obj: object) -> int | None:
        ref = self.ids.get(id(obj))
        if ref is not None and self.peer.codec.proxies.get(ref) is obj:
            return ref
        return None

    def make_proxy(self, ref: int, kind: str, meta, state, depth: int):
        if type(meta) is not dict:
            raise ValueError("malformed handle")
        if kind == "f":
            proxy = self._function(ref, meta, state, depth)
        elif kind == "c":
            proxy = self._class(ref, meta, state, depth)
        elif kind == "o":
            cls = state.dec(meta.get("c"), depth)
            if not isinstance(cls, MirrorMeta) or self.ref_of(cls) is None:
                raise ValueError("malformed instance handle")
            proxy = object.__new__(cls)
        else:
            raise ValueError(f"unknown handle kind {kind!r}")
        self.ids[id(proxy)] = ref
        return proxy

    def revisit(self, proxy, kind: str, meta, state, depth: int) -> None:
        """The description of ``proxy``'s owner, sent again: decoded all the same, in
        ``make_proxy``'s order, so that the handles first described in it (a class its
        annotations name, added since) exist here; of the rest only the annotations are
        taken (the owner may have changed them), the others were fixed when it was built."""
        if type(meta) is not dict:
            raise ValueError("malformed handle")
        if kind == "c" and type(meta.get("b")) is list:
            outer, state.structural = state.structural, True
            try:
                for base in meta["b"]:
                    state.dec(base, depth)
            finally:
                state.structural = outer
        if kind in ("c", "f"):
            hints = decode_hints(state, meta.get("an"), depth)
            if hints is not None and isinstance(proxy, MirrorMeta):
                type.__setattr__(proxy, "__annotations__", hints)
            elif hints is not None and isinstance(proxy, types.FunctionType):
                proxy.__annotations__ = hints
        elif kind == "o":
            state.dec(meta.get("c"), depth)

    def _function(self, ref: int, meta: dict, state, depth: int):
        request = self.peer.request
        handle: list = []

        def proxy(*args, **kwargs):
            return request("call", handle[0], args, kwargs)

        if meta.get("m") == MODULE:  # the candidate's: its globals are the candidate's names
            proxy = types.FunctionType(proxy.__code__, SOLUTION_GLOBALS, proxy.__name__, None,
                                       proxy.__closure__)
        handle.append(proxy)
        methods = meta.get("a") if type(meta.get("a")) is list else []
        for method in methods[:MAX_METHODS]:
            if isinstance(method, str) and method.isidentifier() \
                    and not method.startswith("_"):
                setattr(proxy, method, bound_method(request, handle, method))
        _name(proxy, meta)
        doc = meta.get("d")
        proxy.__doc__ = doc if isinstance(doc, str) else None
        hints = decode_hints(state, meta.get("an"), depth)
        if hints is not None:
            proxy.__annotations__ = hints
        signature = _make_signature(meta.get("sig"), hints or {})
        if signature is not None:
            proxy.__signature__ = signature
        return proxy

    def _class(self, ref: int, meta: dict, state, depth: int) -> type:
        name, qualname, module = meta.get("n"), meta.get("q"), meta.get("m")
        if not all(isinstance(x, str) and x for x in (name, qualname, module)):
            raise ValueError("malformed class handle")
        if not name.isidentifier():
            raise ValueError("malformed class name")
        bases_data = meta.get("b")
        if type(bases_data) is not list:
            raise ValueError("malformed class bases")
        outer, state.structural = state.structural, True
        try:
            bases = [state.dec(b, depth) for b in bases_data]
        finally:
            state.structural = outer
        if not all(isinstance(b, type) for b in bases):
            raise ValueError("malformed class bases")
        nt = meta.get("nt")
        if nt is not None:
            if type(nt) is not list or len(nt) != 2 or not all(type(f) is str for f in nt[0]):
                raise ValueError("malformed namedtuple handle")
            return namedtuple_class(name, qualname, module, nt[0], list(nt[1]))
        if meta.get("e") is True:
            return self._exception_class(name, qualname, module, bases)
        hints = decode_hints(state, meta.get("an"), depth)  # after the bases (``describe``)
        return self._mirror_class(name, qualname, module, bases, meta, hints)

    def _exception_class(self, name, qualname, module, bases) -> type:
        real = tuple(b for b in bases if issubclass(b, BaseException)) or (Exception,)
        try:
            cls = type(name, real, {"__module__": module, "__qualname__": qualname,
                                    "__judge_mirror__": True, "__str__": exception_str})
        except TypeError:  # bases that cannot be combined: the nearest one stands in
            cls = type(name, real[:1], {"__module__": module, "__qualname__": qualname,
                                        "__judge_mirror__": True, "__str__": exception_str})
        return cls

    def _mirror_class(self, name, qualname, module, bases, meta, hints) -> type:
        peer, mirrors = self.peer, self
        own = tuple(b for b in bases if mirrors.ref_of(b) is not None
                    and isinstance(b, MirrorMeta)) or (Remote,)
        namespace: dict = {"__module__": module, "__qualname__": qualname, "__slots__": ()}
        special = meta.get("s") if type(meta.get("s")) is list else []
        for dunder in special:
            if dunder == "__call__":
                namespace[dunder] = caller(peer)
            elif dunder in SPECIAL:
                namespace[dunder] = forwarder(peer, mirrors, dunder)
        hash_kind = meta.get("h")
        if hash_kind == "none":
            namespace["__hash__"] = None
        elif hash_kind == "own":
            namespace["__hash__"] = forwarder(peer, mirrors, "__hash__")
        else:
            namespace["__hash__"] = object.__hash__
        methods = meta.get("mt") if type(meta.get("mt")) is list else []
        for method in methods[:MAX_METHODS]:
            if isinstance(method, str) and method.isidentifier() and method not in namespace:
                namespace[method] = method_forwarder(peer, method)
        attributes = meta.get("at") if type(meta.get("at")) is list else []
        for attr in attributes[:MAX_METHODS]:
            if isinstance(attr, str) and attr.isidentifier() and not attr.startswith("__") \
                    and attr not in namespace:
                namespace[attr] = Attribute(attr)
        real = _local_type(meta.get("r"))
        if real is not None:  # isinstance() reads ``__class__`` when the type does not match
            namespace["__class__"] = property(lambda self: real)
            if "__next__" in namespace:  # a generator, ``map``...: no code of the candidate's
                namespace["__next__"] = readahead_forwarder(peer)
        if meta.get("cg") is True:  # ``Box[int]`` of a ``Generic`` class: the owner's alias
            namespace["__class_getitem__"] = classmethod(
                lambda cls, item: peer.request("callm", cls, "__class_getitem__", (item,), {}))
        fields = _local_fields(meta.get("df"), _inherited_hints(own, hints))
        if fields is not None:
            namespace["__dataclass_fields__"] = fields
        if hints is not None:  # ``typing.get_type_hints`` reads each class's own
            namespace["__annotations__"] = hints
        kind = _metaclass(peer, own, meta.get("ms"))
        try:
            return kind(name, own, namespace)
        except TypeError:  # an MRO the mirrors cannot form: one base stands in
            return MirrorMeta(name, own[:1], namespace)


def _inherited_hints(bases: tuple, own: dict | None) -> dict:
    """A class's annotations with its bases' (a dataclass's fields include its bases')."""
    hints: dict = {}
    for base in reversed(bases):
        for klass in reversed(base.__mro__):
            found = klass.__dict__.get("__annotations__")
            if isinstance(found, dict):
                hints.update(found)
    hints.update(own or {})
    return hints


def _local_fields(data, hints: dict) -> dict | None:
    """The ``__dataclass_fields__`` of a mirror class: local ``Field``s of the owner's names
    and annotations (their values are read from the owner, as any attribute)."""
    if type(data) is not list:
        return None
    fields = {}
    for entry in data[:MAX_METHODS]:
        if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not str \
                or type(entry[1]) is not bool:
            return None
        f = dataclasses.field(init=entry[1])
        f.name, f.type = entry[0], hints.get(entry[0])
        f._field_type = dataclasses._FIELD  # a regular field (not a ClassVar or an InitVar)
        fields[entry[0]] = f
    return fields


_METACLASSES: dict[tuple, type] = {}


def _metaclass(peer, bases: tuple, specials) -> type:
    """``MirrorMeta``, or a subclass of it forwarding the special methods the owner's
    metaclass defines (``list(Color)``, ``len(Color)``, ``Color["RED"]`` of an ``Enum``)."""
    base = MirrorMeta
    for b in bases:  # the most derived metaclass of the bases, as Python would pick it
        if issubclass(type(b), base):
            base = type(b)
    wanted = tuple(n for n in specials if n in META_SPECIAL) if type(specials) is list else ()
    if not wanted:
        return base
    key = (base, wanted)
    if key not in _METACLASSES:
        namespace = {n: forwarder(peer, None, n) for n in wanted}
        _METACLASSES[key] = type(base)("MirrorMeta", (base,), namespace)
    return _METACLASSES[key]


def _local_type(name) -> type | None:
    """The receiver's own standard-library class that a mirror class stands for."""
    if type(name) is not list or len(name) != 2:
        return None
    try:
        real = resolve_external(*name)
    except ValueError:
        return None
    # Never a type the codec sends by value (nor an exception, a metaclass or a function):
    # a legitimate instance of those never travels as an instance handle, so a proxy
    # claiming one is not believed.
    if not isinstance(real, type) or real is object or issubclass(real, _NOT_CLAIMED):
        return None
    return real


def _name(fn, meta: dict) -> None:
    for attr, key in (("__name__", "n"), ("__qualname__", "q"), ("__module__", "m")):
        value = meta.get(key)
        if isinstance(value, str):
            setattr(fn, attr, value)


def _make_signature(data, hints: dict) -> inspect.Signature | None:
    if type(data) is not list:
        return None
    empty = inspect.Parameter.empty
    try:
        params = [inspect.Parameter(n, inspect._ParameterKind(k),
                                    default=DEFAULT if d else empty,
                                    annotation=hints.get(n, empty))
                  for n, k, d in data]
        return inspect.Signature(params, return_annotation=hints.get("return", empty))
    except (TypeError, ValueError):
        return None
