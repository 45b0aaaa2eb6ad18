"""The jail-side worker: a warm Python process (inside bubblewrap) that runs jobs.

It imports only the standard library and never runs untrusted code itself. At start it forks a
fork server (see ``child``) whose blank children run candidate code (C) and whole tests (T).
Per job it

- for split tests: sends C the code and, right behind it, every call of the split tests
  (name + literal arguments; never expected values). C answers one frame per call; each test's
  clock starts when the previous test's answers are in. The replies go back to the host as raw
  JSON, which the host decodes strictly and judges. A test that overruns its limit or crashes
  C is recorded and C is replaced by a fresh one for the next test;
- for a whole test: asks for a wired pair, gives C the code and T the test (with the job's
  random token), and waits for T's final frame. T calls C directly; C's answers reach T only.

The host launches this file's source with ``plain``, ``seccomp``, ``wire`` and ``child``
prepended, via ``python -I -S -B -c``; writable scratch folders come in ``SANDBOX_SCRATCH``
and are emptied after every job (or the worker exits, to be replaced).
"""

from __future__ import annotations

import os
import signal
import time

try:  # on the host; in the jail these modules are prepended as source
    from sandbox.child import Forker, start_fork_server
    from sandbox.seccomp import install, set_undumpable, supported
    from sandbox.wire import MAX_JOB_VALUES, Closed, Reader, Sink, Timeout, send, write_frame
except ImportError:  # pragma: no cover - only inside the jail
    pass


def starvation(pids: list[int], wall_s: float) -> str | None:
    """Why a timed-out process was the host's fault, or None. Starved means it was runnable
    but waited on the run queue for over half the time and ran under half of it: the machine
    was overloaded. A process that slept or blocked waits on nothing (its fault), and one that
    spawned busy threads has used the CPU itself (its fault too): neither reads as starved,
    so code cannot buy an ``infra`` verdict that masks its failure."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat", "rb") as fh:
                ran_ns, waited_ns = (int(x) for x in fh.read().split()[:2])
        except (OSError, ValueError):
            continue  # no /proc or schedstats: a timeout stays a timeout (fail closed)
        try:  # the process's CPU clock: all its threads
            cpu_s = time.clock_gettime(((~pid) << 3) | 2)
        except OSError:
            cpu_s = ran_ns / 1e9
        if waited_ns / 1e9 > 0.5 * wall_s and cpu_s < 0.5 * wall_s:
            return (f"host overloaded: a sandbox process waited {waited_ns / 1e9:.2f}s for a "
                    f"CPU and ran {cpu_s:.2f}s in {wall_s:.2f}s (not the code's failure)")
    return None


class Child:
    """A blank child, seen from the worker."""

    def __init__(self, forker: Forker, sinks: list[Sink], cap: int):
        self.pid, self.in_w, out_r, log_r = forker.child()
        self.started = time.monotonic()
        os.set_blocking(self.in_w, False)
        self.log = Sink(log_r, cap)
        sinks.append(self.log)
        self.reader = Reader(out_r, sinks)

    def stop(self) -> None:
        for fn in (os.killpg, os.kill):
            try:
                fn(self.pid, signal.SIGKILL)
            except OSError:
                pass
        for fd in (self.in_w, self.reader.fd, self.log.fd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.log in self.reader.sinks:
            self.reader.sinks.remove(self.log)


class Job:
    """One job: the candidate code and its tests, run in order."""

    def __init__(self, msg: dict, forker: Forker, cwd: str):
        self.msg, self.forker = msg, forker
        self.timeout = float(msg["timeout"])
        self.sinks: list[Sink] = []
        self.output = bytearray()
        self.cap = int(msg.get("out_cap", 65536))
        self.limits = dict(msg["limits"])
        self.cwd = cwd
        self.cand: Child | None = None
        self.load_error: dict | None = None
        self.carried = 0  # bytes of return values in this job's reply so far

    def _child(self, role: dict, cap: int, cpu: int, deadline: float) -> Child:
        child = Child(self.forker, self.sinks, cap)
        role = dict(role, limits=dict(self.limits, cpu=cpu), cwd=self.cwd)
        try:
            send(child.in_w, role, deadline, self.sinks)
        except (Timeout, Closed):
            self._release(child)
            raise
        return child

    def _release(self, child: Child | None) -> None:
        if child is not None:
            if child.log.cap:
                room = self.cap - len(self.output)
                self.output += child.log.data[: max(room, 0)]
            child.stop()

    def _candidate(self, deadline: float, cpu: int, batch: list | None = None
                   ) -> tuple[Child, list]:
        """A loaded candidate process and its first frame (``["ready"]`` or an error).
        ``batch`` (calls) is queued right behind the code, saving a round trip."""
        child = self._child({"role": "candidate", "code": self.msg["code"]}, self.cap, cpu,
                            deadline)
        try:
            if batch is not None:
                send(child.in_w, {"batch": batch}, deadline, self.sinks)
            return child, child.reader.read(deadline)
        except (Timeout, Closed) as exc:
            if isinstance(exc, Timeout):
                exc.starved = starvation([child.pid], time.monotonic() - child.started)
            self._release(child)
            raise

    def run_split(self, index: int) -> dict:
        calls = self.msg["tests"][index]["calls"]
        if self.load_error is not None:
            return self.load_error
        t0 = time.monotonic()
        if self.cand is None:
            cpu = int(self.timeout * (len(self.msg["tests"]) + 1)) + 2
            # Every call of this and the later split tests goes at once: C answers one frame
            # per call and the clock of each test starts when the previous test's answer came.
            batch = [c for t in self.msg["tests"][index:] if t["kind"] == "calls"
                     for c in t["calls"]]
            try:
                self.cand, first = self._candidate(t0 + self.timeout, cpu, batch)
            except (Timeout, Closed) as exc:
                status = "timeout" if isinstance(exc, Timeout) else "crashed"
                starved = getattr(exc, "starved", None)
                if starved:  # the host, not the code: this job's verdicts cannot be trusted
                    return {"status": "infra", "msg": starved}
                self.load_error = {"status": status, "msg": "candidate code did not load: " + (
                    f"exceeded {self.timeout}s" if status == "timeout" else "process died")}
                return self.load_error
            if not (isinstance(first, list) and first[:1] == ["ready"]):
                self._release(self.cand)
                self.cand = None
                self.load_error = {"status": "error",
                                   "msg": f"candidate code raised on load: {first!s:.450}"}
                return self.load_error
            t0 = time.monotonic()  # loading has its own budget; the test's starts now
        deadline = t0 + self.timeout
        values = []
        for _ in calls:
            try:
                value = self.cand.reader.read(deadline)
                self.carried += self.cand.reader.last_size
                if self.carried > MAX_JOB_VALUES:  # keeps the reply to the host bounded
                    value = ["bad", f"result too large (over {MAX_JOB_VALUES >> 20} MB per job)"]
                values.append(value)
            except (Timeout, Closed) as exc:
                starved = starvation([self.cand.pid], time.monotonic() - self.cand.started)
                self._release(self.cand)
                self.cand = None
                if isinstance(exc, Timeout):
                    if starved:
                        return {"status": "infra", "msg": starved, "dur": time.monotonic() - t0}
                    return {"status": "timeout", "msg": f"exceeded {self.timeout}s",
                            "dur": time.monotonic() - t0}
                if "limit" in str(exc):
                    return {"status": "error", "msg": f"result too large: {exc}",
                            "dur": time.monotonic() - t0}
                return {"status": "crashed", "msg": "candidate process died",
                        "dur": time.monotonic() - t0}
        return {"status": "ok", "values": values, "dur": time.monotonic() - t0}

    def run_whole(self, test: dict) -> dict:
        """A wired candidate/test pair: C gets the code, T the test; T's calls go straight to
        C; we only wait (draining both outputs) for T's final frame, or the deadline."""
        t0 = time.monotonic()
        deadline = t0 + self.timeout
        limits = dict(self.limits, cpu=int(self.timeout) + 2)
        pids, (c_in, c_log, t_in, t_out, t_log) = self.forker.pair()
        c_sink, t_sink = Sink(c_log, self.cap), Sink(t_log, 0)
        sinks = self.sinks + [c_sink, t_sink]
        poison: dict | None = None
        try:
            for fd, role in ((c_in, {"role": "candidate", "code": self.msg["code"]}),
                             (t_in, {"role": "test", "src": test["src"], "token": test["token"],
                                     "names": test["names"], "prelude": self.msg["prelude"]})):
                os.set_blocking(fd, False)
                send(fd, dict(role, limits=limits, cwd=self.cwd), deadline, sinks)
            os.close(c_in)  # from now on only T writes to C
            c_in = -1
            reader = Reader(t_out, sinks)
            while True:  # poison frames first (kept: the first one decides), then the final one
                frame = reader.read(deadline)
                if not (isinstance(frame, list) and frame[:1] == ["poison"]):
                    break
                poison = poison or {"status": "poisoned", "poison": frame[1:3]}
            return {"status": "done", "frame": frame, "dur": time.monotonic() - t0,
                    **(poison or {})}
        except Timeout:
            starved = starvation(pids, time.monotonic() - t0)
            return dict({"status": "infra", "msg": starved} if starved else
                        {"status": "timeout", "msg": f"exceeded {self.timeout}s"},
                        dur=time.monotonic() - t0, **(poison or {}))
        except Closed:
            return {"status": "crashed", "msg": "test process died",
                    "dur": time.monotonic() - t0, **(poison or {})}
        finally:
            for pid in pids:
                for fn in (os.killpg, os.kill):
                    try:
                        fn(pid, signal.SIGKILL)
                    except OSError:
                        pass
            self.output += c_sink.data[: max(self.cap - len(self.output), 0)]
            for fd in (c_in, c_log, t_in, t_out, t_log):
                if fd >= 0:
                    os.close(fd)

    def run(self) -> dict:
        results = []
        try:
            for test in self.msg["tests"]:
                if test["kind"] == "calls":
                    results.append(self.run_split(len(results)))
                else:
                    results.append(self.run_whole(test))
        finally:
            self._release(self.cand)
        return {"tests": results, "output": self.output.decode("utf-8", "replace")}


def _clean(root: str, limit: int = 2000) -> bool:
    """Empty a scratch folder between jobs, so nothing one job leaves reaches the next.
    False if it is not empty afterwards or holds more than ``limit`` entries (a job that made
    a million files): the worker then exits and the host starts a fresh one (fresh tmpfs)."""
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


def main() -> None:
    set_undumpable()  # before forking: children inherit it; no one may open our /proc files
    use_seccomp = supported()
    if use_seccomp:  # probe once: the kernel may refuse filters (old kernel, nested seccomp)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if install(os.getpid()) else 1)
        use_seccomp = os.waitpid(pid, 0)[1] == 0
    # Under bubblewrap we are the jail's pid 1 (``--as-pid-1``): orphans are reparented to us,
    # and the kernel reaps children of a process that ignores SIGCHLD.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    server_pid, sock = start_fork_server(use_seccomp)  # before any job enters our memory
    forker = Forker(sock)
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
        job = Job(msg, forker, cwd)
        reply = job.run()
        reply["clean"] = all(_clean(d) for d in scratch)
        reply["busy_s"] = time.monotonic() - started  # for throughput diagnostics
        write_frame(1, reply)
        if not reply["clean"]:
            os._exit(3)  # something could not be removed: the host starts a fresh worker


if __name__ == "__main__":
    main()
