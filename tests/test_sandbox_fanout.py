"""Sandbox fan-out on Ray (``sandbox.executor: ray``): the same verdicts as the local pool, in
job order, each result saying where it ran; a Ray worker lost mid-shard is re-run, never a
verdict; and the executions table records executor and node.

One Ray instance for the module, started in this process (``ray.init`` with 2 CPUs), as a run
with ``sandbox.executor: ray`` and no ``RAY_ADDRESS`` does."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_execution import suite

from artifacts import RunStore
from configs.sections import SandboxConfig
from pipeline.execution import execution_rows, plan_jobs, run_suites, sandbox_runner
from problems import load_problems
from rewards import Mutant
from sandbox import Limits, execute_many
from sandbox.fanout import FanoutError, RayExecutor, merge_shards, shard_indices

pytestmark = pytest.mark.slow  # a Ray instance starts (~4 s) and its workers warm up

LIMITS = Limits(timeout_s=2.0, memory_mb=256)
SQUARE = "def square(x):\n    return x * x\n"
# Every kind of verdict the sandbox gives, so "same verdicts" is checked on all of them.
JOBS = [
    (SQUARE, ["assert square(3) == 9", "assert square(3) == 10"]),           # passed, failed
    (SQUARE, ["assert square('a') == 1", "def (:"]),                         # error, invalid
    ("def square(x):\n    while True: pass\n", ["assert square(2) == 4"]),   # timeout
    ("import os\ndef square(x):\n    os._exit(3)\n", ["assert square(2) == 4"]),  # crashed
] + [(SQUARE, [f"assert square({i}) == {i * i}"]) for i in range(7)]        # order check


@pytest.fixture(scope="module")
def ray_executor():
    ray = pytest.importorskip("ray")
    try:
        executor = RayExecutor(LIMITS, address="local")
    except FanoutError as exc:
        pytest.skip(f"Ray cannot start here: {exc}")
    yield executor
    ray.shutdown()


def verdicts(results):
    return [[o.status for o in r.outcomes] for r in results]


def test_shards_are_strided_and_merge_back_in_job_order():
    shards = shard_indices(7, 3)
    assert shards == [[0, 3, 6], [1, 4], [2, 5]]
    assert sorted(i for s in shards for i in s) == list(range(7))
    answered = [[f"r{i}" for i in s] for s in shards]
    assert merge_shards(shards, answered, 7) == [f"r{i}" for i in range(7)]
    with pytest.raises(FanoutError, match="returned 1 results"):
        merge_shards(shards, [["r0"], ["r1", "r4"], ["r2", "r5"]], 7)
    with pytest.raises(FanoutError, match="covered 4 of 7"):
        merge_shards(shards[1:], answered[1:], 7)


def test_ray_gives_the_local_pools_verdicts_in_job_order(ray_executor):
    local = execute_many(JOBS, LIMITS, workers=2)
    fanned = ray_executor(JOBS)
    assert verdicts(fanned) == verdicts(local)
    assert verdicts(local)[:4] == [["passed", "failed"], ["error", "invalid"], ["timeout"],
                                   ["crashed"]]
    assert [r.isolation for r in fanned] == [r.isolation for r in local]
    assert [r.limits for r in fanned] == [r.limits for r in local]
    assert {r.executor for r in local} == {"local"} and {r.executor for r in fanned} == {"ray"}
    import ray

    assert {r.node for r in fanned} == {ray.get_runtime_context().get_node_id()}
    cpus = int(ray.cluster_resources()["CPU"])
    assert len(ray_executor.last_nodes) == min(cpus, len(JOBS))  # one shard per CPU


def test_an_empty_batch_and_more_shards_than_jobs(ray_executor):
    assert ray_executor([]) == []
    wide = RayExecutor(LIMITS, shards=16)
    assert verdicts(wide(JOBS[:3])) == [["passed", "failed"], ["error", "invalid"],
                                        ["timeout"]]
    assert len(wide.last_nodes) == 3


def _ray_workers_running_a_shard() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                name = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if name.startswith(b"ray::run_shard"):
                found.append(int(entry))
    return found


SLOW = ("import time\ndef square(x):\n    time.sleep(1.5)\n    return x * x\n",
        ["assert square(3) == 9"])  # a shard that runs long enough to be killed
PATIENT = Limits(timeout_s=10.0, memory_mb=256)  # SLOW is never a timeout, however loaded


@contextlib.contextmanager
def killing_the_first_shard():
    """SIGKILL the first Ray worker seen running a shard (from a thread, while the caller
    waits on Ray); yields the list of pids killed."""
    killed: list[int] = []
    stop = threading.Event()

    def kill() -> None:
        while not stop.is_set() and not killed:
            for pid in _ray_workers_running_a_shard():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.02)

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        yield killed
    finally:
        stop.set()
        killer.join()
    assert killed, "no Ray worker was running a shard to kill"


def test_a_ray_worker_killed_mid_shard_is_rerun_not_judged(ray_executor):
    with killing_the_first_shard():
        results = RayExecutor(PATIENT)([SLOW, SLOW])
    assert verdicts(results) == [["passed"], ["passed"]]  # re-run by Ray, never 'infra'/'crashed'


def test_a_shard_lost_past_the_retries_fails_the_step_not_the_candidate(ray_executor,
                                                                         monkeypatch):
    import sandbox.fanout as fanout

    monkeypatch.setattr(fanout, "INFRA_RETRIES", 0)
    fragile = RayExecutor(PATIENT)
    with killing_the_first_shard(), \
            pytest.raises(FanoutError, match="failed on Ray past 0 retries: WorkerCrashed"):
        fragile([SLOW])


def test_the_executions_rows_record_the_ray_executor_and_node(ray_executor, tmp_path):
    add = next(p for p in load_problems("demo") if p.id == "add")
    right, wrong = "def add(a, b):\n    return a + b", "def add(a, b):\n    return a - b"
    suites = [suite(add, 0, right, ["assert add(1, 1) == 2"]),
              suite(add, 1, wrong, ["assert add(2, 2) == 4"]), suite(add, 2, None, [])]
    mutants = {"add": [Mutant(wrong, "+ -> -", "arith")]}
    runner = sandbox_runner(SandboxConfig(executor="ray", timeout_s=2.0))
    assert isinstance(runner, RayExecutor)
    rows = run_suites(suites, mutants, runner)
    local_rows = run_suites(suites, mutants, sandbox_runner(SandboxConfig(timeout_s=2.0)))
    ran = [r for r in rows if r["status"] != "not_run"]
    assert ran and {r["executor"] for r in ran} == {"ray"}
    assert {r["node"] for r in ran} == set(runner.last_nodes)
    assert {r["executor"] for r in local_rows if r["status"] != "not_run"} == {"local"}
    key = ("problem_id", "sample_idx", "test_id", "target_kind", "target_id", "status")
    assert [tuple(r[k] for k in key) for r in rows] == [tuple(r[k] for k in key)
                                                       for r in local_rows]
    not_run = [r for r in rows if r["status"] == "not_run"]
    assert not_run and all(r["executor"] is None and r["node"] is None for r in not_run)

    store = RunStore(str(tmp_path), run_id="r")
    ptr = store.write("executions", 1, "all", rows)
    assert store.read_table("executions", step=1).column("executor").to_pylist() == \
        [r["executor"] for r in rows]
    # A part written before v3 (no executor, no node) still reads, with nulls.
    path = tmp_path / "run_id=r" / ptr.relpath
    old = pq.read_table(path).drop_columns(["executor", "node"])
    pq.write_table(old.replace_schema_metadata({"artifacts.table": "executions",
                                                "artifacts.schema_version": "2"}), path)
    back = store.read_table("executions", step=1)
    assert set(back.column("executor").to_pylist()) == {None}
    assert back.column("status").to_pylist() == [r["status"] for r in rows]


def test_plan_is_unchanged_by_the_executor():
    # The executor only changes where jobs run: planning is pure and shared.
    add = next(p for p in load_problems("demo") if p.id == "add")
    suites = [suite(add, 0, "def add(a, b):\n    return a + b", ["assert add(1, 1) == 2"])]
    plan = plan_jobs(suites, {})
    rows = execution_rows(suites, plan, execute_many(plan.jobs, LIMITS), {})
    assert {r["executor"] for r in rows} == {"local"}
