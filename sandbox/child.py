"""Processes that run untrusted code, and the fork server that makes them *blank*.

The fork server is forked by the worker before it reads any job, so it (and every child it
forks) holds no test, no expected value, no reference solution and no other candidate's code
in memory: a child learns only what its first frame tells it. A child then applies rlimits and
the seccomp filter and becomes either

- a candidate process (C): runs the candidate code, says ``["ready", {"exc": its exception
  classes}]`` or ``["module_error", why]``, then answers each ``[name, args, kwargs]`` with
  ``["ok", plain]`` (plus, for a whole test's call, the mutable arguments it changed),
  ``["raise", type, args, ancestry, fatal]`` or ``["bad", why]``. An iterator it returns is
  drawn here, bounded, and travels as ``{"it": [items, end]}``; or
- a test process (T, ``testrun``): runs one whole test with the candidate's names bound to
  proxies that talk straight to its paired C; it reports to the worker on a pipe C does not
  hold. No candidate code ever runs in T.

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
    from sandbox.testrun import _describe, test_main
    from sandbox.wire import Closed, Reader, write_frame
except ImportError:  # pragma: no cover - only inside the jail
    pass

PRELOAD = ''  # replaced by the host with split.TEST_PRELUDE (stdlib imports only)
PYTEST_SHIM = ''  # replaced by the host with the source of sandbox/pytest_shim.py
MAX_ITER_ITEMS = 100_000  # items drawn from an iterator a candidate returns
LIMIT_NAMES = {"mem": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "fsize": "RLIMIT_FSIZE",
               "nofile": "RLIMIT_NOFILE", "nproc": "RLIMIT_NPROC", "core": "RLIMIT_CORE"}


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
    write_frame(out_fd, ["ready", {"exc": _exception_classes(ns)}])
    while True:
        try:
            request = reader.read()
        except Closed:
            return
        # One call (relayed from a whole test, whose arguments may be written back) or
        # {"batch": [call, ...]} (split tests: sent at once, answered one frame per call; the
        # worker times each test as replies come; literal arguments, nothing to write back).
        if type(request) is dict:
            for call in request["batch"]:
                write_frame(out_fd, _answer(ns, call, False))
        else:
            write_frame(out_fd, _answer(ns, request, True))


def _is_builtin(cls: type) -> bool:
    return getattr(builtins, cls.__name__, None) is cls


def _exception_classes(ns: dict) -> dict:
    """The candidate's own exception classes -> their ancestors' names (candidate or builtin,
    nearest first), so whole tests can catch them by name or by builtin base."""
    out = {}
    for name, obj in list(ns.items())[:10000]:
        if (type(obj) is type and issubclass(obj, BaseException) and not _is_builtin(obj)
                and len(out) < 200):
            out[name] = [c.__name__ for c in obj.__mro__[1:]
                         if _is_builtin(c) or ns.get(c.__name__) is c][:20]
    return out


def _fatal(exc: BaseException) -> bool:
    """Exceptions no test may catch as an ordinary outcome: anything not an ``Exception``
    (``SystemExit``, ``KeyboardInterrupt``, ...), control flow that would silently end a
    test's loop (``StopIteration``), and running out of memory (the limit, not a result)."""
    return not issubclass(type(exc), Exception) or issubclass(
        type(exc), StopIteration | StopAsyncIteration | MemoryError)


def _raised(ns: dict, exc: BaseException) -> list:
    cls = type(exc)
    try:
        args = encode(list(exc.args))
    except BaseException:  # non-plain or hostile args: the message stands in
        args = [_describe(exc).partition(": ")[2]]
    ancestry = [c.__name__ for c in cls.__mro__[1:] if _is_builtin(c) or ns.get(c.__name__) is c]
    return ["raise", cls.__name__, args, ancestry[:20], _fatal(exc)]


def _encode_iterator(ns: dict, value) -> dict:
    """An iterator/generator the candidate returned, drawn here (bounded) so the test can
    iterate it: ``{"it": [items, end]}``; ``end`` is None (exhausted), ``["more"]`` (over
    ``MAX_ITER_ITEMS``) or a ``_raised`` list."""
    items, end = [], None
    try:
        while True:
            if len(items) >= MAX_ITER_ITEMS:
                end = ["more"]
                break
            try:
                item = next(value)
            except StopIteration:
                break
            items.append(encode(item))
    except NotPlain:
        raise
    except BaseException as exc:
        end = _raised(ns, exc)
    return {"it": [items, end]}


def _answer(ns: dict, call, write_back: bool) -> list:
    try:
        name, args_data, kwargs_data = call
        if name not in ns:
            raise NameError(f"name {name!r} is not defined by the candidate code")
        args, kwargs = decode(args_data), decode(kwargs_data)
        value = ns[name](*args, **kwargs)
        try:
            if hasattr(type(value), "__next__"):  # a generator or other iterator
                reply = ["ok", _encode_iterator(ns, value)]
            else:
                reply = ["ok", encode(value)]
            if write_back:
                changed = _changed(args, args_data, kwargs, kwargs_data)
                if changed:
                    reply.append({"d": changed})
        except NotPlain as exc:
            reply = ["bad", f"{name} returned {exc}"]
        except RecursionError:
            reply = ["bad", f"{name} returned a value nested too deeply"]
    except BaseException as exc:  # SystemExit, KeyboardInterrupt included: just data
        reply = _raised(ns, exc)
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    return reply


def _changed(args: list, args_data: list, kwargs: dict, kwargs_data: dict) -> list:
    """Mutable arguments whose content the call changed, as encoded ``[index or name, new
    value]`` pairs (raises NotPlain if the candidate put non-plain data into one)."""
    changed: list = []
    for key, value, sent in [*((i, a, args_data[i]) for i, a in enumerate(args)),
                             *((k, v, kwargs_data.get("d")) for k, v in kwargs.items())]:
        if type(value) not in (list, dict, set):
            continue
        now = encode(value)
        if isinstance(key, str):  # kwargs travel as {"d": [[key, value], ...]}
            sent = next((v for k, v in (sent or ()) if k == key), None)
        if now != sent:
            changed.append([key, now])
    return changed


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


def _install_pytest_shim() -> None:
    """``import pytest`` in a test gets the vetted shim (raises, approx, mark.parametrize,
    fixture, ...): the real pytest is not in the jail, and models write these constantly."""
    if PYTEST_SHIM:
        module = type(sys)("pytest")
        exec(compile(PYTEST_SHIM, "pytest_shim", "exec"), module.__dict__)
        sys.modules["pytest"] = module


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
            _install_pytest_shim()
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
