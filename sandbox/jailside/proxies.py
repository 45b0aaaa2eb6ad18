"""The proxies' own classes: ``MirrorMeta`` (the type of every mirror class) and ``Remote``
(the base of every mirror class), and the stand-ins a mirror class holds for its owner's
methods, attributes and special methods. Each forwards to the session's endpoint (``PEER``):
what a proxy does is done by the owner (see ``mirror`` for the behaviour as a whole).

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import inspect

from .describe import SPECIAL

COMPARISONS = frozenset({"__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"})
# Arithmetic operators of a candidate's object: in the test process, never given a value of
# the test's. Were it given one, the object could answer whatever that value needs:
# ``abs(area(2) - 12.566) < 1e-3`` holds for an object whose ``__sub__`` returns 0, whatever
# the expected value. (``in`` is left to the candidate's containers, as data structures are
# what a test asks about: a candidate's own ``__contains__`` answers for itself.)
OPERANDS = frozenset(
    f"__{p}{name}__" for name in ("add", "sub", "mul", "truediv", "floordiv", "mod",
                                  "divmod", "pow", "matmul", "and", "or", "xor", "lshift",
                                  "rshift")
    for p in ("", "r", "i"))
PEER = None  # the endpoint of this process's one session (set by ``rpc.Endpoint``)


def _peer_of(_obj):
    if PEER is None:
        raise RuntimeError("a proxy outside its session")
    return PEER


class MirrorMeta(type):
    """The type of every mirror class: construction, class attributes and ``repr`` go to the
    owner."""

    def __call__(cls, *args, **kwargs):
        if not _owned(cls):
            _no_subclass(cls)
        return _peer_of(cls).request("call", cls, args, kwargs)

    def __getattr__(cls, name: str):
        if name == "__dataclass_params__" and "__dataclass_fields__" in cls.__dict__:
            raise TypeError(f"a dataclass of the test cannot derive from the candidate's "
                            f"dataclass {cls.__qualname__}, which lives in the candidate "
                            f"process")
        if name.startswith("__") and name.endswith("__") and name != "__members__":
            raise AttributeError(name)  # Python's own probes (__set_name__...): not the peer's
        if not _owned(cls):  # a test's own subclass: what its bases lack, it lacks
            raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")
        return _peer_of(cls).request("get", cls, name)

    def __setattr__(cls, name: str, value) -> None:
        if not _owned(cls):  # a test's own subclass (``dataclass`` on it sets its fields)
            type.__setattr__(cls, name, value)
            return
        # ``monkeypatch``/``mock.patch`` undo a patch by setting back what they read from
        # ``cls.__dict__``: our stand-in, which means "the owner's own attribute again".
        if _standin(value) == name and type.__getattribute__(cls, "__dict__").get(name) \
                is value:
            _peer_of(cls).request("restore", cls, name)
        else:
            _peer_of(cls).request("set", cls, name, value)
            if name in SPECIAL and name != "__call__" and callable(value):
                # The owner's class has the operator now (``functools.total_ordering``
                # adds ``__le__``...): its mirror forwards it too.
                peer = _peer_of(cls)
                type.__setattr__(cls, name, forwarder(peer, peer.mirrors, name))

    def __delattr__(cls, name: str) -> None:
        if not _owned(cls):
            type.__delattr__(cls, name)
            return
        _peer_of(cls).request("del", cls, name)

    def __repr__(cls) -> str:
        return f"<class '{cls.__module__}.{cls.__qualname__}'>"


def _owned(cls) -> bool:
    """Whether ``cls`` is the mirror of an owner's class (not a class the test derived from
    one: that one exists only here)."""
    return _peer_of(cls).mirrors.ref_of(cls) is not None


def _no_subclass(cls) -> None:
    owner = next((b for b in cls.__mro__[1:] if isinstance(b, MirrorMeta) and _owned(b)), None)
    name = owner.__qualname__ if owner is not None else "?"
    raise TypeError(f"{cls.__qualname__} is the test's subclass of the candidate's class "
                    f"{name}, which lives in the candidate process: the judge cannot make "
                    f"instances of a test-defined subclass of a candidate class")


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
    guarded = dunder in OPERANDS and getattr(peer, "strict", False)

    def forward(self, *args):
        if strict and mirrors.ref_of(args[0]) is None:
            return NotImplemented
        if guarded:
            for arg in args:
                if arg is not None and mirrors.ref_of(arg) is None:
                    raise TypeError(f"{dunder} of the candidate's {type(self).__name__} is "
                                    f"not given the test's {type(arg).__name__}: a candidate "
                                    "object computes only with the candidate's objects")
        return peer.request("op", dunder, self, args)

    forward.__name__ = dunder
    return forward


def caller(peer):
    def __call__(self, *args, **kwargs):
        return peer.request("call", self, args, kwargs)

    return __call__


def method_forwarder(peer, name: str):
    def method(self, *args, **kwargs):
        if name in ("send", "throw"):
            peer.readahead.check(self, name)
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


class ReadAhead:
    """``next`` on the proxies of the owner's generators and standard-library iterators, a
    chunk of items at a time once the test has taken ``START`` in a row from one of them and
    asked the owner nothing else in between (``list(gen)``, a ``for`` loop over it): a round
    trip per item would cost the test far more than the item. The owner stops a chunk early
    at an item that is not plain data, that printed or logged (that output is shown when the
    test takes it), or that asked us something (``ops``), so what the test can observe
    between two items happens in its place; the chunk grows to ``MAX``. What ends the
    iteration (``StopIteration``, an exception) is raised when the test reaches it."""

    START = 32  # a short loop over a generator is never read ahead
    MAX = 2048

    def __init__(self, peer):
        self.peer = peer
        # id(proxy) -> (proxy, items left (last first), the end or None, what the last one
        # printed and logged or None)
        self.buffers: dict[int, tuple] = {}
        self.last = None
        self.streak = 0
        self.mark = -1

    def next(self, proxy):
        entry = self.buffers.get(id(proxy))
        if entry is not None and entry[0] is proxy:
            items, end = entry[1], entry[2]
            if items:
                item = items.pop()
                if not items and entry[3] is not None:  # what making it printed, now
                    self.peer._echo(entry[3], None)
                return item
            del self.buffers[id(proxy)]
            if end is not None:
                raise end.with_traceback(None)
        elif entry is not None:
            del self.buffers[id(proxy)]  # an id reused by a new proxy
        in_a_row = self.last is proxy and self.peer.requests == self.mark
        self.streak = self.streak + 1 if in_a_row else 0
        self.last = proxy
        try:
            if self.streak < self.START:
                return self.peer.request("op", "__next__", proxy, ())
            return self._chunk(proxy, min(self.MAX, 1 << (self.streak - self.START + 1)))
        finally:
            self.mark = self.peer.requests

    def _chunk(self, proxy, n: int):
        got = self.peer.request("nextn", proxy, n)
        if type(got) is not list or len(got) != 3 or type(got[0]) is not list \
                or not (got[1] is None or isinstance(got[1], BaseException)):
            raise RuntimeError("the candidate broke the protocol")
        items, end, output = got
        items.reverse()
        if items:
            first = items.pop()
            if items or end is not None:
                self.buffers[id(proxy)] = (proxy, items, end, output)
            elif output is not None:
                self.peer._echo(output, None)
            return first
        if end is None:
            raise RuntimeError("the candidate broke the protocol")
        raise end.with_traceback(None)

    def check(self, proxy, name: str) -> None:
        """``send``/``throw`` on a generator read ahead: the owner's generator is past the
        items the test has not taken yet, so these cannot mean what they would."""
        entry = self.buffers.get(id(proxy))
        if entry is not None and entry[0] is proxy and (entry[1] or entry[2] is not None):
            raise RuntimeError(f"{name}() on a candidate generator the judge has read ahead "
                               f"({len(entry[1])} items not taken yet): after a long run of "
                               f"next() a generator takes no {name}()")


def readahead_forwarder(peer):
    def __next__(self):
        return peer.readahead.next(self)

    return __next__
