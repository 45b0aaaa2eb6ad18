"""Framing between the host, the jail worker and its children: 4-byte length + JSON.

Readers take deadlines and drain other pipes (children's stdout) while they wait, so a child
that floods its output or stops reading cannot stall the reader. A frame over ``MAX_FRAME`` or
that is not JSON closes the stream. Stdlib-only: the jail worker runs it from source.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time

MAX_FRAME = 8 << 20  # per frame from a child: bounds what a hostile one makes us read
MAX_JOB_VALUES = 32 << 20  # return values carried back per job, in all
MAX_REPLY = MAX_JOB_VALUES + (8 << 20)  # a worker's reply to the host
_HDR = struct.Struct(">I")


class Closed(Exception):
    """The other end closed, died, or sent a malformed frame."""


class Refused(Closed):
    """The stream is intact but its next frame is over the reader's limit or not JSON: the
    sender, not the channel, is at fault."""


class Timeout(Exception):
    """The deadline passed."""


class Sink:
    """Drains a child's output pipe, keeping only the first ``cap`` bytes."""

    def __init__(self, fd: int, cap: int):
        self.fd, self.cap, self.data, self.open = fd, cap, bytearray(), True
        os.set_blocking(fd, False)

    def drain(self) -> None:
        try:
            chunk = os.read(self.fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.open = False
        elif len(self.data) < self.cap:
            self.data += chunk[: self.cap - len(self.data)]


def _wait(rfds: list[int], wfds: list[int], sinks: list[Sink],
          deadline: float | None) -> tuple[list[int], list[int]]:
    """select() on ``rfds``/``wfds`` plus the sinks; drains ready sinks; raises Timeout."""
    wait = None if deadline is None else deadline - time.monotonic()
    if wait is not None and wait <= 0:
        raise Timeout
    live = [s for s in sinks if s.open]
    readable, writable, _ = select.select(rfds + [s.fd for s in live], wfds, [], wait)
    for sink in live:
        if sink.fd in readable:
            sink.drain()
    if not readable and not writable and deadline is not None and time.monotonic() >= deadline:
        raise Timeout
    return readable, writable


class Reader:
    """Reads frames from ``fd`` with an optional deadline, draining ``sinks`` meanwhile."""

    def __init__(self, fd: int, sinks: list[Sink] | None = None, max_frame: int = MAX_FRAME):
        self.fd, self.buf, self.sinks = fd, bytearray(), sinks if sinks is not None else []
        self.max_frame, self.last_size = max_frame, 0

    def _fill(self, need: int, deadline: float | None) -> None:
        while len(self.buf) < need:
            if self.sinks or deadline is not None:
                readable, _ = _wait([self.fd], [], self.sinks, deadline)
                if self.fd not in readable:
                    continue
            try:
                chunk = os.read(self.fd, max(need - len(self.buf), 1 << 16))
            except OSError as exc:
                raise Closed(str(exc)) from None
            if not chunk:
                raise Closed("end of stream")
            self.buf += chunk

    def read(self, deadline: float | None = None):
        self._fill(4, deadline)
        (size,) = _HDR.unpack(self.buf[:4])
        if size > self.max_frame:
            raise Refused(f"a frame of {size} bytes is over the {self.max_frame}-byte limit")
        self._fill(4 + size, deadline)
        self.last_size = size
        body, self.buf = bytes(self.buf[4: 4 + size]), self.buf[4 + size:]
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise Refused("a frame that is not JSON") from None


def pack(obj) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode()
    return _HDR.pack(len(data)) + data


def write_frame(fd: int, obj) -> None:
    """Blocking write of one frame (to a reader that is known to be reading)."""
    data = pack(obj)
    while data:
        data = data[os.write(fd, data):]


def send(fd: int, obj, deadline: float | None, sinks: list[Sink]) -> None:
    """Write one frame to a child that may not be reading: honours the deadline and keeps
    draining ``sinks``. ``fd`` must be non-blocking."""
    send_bytes(fd, pack(obj), deadline, sinks)


def send_bytes(fd: int, data: bytes, deadline: float | None, sinks: list[Sink]) -> None:
    """``send`` for an already packed frame."""
    while data:
        _, writable = _wait([], [fd], sinks, deadline)
        if fd in writable:
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                continue
            except OSError as exc:  # EPIPE: the child is gone
                raise Closed(str(exc)) from None
