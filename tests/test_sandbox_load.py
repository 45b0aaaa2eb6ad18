"""The load benchmark's harness (``benchmarks/sandbox_load.py``): its loads really load the host
and leave nothing behind, and the judge's verdicts on a small mixed subset are the same on a
CPU-starved host as on a quiet one (the full run is the benchmark itself)."""

from __future__ import annotations

import time

import pytest

from benchmarks.sandbox_load import (
    Job,
    control_jobs,
    group_members,
    humaneval_jobs,
    judge_jobs,
    load,
    payload_jobs,
)

pytestmark = pytest.mark.slow


def _wait_for(predicate, limit_s: float = 20.0) -> bool:
    """Poll; the limit is only a hang guard on a busy 2-core host, never a timing claim."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("kind", ["cpu", "mem", "io", "fork"])
def test_load_runs_and_leaves_nothing(kind):
    # 64 MiB: the memory load's loop is the same at any size; the benchmark uses up to 3 GiB
    with load([kind], mem_size=64 << 20) as running:
        procs = list(running.procs)
        assert procs
        assert _wait_for(lambda: all(running.progress())), running.progress()
        before = running.progress()
        # every process keeps working (a load that started and stalled would load nothing)
        def advanced() -> bool:
            return all(a > b for a, b in zip(running.progress(), before, strict=True))

        assert _wait_for(advanced), (before, running.progress())
    assert all(p.returncode is not None for p in procs)
    assert group_members([p.pid for p in procs]) == []


def test_load_is_stopped_on_keyboard_interrupt():
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012 (the interrupt comes mid-block)
        with load(["fork", "cpu"]) as running:
            procs = list(running.procs)
            assert _wait_for(lambda: all(running.progress()))
            raise KeyboardInterrupt
    assert all(p.returncode is not None for p in procs)
    assert group_members([p.pid for p in procs]) == []


def _subset() -> list[Job]:
    """20 jobs of every kind: 6 HumanEval problems (canonical + stub, the stubs' expected
    verdicts mixing failed, error and passed), 2 big payloads right and wrong, 4 controls."""
    return humaneval_jobs(6) + payload_jobs()[:4] + control_jobs()[:4]


def test_verdicts_quiet_and_under_cpu_load():
    jobs = _subset()
    assert len(jobs) == 20
    assert {s for j in jobs for s in j.expected} >= {"passed", "failed", "error"}
    # a job whose expectation is wrong on purpose: the comparison itself must catch it
    canary = Job("canary", "def f():\n    return 1\n", ("assert f() == 1\n",), ("failed",))
    quiet = judge_jobs([*jobs, canary], "quiet")
    assert len(quiet.wrong) == 1 and "canary" in quiet.wrong[0], quiet.wrong
    assert quiet.infra == 0
    # 3 busy loops per core: a job starved past its backstop is re-run by the judge, so
    # even here every verdict must be a verdict, and the right one
    loaded = judge_jobs(jobs, "cpu")
    assert loaded.wrong == [], loaded.wrong
    assert loaded.infra == 0
