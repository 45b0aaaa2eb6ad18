"""The proxies' own classes: ``MirrorMeta`` (the type of every mirror class) and ``Remote``
(the base of every mirror class), and the stand-ins a mirror class holds for its owner's
methods, attributes and special methods. Each forwards to the session's endpoint (``PEER``):
what a proxy does is done by the owner (see ``mirror`` for the behaviour as a whole).

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import inspect

COMPARISONS = frozenset({"__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"})
PEER = None  # the endpoint of this process's one session (set by ``rpc.Endpoint``)


def _peer_of(_obj):
    if PEER is None:
        raise RuntimeError("a proxy outside its session")
    return PEER


class MirrorMeta(type):
    """The type of every mirror class: construction, class attributes and ``repr`` go to the
    owner."""

    def __call__(cls, *args, **kwargs):
        return _peer_of(cls).request("call", cls, args, kwargs)

    def __getattr__(cls, name: str):
        if name.startswith("__") and name.endswith("__") and name != "__members__":
            raise AttributeError(name)  # Python's own probes (__set_name__...): not the peer's
        return _peer_of(cls).request("get", cls, name)

    def __setattr__(cls, name: str, value) -> None:
        # ``monkeypatch``/``mock.patch`` undo a patch by setting back what they read from
        # ``cls.__dict__``: our stand-in, which means "the owner's own attribute again".
        if _standin(value) == name and type.__getattribute__(cls, "__dict__").get(name) \
                is value:
            _peer_of(cls).request("restore", cls, name)
        else:
            _peer_of(cls).request("set", cls, name, value)

    def __delattr__(cls, name: str) -> None:
        _peer_of(cls).request("del", cls, name)

    def __repr__(cls) -> str:
        return f"<class '{cls.__module__}.{cls.__qualname__}'>"


class Remote(metaclass=MirrorMeta):
    """Base of every mirror class: attribute access and ``repr``/``str`` go to the owner."""

    __slots__ = ()

    def __getattr__(self, name: str):
        return _peer_of(self).request("get", self, name)

    def __setattr__(self, name: str, value) -> None:
        # Undoing a patch of an instance's method sets back the bound stand-in it read.
        if inspect.ismethod(value) and value.__self__ is self \
                and _standin(value.__func__) == name:
            _peer_of(self).request("restore", self, name)
        else:
            _peer_of(self).request("set", self, name, value)

    def __delattr__(self, name: str) -> None:
        _peer_of(self).request("del", self, name)

    def __copy__(self):
        return _peer_of(self).request("op", "__copy__", self, ())

    def __deepcopy__(self, memo=None):
        return _peer_of(self).request("op", "__deepcopy__", self, ())

    def __repr__(self) -> str:
        return _peer_of(self).request("op", "__repr__", self, ())

    def __str__(self) -> str:
        return _peer_of(self).request("op", "__str__", self, ())


class Attribute:
    """Stands for an owner's class attribute that is not an instance method (a class
    variable, a property, a class or static method): read from the owner, on the instance or
    the class it is read from."""

    __slots__ = ("_judge_standin",)

    def __init__(self, name: str):
        self._judge_standin = name

    def __get__(self, obj, owner=None):
        return _peer_of(obj).request("get", owner if obj is None else obj, self._judge_standin)


def _standin(value) -> str | None:
    """The name a mirror's stand-in (``Attribute`` or method forwarder) stands for."""
    if isinstance(value, Attribute) or inspect.isfunction(value):
        name = getattr(value, "_judge_standin", None)
        return name if isinstance(name, str) else None
    return None


def forwarder(peer, mirrors, dunder: str):
    strict = dunder in COMPARISONS and getattr(peer, "strict", False)

    def forward(self, *args):
        if strict and mirrors.ref_of(args[0]) is None:
            return NotImplemented
        return peer.request("op", dunder, self, args)

    forward.__name__ = dunder
    return forward


def caller(peer):
    def __call__(self, *args, **kwargs):
        return peer.request("call", self, args, kwargs)

    return __call__


def method_forwarder(peer, name: str):
    def method(self, *args, **kwargs):
        return peer.request("callm", self, name, args, kwargs)

    method.__name__ = name
    method._judge_standin = name
    return method


def bound_method(request, handle: list, name: str):
    def method(*args, **kwargs):
        return request("callm", handle[0], name, args, kwargs)

    method.__name__ = name
    return method


class _DefaultType:
    """Stands for a default value that stays on the owner's side."""

    def __repr__(self) -> str:
        return "<default>"


DEFAULT = _DefaultType()


def exception_str(self) -> str:
    text = self.__dict__.get("__judge_str__")
    return text if isinstance(text, str) else BaseException.__str__(self)
