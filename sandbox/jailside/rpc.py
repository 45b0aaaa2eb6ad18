"""The conversation between the test process (T) and the candidate process (C) of one session.

Strictly nested request/response over two pipes: T asks C to call a function, read an
attribute or apply an operator to one of C's objects; while C serves, it may ask T back (a key
function or a test's object that T passed in); each side answers the innermost request first,
so only one side ever writes at a time. Threads take turns: the endpoint's ``lock`` is the
right to use the pipes, held while writing a request and reading its answer and released
while serving a request of the peer, so threads the candidate starts during a call (a
``ThreadPoolExecutor`` mapping a test's callback) ask the test one at a time; once the test's
call has been answered, they may ask nothing.

A request is ``["q", op, payload]`` and its response ``["r", "ok"|"raise", value, writeback,
output, warnings]``:

- ``op`` is ``call`` (a callable), ``callm`` (a method, by name), ``get``/``set``/``del`` (an
  attribute) or ``op`` (one special method, see ``ops.OPS``); the target is one of the server's
  own objects, by handle;
- ``value`` is the result, or the exception raised, as ``codec`` values (so ``pytest.raises``
  sees the same class, ``args``, attributes and message);
- ``writeback``: every mutable container among the arguments whose content the call changed,
  as its new content, applied in place to the caller's own objects, also when the call raised
  (a function that debits an account and then raises shows the debit, as in one process);
- ``output``: what the candidate printed during the call (``sys.stdout``/``sys.stderr``),
  written to the caller's streams so ``capsys`` reads it, and its log records (C's only);
  ``warnings``: the warnings it
  issued, issued again at the caller (so ``pytest.warns`` and ``recwarn`` see them).

What one process shares, the two share too: T sends its environment, working directory,
recursion limit, its patches of the standard library and builtins, and the version of its
``random`` generator before a request when they changed (``state``, see ``procstate``; C
takes the generator's state with ``randstate`` when its code next draws), serves C's ``input()`` and
``sys.stdin`` reads from its own (``stdin``, see ``candidate``), and handles the candidate's
log records of a call again (``caplog``); ``restore`` undoes the test's last ``set`` of an
attribute (see ``mirror``).

This module holds the conversation (``Endpoint``); what each request does is in ``ops``, the
shared process state in ``procstate``, printed output, logs and warnings in ``relay``, and
argument mutations in ``writeback``.

What T serves to C is limited (``restricted``): C may call the functions T handed it and use
public attributes and operators of T's objects, never a name that starts with ``_`` (no way
from a key function to its ``__globals__``, where a test's expected values live).

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import warnings

from . import proxies
from .codec import Codec
from .describe import describe
from .mirror import Mirrors
from .ops import Operations
from .procstate import Tracker
from .relay import Capped, collect_warnings, echo, text
from .wire import Closed, Reader
from .writeback import MUTABLE, changed, contents, set_contents, snapshot

MAX_NESTING = 64
TRIPS_EVERY = 256  # T tells the worker its count of requests every so many (``on_trips``)
_HEADER = struct.Struct(">I")
# ``wire.pack``'s encoding, made once: ``json.dumps`` with options builds an encoder per call,
# a cost every round trip paid twice.
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode
_WRITE = os.write  # the judge's own: a test's patch of ``os.write`` is not our pipe's


def write_frame(fd: int, obj) -> None:
    """``wire.write_frame``, the same bytes, with the encoder made once."""
    data = _ENCODE(obj).encode()
    data = _HEADER.pack(len(data)) + data
    while data:
        data = data[_WRITE(fd, data):]


class Fatal(Exception):
    """The peer is gone or broke the protocol: this session cannot go on."""


class Endpoint(Operations):
    """One side of a session. ``capture``: this side runs candidate code (C), so printed
    output and warnings are collected per request and sent back. ``restricted``: this side
    serves a less trusted peer (T serving C). ``strict``: proxies here refuse comparisons with
    local values (T, see ``mirror``). ``fatal(status, message)`` is called (and must not
    return) when the peer dies or breaks the protocol while we wait for it."""

    def __init__(self, in_fd: int, out_fd: int, *, max_frame: int, capture: bool,
                 restricted: bool, strict: bool, fatal):
        self.reader = Reader(in_fd, max_frame=max_frame)
        self.out_fd = out_fd
        os.set_blocking(out_fd, True)  # a peer busy computing is waited for, not an error
        self.capture, self.restricted, self.strict, self.fatal = capture, restricted, strict, \
            fatal
        self.mirrors = Mirrors(self)
        self.codec = Codec(self.mirrors.make_proxy, self.mirrors.ref_of,
                           trusts_peer=not restricted, revisit=self.mirrors.revisit)
        self.depth = 0
        self.requests = 0  # requests made so far (``proxies.ReadAhead``, ``ops``)
        self.on_trips = None  # T only: see the class docstring
        self.readahead = proxies.ReadAhead(self)
        self.originals: dict[tuple[int, str], tuple[object, list]] = {}  # see ``ops``
        # T: what C was told (``_sync``)
        self.tracker = None if capture else Tracker()
        self.logs: list | None = None  # C: log records of the call being served
        self.lock = threading.Lock()  # the right to use the pipes (``request``)
        self.serving_thread: int | None = None
        proxies.PEER = self

    # ----- asking the peer -------------------------------------------------------------------
    def request(self, op: str, *parts):
        if self.tracker is not None and op not in ("state", "randstate"):
            self._sync()
        # Encoded before taking the pipes: describing a value may itself ask the peer.
        payload, sent = self.codec.encode_tracked(list(parts), describe)
        with self.lock:
            self.requests += 1
            if self.on_trips is not None and not self.requests % TRIPS_EVERY and self.strict:
                self.on_trips(self.requests)
            if self.capture and self.depth == 0:
                raise RuntimeError("objects of the test can be used only while the test is "
                                   "calling the candidate")
            if self.depth >= MAX_NESTING:
                raise RecursionError("calls between the test and the candidate nest too deep")
            try:
                write_frame(self.out_fd, ["q", op, payload])
            except OSError:
                self.fatal("crashed", f"the {self._peer_name()} process died")
            self.depth += 1
            try:
                frame = self._await_response()
            finally:
                self.depth -= 1
        try:
            return self._response(frame, sent)
        except StopIteration as exc:  # PEP 479 at the call boundary (see ``_ends_iteration``)
            if self.strict and not _ends_iteration(op, parts):
                raise _pep479(exc) from exc
            raise

    def _await_response(self) -> list:
        """Read (holding ``lock``) until the answer to our request; a request of the peer
        met first is served without the lock, so that the threads it starts (a pool mapping
        a test's callback) may ask the peer too, each in turn."""
        while True:
            frame = self._read()
            if frame[0] == "r":
                return frame
            self.lock.release()
            try:
                self._serve(frame)
            finally:
                self.lock.acquire()

    def _sync(self) -> None:
        """T: the candidate works in the test's environment (``monkeypatch.setenv``), working
        directory (``monkeypatch.chdir``) and recursion limit, as in one process: what changed
        since C was last told goes first, as a request of its own."""
        changes = self.tracker.changes()
        if changes is not None:
            self.request("state", *changes)

    def _peer_name(self) -> str:
        return "test" if self.capture else "candidate"

    def _read(self, kinds: tuple[str, ...] = ("q", "r")) -> list:
        try:
            frame = self.reader.read()
        except Closed as exc:
            if "limit" in str(exc):
                self.fatal("error", f"the {self._peer_name()} sent more than "
                                    f"{self.reader.max_frame >> 20} MB at once")
            self.fatal("crashed", f"the {self._peer_name()} process died"
                                  + ("" if "end of stream" in str(exc) else f" ({exc})"))
        if not (type(frame) is list and frame and frame[0] in kinds):
            self.fatal("error", f"the {self._peer_name()} broke the protocol")
        return frame

    def _response(self, frame: list, sent: list):
        if len(frame) != 6 or frame[1] not in ("ok", "raise"):
            self.fatal("error", f"the {self._peer_name()} broke the protocol")
        _, status, value, writeback, output, warned = frame[:6]
        try:
            result = self.codec.decode(value, sent)
            self._apply(writeback, sent)
        except (ValueError, TypeError, RecursionError) as exc:
            self.fatal("error", f"the {self._peer_name()} sent data that cannot be decoded: "
                                f"{exc}")
        self._echo(output, warned)
        if status == "raise":
            if not isinstance(result, BaseException):
                self.fatal("error", f"the {self._peer_name()} broke the protocol")
            raise result.with_traceback(None)
        return result

    def _apply(self, writeback, sent: list) -> None:
        if writeback is None:
            return
        if type(writeback) is not list:
            raise ValueError("malformed write-back")
        for entry in writeback:
            if type(entry) is not list or len(entry) != 2 or type(entry[0]) is not int \
                    or not 0 <= entry[0] < len(sent):
                raise ValueError("malformed write-back")
            target = sent[entry[0]]
            if type(target) not in MUTABLE:
                raise ValueError("write-back to an immutable value")
            set_contents(target, self.codec.decode(entry[1], sent))

    def _echo(self, output, warned) -> None:
        echo(self.codec, output, warned)

    # ----- serving the peer ------------------------------------------------------------------
    def serve_forever(self) -> None:
        """C's main loop: answer T's requests until T goes away."""
        while True:
            try:
                frame = self.reader.read()
            except Closed:
                return
            if type(frame) is list and frame and frame[0] == "q":
                self._serve(frame)

    def _serve(self, frame: list) -> None:
        """Serve one request of the peer (not holding ``lock``: the pipes are taken only to
        answer, see ``_answer``)."""
        outer = self.serving_thread
        self.serving_thread = threading.get_ident()
        with self.lock:
            self.depth += 1
        try:
            self._serve_one(frame)
        finally:
            self.serving_thread = outer

    def _answer(self, response: list) -> None:
        """Write the answer to the innermost request and leave its level in one step: a
        thread of the candidate's that asks the test after this finds the call over."""
        with self.lock:
            self.depth -= 1
            write_frame(self.out_fd, response)

    def _serve_one(self, frame: list) -> None:
        tracked: list = []
        built: list = []
        out, warned, status, result = None, None, "raise", None
        try:
            if len(frame) != 3 or type(frame[1]) is not str:
                raise ValueError("malformed request")
            parts, built = self.codec.decode_tracked(frame[2])
            if type(parts) is not list:
                raise ValueError("malformed request")
            tracked = [(i, x, snapshot(x)) for i, x in enumerate(built)
                       if type(x) in MUTABLE and i > 0]
            status, result, out, warned = self._run(frame[1], parts)
        except (ValueError, TypeError, RecursionError) as exc:
            status, result = "raise", RuntimeError(f"malformed request: {exc}")
        known = {id(x): i for i, x, _ in tracked}
        # The NaNs among the arguments too (the only floats numbered: ``encode``), so that
        # one returned, or put in a container, is the caller's own NaN object.
        known.update((id(x), i) for i, x in enumerate(built) if type(x) is float)
        writeback = []
        try:
            for i, x, snap in tracked:
                if changed(x, snap):
                    writeback.append([i, contents(self.codec, describe, x, known)])
            value = self.codec.encode(result, describe, known)
        except BaseException as exc:  # a result that cannot be sent is the call's failure
            writeback, status = [], "raise"
            value = self.codec.encode(RuntimeError(
                f"the result could not be sent: {type(exc).__name__}: {text(exc)}"))
        self._answer(["r", status, value, writeback, out, warned])

    def _run(self, op: str, parts: list):
        """Execute one request; ``(status, value, output, warnings)``."""
        if not self.capture:
            try:
                return "ok", self._execute(op, parts), None, None
            except BaseException as exc:
                return "raise", exc, None, None
        saved, outer_logs = (sys.stdout, sys.stderr), self.logs
        out, err = Capped(), Capped()
        sys.stdout, sys.stderr = out, err
        status, value, self.logs = "ok", None, []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value = self._execute(op, parts)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt too: just data
                status, value = "raise", exc
            finally:
                sys.stdout, sys.stderr = saved
                logs, self.logs = self.logs, outer_logs
        return status, value, [out.value(), err.value(), logs], self._warnings(caught)

    def _warnings(self, caught) -> list:
        return collect_warnings(self.codec, describe, caught)


# What may end an iteration: ``next()`` on a candidate's iterator, or the generator methods that
# signal the end so. Everywhere else a ``StopIteration`` out of the candidate's code would end
# the test's own ``map()``/``zip()``/generator early and silently, as PEP 479 forbids inside
# generators: such a call raises ``RuntimeError`` instead.
_ITERATION_METHODS = frozenset({"__next__", "send", "throw"})


def _ends_iteration(op: str, parts: tuple) -> bool:
    if op == "nextn":  # ``next`` read ahead (``proxies.ReadAhead``)
        return True
    if op == "op":
        return bool(parts) and parts[0] == "__next__"
    if op == "callm":
        return len(parts) > 1 and parts[1] in _ITERATION_METHODS
    return False


def _pep479(exc: StopIteration) -> RuntimeError:
    return RuntimeError(f"a call into the candidate raised {type(exc).__name__} "
                        "(PEP 479: it does not end the test's iteration)")
