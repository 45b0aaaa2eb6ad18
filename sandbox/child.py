"""Processes that run untrusted code, and the fork server that makes them *blank*.

The fork server is forked by the worker before it reads any job, so it (and every child it
forks) holds no test, no expected value, no reference solution and no other candidate's code
in memory: a child learns only what its first frame tells it. A child then applies rlimits and
the seccomp filter and becomes either

- a candidate process (C): runs the candidate code, then answers ``[name, args, kwargs]`` with
  ``["ok", plain]``, ``["raise", type, message]`` or ``["bad", why]``; or
- a test process (T): runs one whole test with the candidate's names bound to proxies that
  send ``[name, args, kwargs]`` straight to its paired C and decode the plain answers; it ends
  by sending the worker ``["done", token]`` or ``["fail", message]`` on a pipe C does not hold.
  No candidate code ever runs in T.

Stdlib-only: the jail worker runs it from source.
"""

from __future__ import annotations

import builtins
import gc
import os
import resource
import signal
import socket
import struct
import sys

try:  # on the host; in the jail these modules are prepended as source
    from sandbox.plain import NotPlain, decode, encode
    from sandbox.seccomp import install, prepare
    from sandbox.wire import Closed, Reader, write_frame
except ImportError:  # pragma: no cover - only inside the jail
    pass

PRELOAD = ''  # replaced by the host with split.TEST_PRELUDE (stdlib imports only)
LIMIT_NAMES = {"mem": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "fsize": "RLIMIT_FSIZE",
               "nofile": "RLIMIT_NOFILE", "nproc": "RLIMIT_NPROC", "core": "RLIMIT_CORE"}


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    except BaseException:  # a hostile __str__
        return "exception (unprintable)"


def _confine(limits: dict) -> None:
    for key, value in limits.items():
        name = LIMIT_NAMES.get(key)
        if value is not None and name and hasattr(resource, name):
            try:
                resource.setrlimit(getattr(resource, name), (value, value))
            except (ValueError, OSError):
                pass  # cannot raise a hard limit; the lower existing one stays


def candidate_main(code: str, reader: Reader, out_fd: int) -> None:
    """Body of C: run the code, then serve calls until the pipe closes."""
    ns = {"__name__": "__candidate__", "__builtins__": builtins}
    try:
        exec(compile(code, "<candidate>", "exec"), ns)
    except BaseException as exc:
        write_frame(out_fd, ["module_error", _describe(exc)])
        return
    gc.enable()  # off while loading (see blank_main); normal Python semantics for the calls
    write_frame(out_fd, ["ready"])
    while True:
        try:
            request = reader.read()
        except Closed:
            return
        # One call (relayed from a whole test) or {"batch": [call, ...]} (split tests: sent
        # at once, answered one frame per call; the worker times each test as replies come).
        for call in request["batch"] if type(request) is dict else [request]:
            write_frame(out_fd, _answer(ns, call))


def _answer(ns: dict, call) -> list:
    try:
        name, args, kwargs = call
        if name not in ns:
            raise NameError(f"name {name!r} is not defined by the candidate code")
        value = ns[name](*decode(args), **decode(kwargs))
        try:
            reply = ["ok", encode(value)]
        except NotPlain as exc:
            reply = ["bad", f"{name} returned {exc}"]
        except RecursionError:
            reply = ["bad", f"{name} returned a value nested too deeply"]
    except BaseException as exc:  # SystemExit, KeyboardInterrupt included: just data
        reply = ["raise", type(exc).__name__, _describe(exc)]
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    return reply


class CandidateError(Exception):
    """In a whole test: the candidate raised a non-builtin exception, failed to load or died."""


def test_main(msg: dict, out_fd: int, peer: tuple[int, int]) -> None:
    """Body of T: run one whole test with candidate names bound to RPC proxies. ``peer`` is
    (write end to its C, read end from its C): calls go straight to C, never through code
    that C could influence; only the final frame goes to the worker, on ``out_fd``."""
    to_cand, from_cand = peer[0], Reader(peer[1])
    state: dict = {}

    def call(name: str, args: tuple, kwargs: dict):
        try:
            payload = [name, encode(list(args)), encode(dict(kwargs))]
        except NotPlain as exc:
            raise TypeError(f"argument to {name} is not plain data ({exc})") from None
        try:
            if "loaded" not in state:  # C's first frame says whether the code loaded
                first = from_cand.read()
                state["loaded"] = first == ["ready"]
                state["why"] = str(first[1:] if isinstance(first, list) else first)[:300]
            if not state["loaded"]:
                raise CandidateError(f"candidate code did not load: {state['why']}")
            write_frame(to_cand, payload)
            reply = from_cand.read()
        except (Closed, OSError):
            state.update(loaded=False, why="candidate process died")
            raise CandidateError(f"candidate process died in {name}") from None
        if reply[0] == "ok":
            return decode(reply[1])
        if reply[0] == "raise":
            cls = getattr(builtins, str(reply[1]), None)
            if not (isinstance(cls, type) and issubclass(cls, Exception)):
                cls = CandidateError
            raise cls(str(reply[2]))
        raise TypeError(str(reply[1]))

    def proxy(name: str):
        def f(*args, **kwargs):
            return call(name, args, kwargs)
        f.__name__ = f.__qualname__ = name
        return f

    ns = {"__name__": "__test__", "__builtins__": builtins}
    gc.enable()
    try:
        exec(msg["prelude"], ns)
        ns.update({n: proxy(n) for n in msg["names"]})
        exec(compile(msg["src"], "<test>", "exec"), ns)
        for name, obj in list(ns.items()):  # def test_*(): ... runs, as under pytest
            code = getattr(obj, "__code__", None)
            if (name.startswith("test") and code is not None and code.co_filename == "<test>"
                    and code.co_argcount == 0):
                obj()
    except BaseException as exc:
        write_frame(out_fd, ["fail", _describe(exc)])
    else:
        write_frame(out_fd, ["done", msg["token"]])


def blank_main(in_fd: int, out_fd: int, use_seccomp: bool,
               peer: tuple[int, int] | None = None) -> None:
    """A blank child: seccomp now (the filter is the same for every role, and a child is
    usually forked ahead of need, so this is off the critical path), then wait for its role,
    apply its rlimits and run it."""
    if use_seccomp and not install(os.getpid()):
        os._exit(121)  # fail closed: never run untrusted code without the promised filter
    # No cyclic GC while the child sets up and loads its code: a collection there walks and
    # writes object headers, i.e. copy-on-write faults (measured ~10% of throughput).
    gc.disable()
    reader = Reader(in_fd, max_frame=1 << 30)  # the worker is trusted
    try:
        msg = reader.read()
    except Closed:
        return
    if msg.get("cwd"):
        os.chdir(msg["cwd"])
    _confine(msg["limits"])
    if msg["role"] == "candidate":
        candidate_main(msg["code"], reader, out_fd)
    elif peer is not None:
        test_main(msg, out_fd, peer)


def _own_fds(keep: set[int], log_fd: int) -> None:
    """Own process group; stdin /dev/null, stdout+stderr to ``log_fd``; close all else."""
    os.setpgid(0, 0)
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    keep = sorted(keep | {0, 1, 2})
    for lo, hi in zip(keep, keep[1:] + [65536], strict=True):
        os.closerange(lo + 1, hi)


def _fork_blank(use_seccomp: bool, in_r: int, out_w: int, log_w: int,
                peer: tuple[int, int] | None = None) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _own_fds({in_r, out_w, *(peer or ())}, log_w)
            blank_main(in_r, out_w, use_seccomp, peer)
        except BaseException:
            pass
        os._exit(0)
    return pid


def fork_server(sock: socket.socket, use_seccomp: bool) -> None:
    """Loop of the fork server. Request ``b`` -> one blank child; ``p`` -> a candidate child
    and a test child wired to each other (T writes calls into C's input, C answers T). The
    pids and the worker's ends of the pipes go back over ``sock`` (SCM_RIGHTS)."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    while True:
        try:
            request = sock.recv(1)
        except OSError:
            request = b""
        if not request:
            os._exit(0)
        c_in, c_out, c_log = os.pipe(), os.pipe(), os.pipe()
        if request == b"b":
            pid = _fork_blank(use_seccomp, c_in[0], c_out[1], c_log[1])
            ours, pids = [c_in[1], c_out[0], c_log[0]], [pid]
            spare = [c_in[0], c_out[1], c_log[1]]
        else:
            t_in, t_out, t_log = os.pipe(), os.pipe(), os.pipe()
            pid_c = _fork_blank(use_seccomp, c_in[0], c_out[1], c_log[1])
            pid_t = _fork_blank(use_seccomp, t_in[0], t_out[1], t_log[1],
                                peer=(c_in[1], c_out[0]))
            # The worker keeps C's input only to send its role (then closes it), and never
            # reads C's replies: they go to T alone.
            ours, pids = [c_in[1], c_log[0], t_in[1], t_out[0], t_log[0]], [pid_c, pid_t]
            spare = [c_in[0], c_out[1], c_log[1], c_out[0], t_in[0], t_out[1], t_log[1]]
        for fd in spare:
            os.close(fd)
        socket.send_fds(sock, [struct.pack(f"{len(pids)}i", *pids)], ours)
        for fd in ours:
            os.close(fd)


def start_fork_server(use_seccomp: bool) -> tuple[int, socket.socket]:
    """Fork the fork server now (before any job is read); returns its pid and our socket."""
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1):  # never hold the host's pipes
            os.dup2(devnull, fd)
        # compile() builds CPython's ~120 AST node types on its first use in a process
        # (~2 ms, most of a small job's cost in a child); build them here, once, for all.
        compile("", "<warm>", "exec")
        try:
            exec(PRELOAD, {})  # warm module cache for every child; no job data involved
        except Exception:
            pass
        prepare()
        gc.freeze()  # children's GC then leaves these pages alone: fewer copy-on-write faults
        fork_server(theirs, use_seccomp)
        os._exit(0)
    theirs.close()
    return pid, ours


class Forker:
    """The worker's side of the fork server: one blank child always asked for ahead of need
    (so forking overlaps the current job), and candidate/test pairs on demand."""

    def __init__(self, sock: socket.socket):
        self.sock, self.asked, self.stash = sock, False, []

    def _ask(self) -> None:
        self.sock.sendall(b"b")
        self.asked = True

    def _receive(self, pids: int, fds: int) -> tuple[list[int], list[int]]:
        data, got, _, _ = socket.recv_fds(self.sock, 64, fds)
        if len(data) != 4 * pids or len(got) != fds:
            raise OSError("fork server did not answer")
        return list(struct.unpack(f"{pids}i", data)), got

    def child(self) -> tuple[int, int, int, int]:
        """A blank child: ``(pid, in_w, out_r, log_r)``."""
        if not self.stash:
            if not self.asked:
                self._ask()
            self.stash.append(self._receive(1, 3))
            self.asked = False
        (pid,), fds = self.stash.pop()
        self._ask()
        return pid, fds[0], fds[1], fds[2]

    def pair(self) -> tuple[list[int], list[int]]:
        """``([pid_c, pid_t], [c_in_w, c_log_r, t_in_w, t_out_r, t_log_r])``."""
        self.sock.sendall(b"p")
        if self.asked:  # answers come in order: the single asked for earlier is first
            self.stash.append(self._receive(1, 3))
            self.asked = False
        return self._receive(2, 5)
