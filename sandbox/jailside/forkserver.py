"""Fork servers: where every process that runs untrusted code comes from, blank.

The worker starts two fork servers before it reads any job, so they (and every child they
fork) hold no test, no expected value, no reference solution and no other job's code: a child
learns only what its first frame tells it.

- the *candidate* server is lean (the standard library and the modules candidates commonly
  import, preloaded); its children become candidate processes (``candidate``);
- the *test* server has pytest imported and a session started (``testproc.prepare``); its
  children become test processes.

A child is asked for with its two *peer* pipe ends (the wires between a candidate and its
test process) passed along (``SCM_RIGHTS``). It is forked as pid 1 of a pid namespace of its
own where the kernel allows (``seccomp.fork_in_new_pid_namespace``): then no pid it can name is
another process, and no signal, file owner or syscall of it can reach one. There it mounts the
``/proc`` of that namespace, listing only itself, where the kernel allows that too
(``seccomp.own_proc``). It then starts a session of its own (so its process group is itself
alone, not the worker's), drops every capability, takes ``/dev/null`` as stdin and its log
pipe as stdout and stderr, closes every other descriptor, installs the seccomp filter, and
waits for its role: the job's rlimits, working folder, and the code or the tests.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import gc
import os
import resource
import signal
import socket
import struct
import sys

from . import seccomp
from .wire import Closed, Reader

LIMIT_NAMES = {"mem": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "fsize": "RLIMIT_FSIZE",
               "nofile": "RLIMIT_NOFILE", "nproc": "RLIMIT_NPROC", "core": "RLIMIT_CORE"}
CANDIDATE_PRELOAD = ("math", "collections", "itertools", "functools", "heapq", "bisect", "re",
                     "string", "typing", "dataclasses", "enum", "operator", "fractions",
                     "decimal", "random", "copy", "datetime", "json", "statistics",
                     "warnings", "abc", "numbers", "array", "inspect", "textwrap",
                     "logging", "io", "threading")  # the last three: every candidate's setup
NS_FAILED = 122   # exit code of a child that could not drop its capabilities
SECCOMP_FAILED = 121


def confine(limits: dict) -> None:
    for key, value in limits.items():
        name = LIMIT_NAMES.get(key)
        if value is not None and name and hasattr(resource, name):
            try:
                resource.setrlimit(getattr(resource, name), (value, value))
            except (ValueError, OSError):
                pass  # cannot raise a hard limit; the lower existing one stays


def _own_fds(keep: set[int], log_fd: int) -> None:
    """stdin /dev/null, stdout+stderr to ``log_fd``; every other descriptor closed."""
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    keep = sorted(keep | {0, 1, 2})
    for lo, hi in zip(keep, keep[1:] + [65536], strict=True):
        os.closerange(lo + 1, hi)


class Server:
    """One fork server (runs in its own process, after ``start`` forked it)."""

    def __init__(self, sock: socket.socket, use_seccomp: bool, main, reports: bool):
        self.sock, self.use_seccomp, self.main, self.reports = sock, use_seccomp, main, reports
        self.pidns = True

    def loop(self) -> None:
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
        while True:
            try:
                data, peer, _, _ = socket.recv_fds(self.sock, 16, 2)
            except OSError:
                data, peer = b"", []
            if not data or len(peer) != 2:
                os._exit(0)
            self.fork_child(peer)

    def fork_child(self, peer: list[int]) -> None:
        role_r, role_w = os.pipe()
        log_r, log_w = os.pipe()
        out_r, out_w = os.pipe() if self.reports else (-1, -1)
        pid = seccomp.fork_in_new_pid_namespace() if self.pidns else -1
        if pid == -1:
            self.pidns = False  # not allowed here: plain children (recorded by the worker)
            pid = os.fork()
        if pid == 0:
            try:
                self.child(role_r, out_w, log_w, peer)
            except BaseException:
                pass
            os._exit(0)
        ours = [role_w, log_r] + ([out_r] if self.reports else [])
        for fd in [role_r, log_w, out_w, *peer]:
            if fd >= 0:
                os.close(fd)
        socket.send_fds(self.sock, [struct.pack("i?", pid, self.pidns)], ours)
        for fd in ours:
            os.close(fd)

    def child(self, role_r: int, out_w: int, log_w: int, peer: list[int]) -> None:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if self.pidns:
            seccomp.own_proc()
        try:  # its own process group: what it sends to "my group" reaches no other process
            os.setsid()
        except OSError:  # already a group leader (never, as forked): seccomp still refuses
            pass
        if not seccomp.drop_capabilities():
            os._exit(NS_FAILED)
        _own_fds({role_r, log_w, *peer} | ({out_w} if out_w >= 0 else set()), log_w)
        if self.use_seccomp and not seccomp.install(os.getpid()):
            os._exit(SECCOMP_FAILED)  # never run untrusted code without the promised filter
        # No cyclic GC while the child sets up: a collection walks (and so copies) every
        # object header the fork server shared with it.
        gc.disable()
        try:
            role = Reader(role_r, max_frame=1 << 30).read()  # the worker is trusted
        except Closed:
            return
        os.close(role_r)
        if role.get("cwd"):
            os.chdir(role["cwd"])
        confine(role["limits"])
        gc.enable()
        self.main(role, out_w, peer)


def start(main, prepare, use_seccomp: bool, reports: bool) -> tuple[int, socket.socket]:
    """Fork a fork server now (before any job is read); its pid and our socket to it.
    ``prepare()`` runs in it once (imports, warm state); ``main(role, out_fd, peer)`` is what
    each child becomes."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1):  # never hold the host's pipes
            os.dup2(devnull, fd)
        # compile() builds CPython's AST node types on its first use in a process; build them
        # once here, for all children.
        compile("", "<warm>", "exec")
        try:
            prepare()
        except Exception as exc:
            print(f"fork server preparation failed: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            os._exit(3)
        seccomp.prepare()
        gc.collect()
        gc.freeze()  # children's GC then leaves these pages alone: fewer copy-on-write faults
        Server(theirs, use_seccomp, main, reports).loop()
        os._exit(0)
    theirs.close()
    return pid, ours


class Client:
    """The worker's side of one fork server: children asked for ahead of need, so forking
    overlaps the job before."""

    def __init__(self, sock: socket.socket, reports: bool):
        self.sock, self.reports = sock, reports
        self.pidns = True

    def ask(self, peer: list[int]) -> None:
        socket.send_fds(self.sock, [b"c"], peer)

    def receive(self) -> tuple[int, list[int]]:
        """``(pid, [role_w, log_r(, out_r)])`` of the child asked for first."""
        want = 3 if self.reports else 2
        data, fds, _, _ = socket.recv_fds(self.sock, 64, want)
        if len(data) != struct.calcsize("i?") or len(fds) != want:
            for fd in fds:
                os.close(fd)
            raise OSError("fork server did not answer")
        pid, self.pidns = struct.unpack("i?", data)
        return pid, fds
