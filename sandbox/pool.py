"""Warm jailed workers, one per pool slot, each owned by one long-lived host thread.

A worker is started (and restarted) by the thread that owns it, never by a caller's thread:
``--die-with-parent`` follows the *thread* that spawned bubblewrap, so a worker started from
a short-lived caller thread would die with it.

Infra only when proven. A job whose worker dies, stops answering (no frame, not even a
heartbeat, for the job's no-progress limit), answers malformed, or reports that the host
starved it, is run once more *alone*: on a fresh worker, with no other job sent to it until it
answers. That run's verdicts are the job's. Should the same happen again, the job itself is
the cause and is charged with it (``crashed``; ``timeout`` when starved twice), never masked.
Only a harness that cannot even start a fresh worker any more leaves the job without a
verdict (``infra``).
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

from sandbox import jail
from sandbox.jail import SandboxError
from sandbox.jailside.wire import Closed, Reader, Timeout, pack, send_bytes

MAX_REPLY = 64 << 20  # a worker's reply: items and short messages only (see jailside.worker)

START_TIMEOUT_S = 30.0
# Jobs handed to one worker at a time; more would let one slow job hold others back. With 2,
# a deferred (big) second job can never be overtaken, so replies stay in order.
PIPELINE = 2
PIPELINE_MAX_BYTES = 16 << 10  # bigger jobs wait until the worker has answered the last one


class WorkerFailed(Exception):
    """The worker died or stopped answering (never caused by candidate code by design)."""


class HostWorker:
    """One jailed worker process and its pipes."""

    def __init__(self, level: str):
        spec = jail.launch(level)
        self.cleanup = spec.cleanup
        self.stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                spec.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                env=spec.env, cwd=spec.cwd, user=spec.user, start_new_session=True)
        except OSError as exc:
            raise SandboxError(f"cannot start a sandbox worker ({spec.argv[0]}): {exc}") from exc
        self.in_fd = self.proc.stdin.fileno()
        os.set_blocking(self.in_fd, False)
        self.reader = Reader(self.proc.stdout.fileno(), max_frame=MAX_REPLY)
        try:
            hello = self.reader.read(time.monotonic() + START_TIMEOUT_S)["hello"]
        except (Timeout, Closed, KeyError, TypeError) as exc:
            self.stderr.seek(0)
            detail = self.stderr.read()[-2000:].decode(errors="replace")
            self.kill()
            raise SandboxError(f"sandbox worker ({level}) did not start: "
                               f"{type(exc).__name__} {exc}; stderr: {detail}") from None
        self.seccomp = hello.get("seccomp") is True
        self.isolation = level + ("+seccomp" if self.seccomp else "")

    def send(self, data: bytes) -> None:
        """Write one framed job (``wire.pack``); the worker reads it when it is free."""
        try:
            send_bytes(self.in_fd, data, time.monotonic() + START_TIMEOUT_S, [])
        except Timeout:  # a live worker that does not read: the host did not run it
            raise WorkerFailed("starved: the worker did not take its job in "
                               f"{START_TIMEOUT_S:g}s") from None
        except Closed as exc:
            raise WorkerFailed(f"worker not accepting jobs: {exc}") from None

    def receive(self, budget_s: float) -> dict:
        """The reply to the oldest job sent (the worker runs jobs in order). ``budget_s`` is
        how long the worker may go without a frame; it sends heartbeats while it works."""
        while True:
            try:
                reply = self.reader.read(time.monotonic() + budget_s)
            except (Timeout, Closed) as exc:
                raise WorkerFailed(f"worker {type(exc).__name__.lower()}: {exc}") from None
            if isinstance(reply, dict) and "beat" in reply:
                continue
            break
        if isinstance(reply, dict) and isinstance(reply.get("starved"), str):
            raise WorkerFailed(f"starved: {reply['starved']}")
        if not isinstance(reply, dict) or not isinstance(reply.get("tests"), list):
            raise WorkerFailed("malformed reply from worker")
        reply["isolation"] = self.isolation
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
            try:
                stream.close()
            except OSError:
                pass
        for path in self.cleanup:
            subprocess.run(["rm", "-rf", "--one-file-system", path], check=False)


@dataclass
class _Entry:
    """A job a pool thread has taken: sent (or to be sent) to its worker."""

    msg: dict
    budget_s: float
    future: Future
    tries: int = 0
    sent: bool = False
    send_error: str | None = None
    alone: bool = False  # its second run: on a fresh worker, nothing sent behind it

    def __post_init__(self) -> None:
        self.data = pack(self.msg)

    def send_to(self, worker: HostWorker, ahead: bool) -> None:
        """Send now, unless jobs are ahead of it and it is big: the worker may be writing a
        big reply while we write a big job, and both pipes would fill (it is sent later,
        when it reaches the head of the line)."""
        if ahead and len(self.data) > PIPELINE_MAX_BYTES:
            return
        try:
            worker.send(self.data)
            self.sent, self.send_error = True, None
        except WorkerFailed as exc:
            self.send_error = str(exc)


class Pool:
    """``size`` threads, each owning one warm worker; jobs are served first come first."""

    def __init__(self, isolation: str = "auto", size: int | None = None):
        self.level = jail.resolve(isolation)
        self.size = 0
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._isolation = self.level
        self._closed = False
        self._started = False  # a worker has started once: later start failures are infra
        self.resize(size or os.cpu_count() or 1)

    @property
    def isolation(self) -> str:
        """The level in force (``+seccomp`` once a worker has reported it)."""
        return self._isolation

    def resize(self, size: int) -> None:
        while len(self._threads) < size:
            thread = threading.Thread(target=self._loop, daemon=True,
                                      name=f"sandbox-worker-{len(self._threads)}")
            thread.start()
            self._threads.append(thread)
        self.size = len(self._threads)

    def submit(self, msg: dict, budget_s: float) -> Future:
        if self._closed:
            raise SandboxError("sandbox pool is closed")
        future: Future = Future()
        self._queue.put((msg, budget_s, future))
        return future

    def _loop(self) -> None:
        """Serve jobs with up to ``PIPELINE`` of them sent ahead to our worker, so it starts
        the next job the moment it finishes one instead of waiting for this thread."""
        worker: HostWorker | None = None
        inflight: collections.deque[_Entry] = collections.deque()
        stopping = False
        while True:
            while not stopping and len(inflight) < (1 if inflight and inflight[0].alone
                                                    else PIPELINE):
                try:
                    item = self._queue.get() if not inflight else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                elif item[2].set_running_or_notify_cancel():
                    inflight.append(_Entry(*item))
                    if worker is not None:
                        inflight[-1].send_to(worker, ahead=len(inflight) > 1)
            if not inflight:
                if stopping:
                    break
                continue
            head = inflight[0]
            try:
                if worker is None or not worker.alive():
                    try:
                        worker = HostWorker(self.level)
                    except SandboxError as exc:
                        if self._started:  # it worked before: a transient failure (load)
                            raise WorkerFailed(f"cannot start: {exc}") from None
                        raise
                    self._started = True
                    self._isolation = worker.isolation
                    for i, entry in enumerate(inflight):
                        entry.sent, entry.send_error = False, None
                        if i == 0 or not inflight[0].alone:
                            entry.send_to(worker, ahead=i > 0)
                if not head.sent and not head.send_error:
                    head.send_to(worker, ahead=False)
                if head.send_error:
                    raise WorkerFailed(head.send_error)
                reply = worker.receive(head.budget_s)
                inflight.popleft()
                reply["attempts"] = head.tries + 1
                head.future.set_result(reply)
                if head.alone:  # the jobs held back go to the worker now
                    for i, entry in enumerate(inflight):
                        if not entry.sent and not entry.send_error:
                            entry.send_to(worker, ahead=i > 0)
            except SandboxError as exc:  # no worker starts: every waiting job gets the error
                while inflight:
                    inflight.popleft().future.set_exception(exc)
                worker = None
            except WorkerFailed as exc:
                if worker is not None:
                    worker.kill()
                worker = None
                head.tries += 1
                if str(exc).startswith("cannot start:"):  # not the job's doing: no verdict
                    inflight.popleft()
                    head.future.set_result({"tests": [], "worker_error": str(exc),
                                            "isolation": self._isolation,
                                            "attempts": head.tries})
                elif head.tries >= 2:  # it failed alone on a fresh worker too: its own doing
                    inflight.popleft()
                    status = "timeout" if str(exc).startswith("starved") else "crashed"
                    head.future.set_result({
                        "tests": [], "isolation": self._isolation, "attempts": 2,
                        "charged": [status, f"the job broke its sandbox worker twice, the "
                                            f"second time alone in a fresh jail: {exc}"]})
                else:
                    head.alone = True
        if worker is not None:
            worker.kill()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=15)
