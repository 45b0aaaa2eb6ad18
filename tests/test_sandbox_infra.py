"""The harness's own failures are never the candidate's, and code cannot pass its own for one.

- A step's budgets (``jailside.worker._Step``): CPU seconds of the candidate and test
  processes, and seconds spent neither running nor waiting for a CPU. A process kept off the
  CPU by *other* processes uses neither; only the wall-clock backstop ends its step, as
  ``Starved`` (the host runs the job again), never as a verdict. Code that sleeps or spins
  its own threads uses one of the budgets and gets ``timeout``.
- A job whose worker died or starved is run again alone on a fresh worker (``pool``); the same
  twice is the job's own doing (``crashed``, ``timeout``); ``infra`` only when no fresh worker
  starts at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sandbox import Limits, Sandbox
from sandbox import pool as pool_module
from sandbox.jailside import worker

HOG = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"
OK = ("def f():\n    return 1\n", ["assert f() == 1", "assert f() == 2"])
needs_schedstat = pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"),
                                     reason="needs schedstats")


class Watched:
    """What ``_Step`` reads of a pair (``worker.Pair``), for one host process."""

    def __init__(self, pid: int):
        self.pid = pid

    def used_cpu(self) -> float:
        return worker.cpu_seconds(self.pid) or 0.0

    def waited(self) -> float:
        return worker.run_queue_seconds(self.pid)


def _pinned(code: str) -> subprocess.Popen:
    """A Python process pinned to CPU 0 (so a few of them compete for one core)."""
    return subprocess.Popen([sys.executable, "-c", code],
                            preexec_fn=lambda: os.sched_setaffinity(0, {0}))


def _watch(proc: subprocess.Popen, timeout: float, backstop: float, limit_s: float):
    """``_Step.over`` polled every 50 ms: its verdict, the ``Starved`` it raised, or None
    after ``limit_s`` seconds."""
    step = worker._Step(0, Watched(proc.pid))
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            verdict = step.over(timeout, backstop)
        except worker.Starved as exc:
            return exc
        if verdict is not None:
            return verdict
    return None


@needs_schedstat
def test_a_step_starved_by_other_processes_is_handed_back_not_judged():
    # Four busy processes share one core with the target: it is runnable all the time but
    # gets at most a fifth of that core, so in 1.5 s of wall clock it uses at most 0.3 s of
    # CPU (under the 1 s budget) and is never idle: only the backstop ends the step.
    hogs = [_pinned(HOG.format(s=10)) for _ in range(4)]
    target = _pinned(HOG.format(s=10))
    try:
        outcome = _watch(target, timeout=1.0, backstop=1.5, limit_s=20)
    finally:
        for p in [*hogs, target]:
            p.kill()
            p.wait()
    assert isinstance(outcome, worker.Starved), outcome
    assert "overloaded" in str(outcome)


@needs_schedstat
@pytest.mark.parametrize("code, verdict", [
    ("import time\ntime.sleep(30)\n", "neither running nor waiting"),  # its own choice
    # busy threads of its own wait for each other on the run queue, but the process uses
    # the CPU it is given: that is CPU time, and the CPU budget runs out
    ("import threading, time\n"
     "def spin():\n    t = time.time()\n    while time.time() - t < 30: pass\n"
     "ts = [threading.Thread(target=spin) for _ in range(8)]\n"
     "[t.start() for t in ts]\n[t.join() for t in ts]\n", "of CPU"),
], ids=["sleep", "own-threads"])
def test_code_cannot_make_its_own_timeout_look_like_starvation(code, verdict):
    target = _pinned(code)
    try:
        outcome = _watch(target, timeout=0.5, backstop=60, limit_s=60)
    finally:
        target.kill()
        target.wait()
    assert isinstance(outcome, str) and verdict in outcome, outcome


def _failing_receive(monkeypatch, failures: list[str]) -> None:
    """The next ``len(failures)`` replies fail in the harness with these messages."""
    real = pool_module.HostWorker.receive

    def receive(self, budget_s):
        if failures:
            raise pool_module.WorkerFailed(failures.pop(0))
        return real(self, budget_s)

    monkeypatch.setattr(pool_module.HostWorker, "receive", receive)


def test_a_job_whose_worker_failed_once_is_run_again_alone_and_judged(monkeypatch):
    with Sandbox(workers=1) as box:
        assert box.execute(*OK).passed == 1
        _failing_receive(monkeypatch, ["worker died (simulated)"])
        result = box.execute(*OK)
    assert [o.status for o in result.outcomes] == ["passed", "failed"]
    assert result.attempts == 2 and result.infra == 0


@pytest.mark.parametrize("failure, charged", [("worker died (simulated)", "crashed"),
                                              ("starved: simulated", "timeout")])
def test_a_job_that_breaks_its_worker_twice_is_charged_never_infra(monkeypatch, failure,
                                                                     charged):
    with Sandbox(workers=1) as box:
        assert box.execute(*OK).passed == 1
        _failing_receive(monkeypatch, [failure, failure])
        result = box.execute(*OK)
        assert [o.status for o in result.outcomes] == [charged, charged]
        assert result.attempts == 2 and result.infra == 0
        assert "second time alone in a fresh jail" in result.outcomes[0].message
        assert box.execute(*OK).passed == 1  # and the pool goes on


def test_a_jail_that_stops_starting_gives_infra_once_it_had_started(monkeypatch):
    with Sandbox(workers=1) as box:
        assert box.execute(*OK).passed == 1

        def cannot_start(level):
            raise pool_module.SandboxError("bwrap failed to start (simulated)")

        # The running worker reads as dead, and no new one starts.
        monkeypatch.setattr(pool_module.HostWorker, "alive", lambda self: False)
        monkeypatch.setattr(pool_module, "HostWorker", cannot_start)
        result = box.execute(*OK)
    assert [o.status for o in result.outcomes] == ["infra", "infra"]
    assert result.infra == 2 and result.passed == 0
    assert "failed to start" in result.outcomes[0].message


def test_every_result_records_the_limits_it_ran_under():
    with Sandbox(workers=1, limits=Limits(memory_mb=256)) as box:
        result = box.execute(*OK, timeout_s=1.5)
        other = box.execute(*OK, Limits(timeout_s=3.0, max_output_bytes=1024))
        third = box.execute(*OK, Limits(memory_mb=300, max_output_bytes=2048))
    assert result.limits["timeout_s"] == 1.5 and result.limits["memory_mb"] == 256
    assert {"fsize_mb", "nofile", "max_output_bytes"} <= set(result.limits)
    assert other.limits["timeout_s"] == 3.0 and other.limits["max_output_bytes"] == 1024
    assert other.limits["memory_mb"] == Limits().memory_mb
    assert (third.limits["memory_mb"], third.limits["max_output_bytes"]) == (300, 2048)
    assert third.limits["timeout_s"] == Limits().timeout_s
