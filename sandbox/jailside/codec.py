"""Values across the jail's process boundary, with exact types, shared structure and handles.

The candidate process (C) and the test process (T) exchange values as JSON (``wire``) in which
every JSON object is a one-key tag. ``Codec.encode`` writes a value; ``Codec.decode`` rebuilds
it from fresh objects of *exactly* the sent types, or raises ``ValueError``: whatever bytes a
hostile peer writes, decoding is a total, strict function bounded by the frame size and
``MAX_DEPTH``.

What crosses as a copy (a *value*), by exact type (``type(x) is ...``; subclasses never):
``None``, ``bool``, ``int`` (any size), ``float``, ``complex``, ``str``, ``bytes``,
``bytearray``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset``, ``range``, ``slice``,
``Ellipsis``, ``collections.Counter``/``OrderedDict``/``defaultdict``/``deque``, ``namedtuple``
instances, ``fractions.Fraction``, ``decimal.Decimal``, ``datetime`` values (with their
``timezone`` or ``zoneinfo.ZoneInfo`` and fold), ``uuid.UUID``, ``ipaddress`` values,
``array.array``, ``pathlib`` paths, dict views, members of the standard library's ``Enum``s
(looked up in the receiver's own class) and exceptions (class, ``args``, plain attributes,
``__notes__``, the fields builtin classes keep in slots such as ``OSError.filename``, the
public class attributes and properties of the candidate's own exception classes, ``str``,
cause). From the candidate only (the test's own go as handles, so that the candidate's
changes reach them): ``types.SimpleNamespace``, ``collections.ChainMap``, ``mappingproxy``.

The candidate's *value classes* (``shapes.value_class``: subclasses of ``int``, ``float``,
``str``, ``tuple`` including ``NamedTuple``s with methods, and ``Enum``s of plain data, that
define no comparison, hashing or arithmetic of their own) cross as values too, in a class the
test process builds itself from the builtin type (``decode``): their comparisons are the
builtin type's own, their methods and properties go back to the candidate. Its
``list``/``dict``/``set`` subclasses stay handles and compare with the test's plain values by
content. Shared and cyclic structure is kept: a container met twice is sent once and
referenced after (pre-order numbering), so ``f(a, a)`` sees one list twice and ``[row] * 3``
stays aliased; a NaN is numbered so too (``[nan] == [nan]`` holds by identity only), and
``math.nan`` arrives as the receiver's. A set is rebuilt in the iteration order it had
(CPython's set order depends on its table's history; where the rebuilt set cannot be laid
out the same way, its content is exact and its order may differ). A value nests up to
``MAX_DEPTH`` levels (in pieces of ``OUTLINE`` levels of JSON, see ``encode``); a deeper one
cannot cross, and the call carrying it fails naming its type (``TooDeep``).

What crosses by reference (a *handle*): everything else, i.e. functions, classes, instances of
the candidate's classes (dataclasses included), generators and other iterators. The owner
keeps the object; the other side holds a proxy (``mirror``) whose calls, attribute reads and
operations go back to the owner; the proxy of a function or class has its annotations
(``hints``). A handle sent back to its owner decodes to the owner's own object. Objects of the
standard library that can be named (``math``, ``math.gcd``, ``collections.Counter``,
``typing.List``) cross as that name and resolve to the receiver's own copy of them (from the
candidate process, only modules, exception classes and ``typing``'s inert forms: see
``Codec``).

Nothing the candidate process says about a type is taken at its word: a name resolves only to
what cannot behave (``stdnames.inert``), a proxy answers ``isinstance`` for a
standard-library class only where that grants nothing (``stdnames.claimable``), and every
value is rebuilt by the test process from data, in types it picks by tag from its own tables.

The parts: ``encode`` and ``decode`` (one value each way), ``shapes`` (what both share:
limits, set order, namedtuple classes), ``stdnames`` (standard-library names), ``hints``
(annotations); this module holds one side's session (``Codec``): the objects it handed out
and the proxies it holds.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import contextlib
import sys
import threading

from .decode import Decoder, root
from .encode import Encoder
from .shapes import MAX_DEPTH, MAX_HANDLES, NotEncodable, is_namedtuple_class, value_class


class Codec:
    """One side's half of a session: the objects it handed out, the proxies it holds of the
    peer's, and the encoding and decoding of values in between.

    ``make_proxy(ref, kind, meta, decoder, depth)`` (``mirror.Mirrors``) builds the local
    proxy of a peer's object; ``revisit(proxy, kind, meta, decoder, depth)`` decodes the
    description of one it has already (the handles first described in it must exist, see
    ``Encoder.handle``); ``peer_ref_of(obj)`` is the peer's ref of ``obj`` when it is such a
    proxy, else None.
    """

    def __init__(self, make_proxy, peer_ref_of, trusts_peer: bool = True, revisit=None):
        self.make_proxy, self.revisit = make_proxy, revisit
        self._mirror_ref_of = peer_ref_of
        # A standard-library name from the candidate process is a claim the candidate
        # controls (it can set ``gcd.__module__ = "math"`` on its own ``gcd``, or write any
        # name into its own frames): taken at its word, the test would run the real
        # ``math.gcd`` and never the candidate's, or hold ``unittest.mock.ANY``, which equals
        # everything. So the test process (``trusts_peer=False``) accepts such names only for
        # modules, exception classes and ``typing``'s inert forms (``stdnames.inert``;
        # classes also in annotations, see ``hints``), and the candidate process names
        # nothing that behaves: its functions and classes always travel as handles, so every
        # call runs the candidate's own object, whatever it is called.
        self.trusts_peer = trusts_peer
        self.names_callables = not trusts_peer
        self.objects: list = []            # ref -> our object handed out
        self._refs: dict[int, int] = {}    # id(our object) -> ref
        self.proxies: dict[int, object] = {}  # peer ref -> our proxy of it
        # The test process's own copies of the candidate's value classes (``decode``), by
        # ``id()``: their peer ref and kind (``shapes.value_class``).
        self.adopted: dict[int, tuple[int, str]] = {}

    # ----- the peer's objects we hold --------------------------------------------------------
    def peer_ref_of(self, obj: object) -> int | None:
        adopted = self.adopted.get(id(obj))
        if adopted is not None and self.proxies.get(adopted[0]) is obj:
            return adopted[0]
        return self._mirror_ref_of(obj)

    def adopt(self, ref: int, cls: type, kind: str) -> None:
        """``cls``, built here, stands for the peer's value class ``ref``."""
        self.proxies[ref] = cls
        self.adopted[id(cls)] = (ref, kind)

    def value_kind(self, cls: type) -> str | None:
        """How an instance of ``cls`` travels as a value (``shapes.value_class``), or None.
        The candidate process decides over its own classes; the test process sends back only
        the copies it built of those (never a class of the test's as a value class)."""
        if self.names_callables:
            adopted = self.adopted.get(id(cls))
            return adopted[1] if adopted is not None and self.proxies.get(adopted[0]) is cls \
                else None
        if is_namedtuple_class(cls):  # pure: the namedtuple path (``encode``)
            return None
        meta = value_class(cls)
        return None if meta is None else meta["k"]

    # ----- our objects handed out ------------------------------------------------------------
    def ref_of(self, obj: object) -> int:
        ref = self._refs.get(id(obj))
        if ref is not None and self.objects[ref] is obj:
            return ref
        if len(self.objects) >= MAX_HANDLES:
            raise NotEncodable(f"more than {MAX_HANDLES} objects handed out in one session")
        self.objects.append(obj)
        self._refs[id(obj)] = len(self.objects) - 1
        return len(self.objects) - 1

    def own(self, ref: object) -> object:
        if type(ref) is not int or not 0 <= ref < len(self.objects):
            raise ValueError(f"unknown handle {ref!r}")
        return self.objects[ref]

    # ----- encoding --------------------------------------------------------------------------
    def encode(self, value: object, describe=None, known: dict | None = None) -> object:
        """``value`` as JSON-ready data. ``describe(obj)`` returns ``(kind, meta)`` for an
        object that travels as a handle (see ``mirror``). ``known`` maps ``id()`` of objects
        the peer already holds (the arguments of the current call) to their numbers: they
        travel as ``{"A": n}`` so the peer gets its own object back."""
        with _headroom():
            try:
                state = Encoder(self, describe, known or {})
                return state.root(state.enc(value, 0))
            except NotEncodable:  # afresh: nothing of the abandoned attempt was sent
                state = Encoder(self, describe, {})
                return state.root(state.handle(value))

    # ----- decoding --------------------------------------------------------------------------
    def decode(self, data: object, known: list | None = None) -> object:
        """A fresh value from ``data``; ``ValueError`` for anything malformed. ``known`` are
        this side's objects that the peer refers to by number (``{"A": n}``)."""
        with _headroom():
            return root(Decoder(self, known or []), data)

    def decode_tracked(self, data: object) -> tuple[object, list]:
        """``decode``, and every container built, in the pre-order numbering that the
        sender's ``encode_tracked`` used: the arguments of a call, whose
        changes go back to the caller."""
        state = Decoder(self, [])
        with _headroom():
            return root(state, data), state.built

    def encode_handle(self, obj: object, describe) -> object:
        """``obj`` as a handle, even where it could travel as a standard-library name."""
        state = Encoder(self, describe, {})
        with _headroom():
            return state.root(state.handle(obj))

    def encode_tracked(self, value: object, describe=None) -> tuple[object, list]:
        """``encode``, and the containers it numbered, in pre-order (see ``decode_tracked``)."""
        with _headroom():
            state = Encoder(self, describe, {})
            try:
                return state.root(state.enc(value, 0)), state.keep
            except NotEncodable:
                state = Encoder(self, describe, {})
                return state.root(state.handle(value)), []


_ROOM = threading.Lock()
_ROOM_STATE = {"users": 0, "limit": 0}  # codec calls under way (all threads), the limit before


@contextlib.contextmanager
def _headroom():
    """Room on the stack for a value ``MAX_DEPTH`` levels deep (a few Python frames a level,
    encoding or decoding), whatever depth the call that carries it runs at; the limit the test
    set is back when the last codec call under way (in any thread: the limit is the
    process's) ends."""
    with _ROOM:
        if _ROOM_STATE["users"] == 0:
            _ROOM_STATE["limit"] = sys.getrecursionlimit()
            sys.setrecursionlimit(_ROOM_STATE["limit"] + 8 * MAX_DEPTH)
        _ROOM_STATE["users"] += 1
    try:
        yield
    finally:
        with _ROOM:
            _ROOM_STATE["users"] -= 1
            if _ROOM_STATE["users"] == 0:
                sys.setrecursionlimit(_ROOM_STATE["limit"])
