"""The jail-side worker: a warm process (the jail's pid 1) that runs jobs and never runs
untrusted code itself.

At start it forks the two fork servers (``forkserver``), then reads jobs from the host. A job
is one pytest *session*: a candidate process (C) with the code and a test process (T) with the
test modules, wired to each other. The worker only watches:

- T's reports (a pipe C does not hold): which module pytest is collecting or running, each
  item's outcome, and ``done``;
- the *work* each step of the session costs. A step is the candidate's import, one module's
  collection, or one module's run. Its budget is ``timeout`` seconds of CPU used by C and T
  together (all their threads), plus ``timeout`` seconds spent neither running nor waiting for
  a CPU (sleeping, blocked): either overrun is the step's ``timeout``, charged to it whatever
  the load on the machine, because time spent waiting on the run queue counts to neither.
  The boundary's own work is not the candidate's: ``TRIP_CPU_S`` for each round trip T
  reports having started in the step (``trips``, up to ``TRIP_CREDIT`` times ``timeout``) is
  taken off the CPU charged, so a test that calls a trivial function 200,000 times is judged
  as pytest judges it. T counts only the requests it starts itself (``rpc``), so C cannot
  raise the allowance, and a test that forges its count speaks only for its own module.
  A step that still has not finished after ``backstop`` seconds of wall clock without having
  used either budget was starved by the host: the job is handed back as ``starved`` (the host
  runs it again; a clock never decides a verdict);
- C's and T's lives: a process that dies (or a frame C sends that T must refuse) ends the
  session with that module's verdict (``crashed``, ``error``); modules not yet decided run in a
  fresh session with a fresh pair, as do the ones after a timeout.

Replies to the host are small: per module its items and at most a status and a message, so
nothing a job contains can make the reply large.

The host launches ``python -I -S -B -c "...; main()"`` with this package on ``sys.path``;
writable scratch folders come in ``SANDBOX_SCRATCH`` and are emptied after every job (or the
worker exits, to be replaced).
"""

from __future__ import annotations

import os
import signal
import time

from . import forkserver, ipc, reports, seccomp
from .reports import Malformed, Module
from .wire import Closed, Reader, Refused, Sink, Timeout, send, write_frame

TICK_S = 0.02
BEAT_S = 2.0
MAX_THREADS_READ = 256
# CPU one round trip T starts costs C and T together when the call itself does nothing (the
# encoding, the pipes, the decoding on both sides): above what an empty call through the jail
# costs, at its highest across host states (a virtual machine whose idle CPUs are woken for
# each trip, busy neighbours), with margin; docs/sandbox.md ("Budgets, clocks and who is
# charged") has the measure. Not billed to a step (``_Step.over``).
TRIP_CPU_S = 300e-6
# The round trips' allowance of a step, at most this many times its ``timeout``: a test
# making millions of calls still times out.
TRIP_CREDIT = 30
# Time neither C nor T runs nor waits for a CPU in one round trip (the pipe's wake-ups of an
# idle CPU): above what an empty call through the jail waits on a quiet host, with margin.
# Not billed to a step's idle budget either.
TRIP_IDLE_S = 60e-6


def cpu_seconds(pid: int) -> float | None:
    """CPU time of a whole process (every thread, living or ended)."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return None


def run_queue_seconds(pid: int) -> float:
    """Time a process's threads spent runnable but waiting for a CPU."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")[:MAX_THREADS_READ]
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                total += int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


class Pair:
    """A candidate process and a test process wired to each other, from the fork servers."""

    def __init__(self, cand: tuple[int, list[int]], test: tuple[int, list[int]], cap: int):
        (self.c_pid, (self.c_role, c_log)), (self.t_pid, (self.t_role, t_log, t_out)) = \
            cand, test
        self.c_log, self.t_log = Sink(c_log, cap), Sink(t_log, 0)
        self.t_out = t_out
        os.set_blocking(self.c_role, False)  # our own ends: a child that stops reading
        os.set_blocking(self.t_role, False)  # cannot block us (wire.send waits on select)
        self.cpu = {self.c_pid: 0.0, self.t_pid: 0.0}

    def pids(self) -> tuple[int, int]:
        return self.c_pid, self.t_pid

    def used_cpu(self) -> float:
        for pid in self.pids():
            value = cpu_seconds(pid)
            if value is not None:
                self.cpu[pid] = value
        return sum(self.cpu.values())

    def waited(self) -> float:
        return sum(run_queue_seconds(pid) for pid in self.pids())

    def kill(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def close(self) -> None:
        self.kill()
        for fd in (self.c_role, self.t_role, self.t_out, self.c_log.fd, self.t_log.fd):
            try:
                os.close(fd)
            except OSError:
                pass


class Forker:
    """Pairs, always one asked for ahead of need."""

    def __init__(self, cand: forkserver.Client, test: forkserver.Client):
        self.cand, self.test = cand, test
        self.asked = False

    def _ask(self) -> None:
        c_from_t, t_to_c = os.pipe()
        t_from_c, c_to_t = os.pipe()
        self.cand.ask([c_from_t, c_to_t])
        self.test.ask([t_from_c, t_to_c])
        for fd in (c_from_t, t_to_c, t_from_c, c_to_t):
            os.close(fd)
        self.asked = True

    def pair(self, cap: int) -> Pair:
        if not self.asked:
            self._ask()
        pair = Pair(self.cand.receive(), self.test.receive(), cap)
        self.asked = False
        self._ask()
        return pair

    @property
    def pidns(self) -> bool:
        return self.cand.pidns and self.test.pidns


class Starved(Exception):
    """A step ran out of wall clock without using its budgets: the host was overloaded."""


class Job:
    """One job: ``{"code", "tests", "shared", "timeout", "limits", "out_cap", "backstop"}``.

    ``shared`` lists the trusted test modules (``sandbox.Trusted``): they run in one session,
    as one pytest run over their files. Every other module runs in a session of its own,
    with a fresh C and T, the scratch folders emptied and (where the children share the
    worker's IPC namespace) every IPC object removed after it: nothing one untrusted test
    string does reaches another's verdict."""

    def __init__(self, msg: dict, forker: Forker, cwd: str, beat,
                 scratch: list[str] | None = None):
        self.msg, self.forker, self.cwd, self.beat = msg, forker, cwd, beat
        self.scratch = scratch or []
        self.timeout = float(msg["timeout"])
        self.backstop = float(msg.get("backstop") or max(30.0, 20 * self.timeout))
        budget = reports.module_budget(len(msg["tests"]))
        self.modules = [Module(budget) for _ in msg["tests"]]
        self.cap = int(msg.get("out_cap", 65536))
        self.output = bytearray()
        self.sessions = 0
        self.cpu = {"candidate": 0.0, "tests": 0.0}  # CPU seconds of its Cs and Ts

    def groups(self) -> list[list[int]]:
        """The modules of each session to run: the trusted ones together, then each other
        module alone, in job order."""
        shared = sorted({i for i in self.msg.get("shared") or []
                         if type(i) is int and 0 <= i < len(self.modules)})
        alone = [[i] for i in range(len(self.modules)) if i not in set(shared)]
        return ([shared] if shared else []) + alone

    def run(self) -> dict:
        try:
            for group in self.groups():
                while True:
                    pending = [i for i in group if not self.modules[i].done]
                    if not pending:
                        break
                    self.session(pending)
        except Starved as exc:
            return {"starved": str(exc), "output": self._output()}
        return {"tests": [m.reply() for m in self.modules], "output": self._output(),
                "sessions": self.sessions, "pidns": self.forker.pidns,
                "cpu_s": round(sum(self.cpu.values()), 6),
                "cpu": {k: round(v, 6) for k, v in self.cpu.items()}}

    def _output(self) -> str:
        return self.output.decode("utf-8", "replace")

    def session(self, pending: list[int]) -> None:
        self.sessions += 1
        for i in pending:  # what an earlier session collected of them is collected again
            self.modules[i].restart()
        pair = self.forker.pair(self.cap)
        limits = dict(self.msg["limits"])
        # The backstop of the steps: each its budget and the round trips' allowance at most.
        limits["cpu"] = int(self.timeout * (1 + TRIP_CREDIT) * (2 * len(pending) + 1)) + 5
        try:
            sinks = [pair.c_log, pair.t_log]
            # Fresh children that do not take their role within the backstop were not run
            # by the host: no verdict comes of it, the job is handed back (``Starved``).
            deadline = time.monotonic() + self.backstop
            try:
                send(pair.c_role, {"code": self.msg["code"], "limits": limits,
                                   "cwd": self.cwd}, deadline, sinks)
                send(pair.t_role, {"tests": [[i, self.msg["tests"][i]] for i in pending],
                                   "limits": limits, "cwd": self.cwd}, deadline, sinks)
            except (Timeout, Closed) as exc:
                raise Starved(f"a fresh session did not take its job ({type(exc).__name__}): "
                              "the host was overloaded") from None
            self.watch(pair, pending)
        finally:
            pair.used_cpu()
            self.cpu["candidate"] += pair.cpu[pair.c_pid]
            self.cpu["tests"] += pair.cpu[pair.t_pid]
            pair.close()
            self._keep_output(bytes(pair.c_log.data))
            self._scrub()

    def _keep_output(self, data: bytes) -> None:
        """The candidate's output, capped; every session imports the candidate afresh, so
        what a session prints exactly as the one before is not kept twice."""
        room = self.cap - len(self.output)
        if room > 0 and data and not self.output.endswith(data):
            self.output += data[:room]

    def _scrub(self) -> None:
        """Nothing a session leaves reaches the next: files in the scratch folders go, and
        so do IPC objects where the children share the worker's IPC namespace (with pid
        namespaces each child has an IPC namespace of its own, gone with it)."""
        for folder in self.scratch:
            _clean(folder)
        if not self.forker.pidns:
            ipc.remove_all()

    def watch(self, pair: Pair, pending: list[int]) -> None:
        reader = Reader(pair.t_out, [pair.c_log, pair.t_log], max_frame=reports.MAX_FRAME)
        session = reports.Session(pending)
        step = _Step(-1, pair)
        trips = 0  # the round trips T reports having started so far (``reports.parse``)
        last_beat = time.monotonic()
        while True:
            try:
                frame = reader.read(time.monotonic() + TICK_S)
            except Timeout:
                frame = None
            except Refused as exc:  # T is alive but sent what no T of this judge sends
                pair.kill()
                self._end(step, pending, "error", f"the test process sent {exc}")
                return
            except Closed:  # T died: the module at hand crashed
                self._end(step, pending, "crashed", "the test process died")
                return
            now = time.monotonic()
            if now - last_beat > BEAT_S:
                self.beat()
                last_beat = now
            if frame is None:
                verdict = step.over(self.timeout, self.backstop, trips)
                if verdict is not None:
                    pair.kill()
                    self._end(step, pending, "timeout", verdict)
                    return
                continue
            try:
                report = session.take(frame)
            except Malformed as exc:
                pair.kill()
                self._end(step, pending, "error", f"the test process sent {exc}")
                return
            kind = report[0]
            if kind == "done":
                self._close(step)
                for i in pending:
                    self.modules[i].done = True
                return
            if kind in ("phase", "trips"):  # a test calling the candidate all the time
                if kind == "trips":         # sends ``trips`` more often than every tick
                    trips = report[1]
                verdict = step.over(self.timeout, self.backstop, trips)
                if verdict is not None:
                    pair.kill()
                    self._end(step, pending, "timeout", verdict)
                    return
                if kind == "phase":
                    self._close(step)
                    step = _Step(report[1], pair, report[2] == "run", trips)
            elif kind == "item":
                self.modules[report[1]].add(report[2])
            elif kind == "body":
                self.modules[report[1]].body = report[2]
            else:  # "stop": the candidate process died or broke the protocol, or pytest did
                pair.kill()
                self._end(step, pending, report[1], report[2])
                return

    def _close(self, step: _Step) -> None:
        if step.index >= 0:
            self.modules[step.index].duration += time.monotonic() - step.wall0

    def _end(self, step: _Step, pending: list[int], status: str, message: str) -> None:
        """The session ended at ``step``: that module (or, at the import, every pending one)
        gets ``status``; the modules the session finished stay decided."""
        self._close(step)
        if step.index < 0:
            what = {"timeout": f"the candidate did not finish importing: {message}",
                    "crashed": "the candidate process died while importing"}.get(
                        status, message)
            for i in pending:
                self.modules[i].status, self.modules[i].message = status, what
                self.modules[i].done = True
            return
        culprit = self.modules[step.index]
        culprit.status, culprit.message, culprit.done = status, message, True
        culprit.restart()
        if step.running:  # modules run before the culprit have finished
            for i in pending:
                if i == step.index:
                    break
                self.modules[i].done = True


class _Step:
    """Budgets of one step (see the module docstring)."""

    def __init__(self, index: int, pair: Pair, running: bool = False, trips: int = 0):
        self.index, self.pair, self.running = index, pair, running
        self.wall0 = time.monotonic()
        self.cpu0 = pair.used_cpu()
        self.trips0 = trips  # the session's round trips so far
        self.wait0: float | None = None
        self.idle_from = self.cpu_at = 0.0

    def over(self, timeout: float, backstop: float, trips: int = 0) -> str | None:
        """``trips``: the session's round trips so far, as T last reported them."""
        wall = time.monotonic() - self.wall0
        cpu = self.pair.used_cpu() - self.cpu0
        trips = max(0, trips - self.trips0)
        credit = min(cpu, TRIP_CPU_S * trips, TRIP_CREDIT * timeout)  # the boundary's work
        if cpu - credit > timeout:
            if not trips:
                return f"used {cpu:.2f}s of CPU (limit {timeout:g}s)"
            return (f"used {cpu:.2f}s of CPU, {cpu - credit:.2f}s beyond the "
                    f"{credit:.2f}s allowed for its {trips} round trips to the candidate "
                    f"(limit {timeout:g}s)")
        if wall < 0.05:
            return None
        if self.wait0 is None:  # first look at the run queue: the baseline
            self.wait0, self.idle_from, self.cpu_at = self.pair.waited(), wall, cpu
            return None
        idle = (wall - self.idle_from) - (cpu - self.cpu_at) - (self.pair.waited() - self.wait0)
        # each round trip wakes C and then T: the wake-up's latency is the boundary's too
        lag = max(0.0, min(idle, TRIP_IDLE_S * trips, TRIP_CREDIT * timeout))
        if idle - lag > timeout:
            allowed = f"{lag:.2f}s of it allowed for its {trips} round trips; " if trips else ""
            return (f"spent {idle:.2f}s neither running nor waiting for a CPU "
                    f"(sleeping or blocked; {allowed}limit {timeout:g}s)")
        if wall - credit - lag > backstop:  # the boundary's time was work, not starvation
            raise Starved(f"a step ran {wall:.1f}s of wall clock using {cpu:.2f}s of CPU: "
                          "the host was overloaded")
        return None


def _clean(root: str, limit: int = 2000) -> bool:
    """Empty a scratch folder between jobs, so nothing one job leaves reaches the next.
    False if it is not empty afterwards or holds more than ``limit`` entries: the worker then
    exits and the host starts a fresh one (fresh tmpfs)."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        seen += len(filenames) + len(dirnames)
        if seen > limit:
            return False
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    os.chmod(path, 0o700)
                    os.rmdir(path)
                else:
                    os.unlink(path)
            except OSError:
                pass
    try:
        return not os.listdir(root)
    except OSError:
        return True


def main(site: str, placeholder_dir: str) -> None:
    from . import candidate, testproc  # jail-side: imported only once the jail is set up

    seccomp.set_undumpable()  # before forking: children inherit it
    use_seccomp = seccomp.supported()
    if use_seccomp:  # probe once: the kernel may refuse filters (old kernel, nested seccomp)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if seccomp.install(os.getpid()) else 1)
        use_seccomp = os.waitpid(pid, 0)[1] == 0
    # Under bubblewrap we are the jail's pid 1: orphans come to us, and the kernel reaps the
    # children of a process that ignores SIGCHLD. Signals that would stop us are ignored.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGPIPE, signal.SIGIO, signal.SIGURG):
        signal.signal(sig, signal.SIG_IGN)

    def candidate_child(role: dict, out_fd: int, peer: list[int]) -> None:
        standard_library_only(site)
        candidate.candidate_main(role["code"], peer[0], peer[1])

    def test_child(role: dict, out_fd: int, peer: list[int]) -> None:
        testproc.test_main(role, out_fd, peer[0], peer[1])

    def prepare_candidate() -> None:
        import importlib  # jail-side: in the candidate fork server only

        for name in forkserver.CANDIDATE_PRELOAD:
            try:
                importlib.import_module(name)
            except Exception:
                pass

    _, cand_sock = forkserver.start(candidate_child, prepare_candidate, use_seccomp, False)
    _, test_sock = forkserver.start(test_child, lambda: testproc.prepare(placeholder_dir),
                                    use_seccomp, True)
    seccomp.drop_capabilities()  # only the fork servers needed them (pid namespaces)
    forker = Forker(forkserver.Client(cand_sock, False), forkserver.Client(test_sock, True))
    scratch = [d for d in os.environ.get("SANDBOX_SCRATCH", "").split(":") if os.path.isdir(d)]
    cwd = scratch[0] if scratch else "/"
    write_frame(1, {"hello": {"seccomp": use_seccomp, "uid": os.getuid(), "pid": os.getpid()}})
    reader = Reader(0, max_frame=1 << 30)  # the host is trusted
    while True:
        try:
            msg = reader.read()
        except Closed:
            os._exit(0)
        started = time.monotonic()
        job = Job(msg, forker, cwd, lambda: write_frame(1, {"beat": 1}), scratch)
        reply = job.run()
        reply["clean"] = all(_clean(d) for d in scratch)
        reply["busy_s"] = time.monotonic() - started
        write_frame(1, reply)
        if not reply["clean"]:
            os._exit(3)  # something could not be removed: the host starts a fresh worker


def standard_library_only(site: str) -> None:
    """The candidate imports from the standard library only (pytest and the judge's own
    modules are on the test process's path, not on the candidate's)."""
    import sys  # jail-side: imported only once the jail is set up

    sys.path[:] = [p for p in sys.path if p and p != site and not p.startswith(site + "/")]
