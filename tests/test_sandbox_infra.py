"""The harness's own failures are never the candidate's: a dead worker, a jail that cannot
start and a starved process give ``infra`` verdicts, while code cannot buy one."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sandbox import Sandbox
from sandbox import pool as pool_module
from sandbox.worker import starvation

HOG = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"


def _pinned(code: str) -> subprocess.Popen:
    """A Python process pinned to CPU 0 (so a few of them compete for one core)."""
    return subprocess.Popen([sys.executable, "-c", code],
                            preexec_fn=lambda: os.sched_setaffinity(0, {0}))


@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="needs schedstats")
def test_a_process_starved_by_others_reads_as_starved():
    # Four busy processes share one core with the target: it is runnable all the time but
    # gets about a fifth of the CPU, so it waits over half the wall time and runs under half.
    hogs = [_pinned(HOG.format(s=3)) for _ in range(4)]
    target = _pinned(HOG.format(s=3))
    try:
        t0 = time.monotonic()
        time.sleep(1.5)
        why = starvation([target.pid], time.monotonic() - t0)
    finally:
        for p in [*hogs, target]:
            p.kill()
            p.wait()
    assert why and "host overloaded" in why


@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="needs schedstats")
@pytest.mark.parametrize("code", [
    "import time\ntime.sleep(3)\n",  # sleeping is the code's choice, not starvation
    # busy threads of its own: the process used the CPU it was given
    "import threading, time\n"
    "def spin():\n    t = time.time()\n    while time.time() - t < 3: pass\n"
    "ts = [threading.Thread(target=spin) for _ in range(8)]\n"
    "[t.start() for t in ts]\n[t.join() for t in ts]\n",
])
def test_code_cannot_make_its_own_timeout_look_like_starvation(code):
    target = _pinned(code)
    try:
        t0 = time.monotonic()
        time.sleep(1.5)
        why = starvation([target.pid], time.monotonic() - t0)
    finally:
        target.kill()
        target.wait()
    assert why is None


def test_a_worker_that_keeps_failing_gives_infra_verdicts_never_the_codes(monkeypatch):
    with Sandbox(workers=1) as box:
        assert box.execute("def f():\n    return 1\n", ["assert f() == 1"]).passed == 1

        def broken(self, budget_s):
            raise pool_module.WorkerFailed("worker died (simulated)")

        monkeypatch.setattr(pool_module.HostWorker, "receive", broken)
        result = box.execute("def f():\n    return 1\n", ["assert f() == 1", "assert f() == 2"])
    assert [o.status for o in result.outcomes] == ["infra", "infra"]
    assert result.infra == 2 and result.passed == 0
    assert "worker died" in result.outcomes[0].message


def test_a_jail_that_stops_starting_gives_infra_once_it_had_started(monkeypatch):
    with Sandbox(workers=1) as box:
        assert box.execute("def f():\n    return 1\n", ["assert f() == 1"]).passed == 1

        def cannot_start(level):
            raise pool_module.SandboxError("bwrap failed to start (simulated)")

        # The running worker reads as dead, and no new one starts.
        monkeypatch.setattr(pool_module.HostWorker, "alive", lambda self: False)
        monkeypatch.setattr(pool_module, "HostWorker", cannot_start)
        result = box.execute("def f():\n    return 1\n", ["assert f() == 1"])
    assert [o.status for o in result.outcomes] == ["infra"]
    assert "failed to start" in result.outcomes[0].message


def test_every_result_records_the_limits_it_ran_under():
    with Sandbox(workers=1) as box:
        result = box.execute("def f():\n    return 1\n", ["assert f() == 1"], timeout_s=1.5,
                             memory_mb=256)
    assert result.limits["timeout_s"] == 1.5 and result.limits["memory_mb"] == 256
    assert {"fsize_mb", "nofile", "max_output_bytes"} <= set(result.limits)
