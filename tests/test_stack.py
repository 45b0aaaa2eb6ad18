"""The local stack end to end, as docs/deployments.md's "Several workers" walks it: ``python -m
deployments stack up`` (PostgreSQL, Prefect and MLflow servers on it, a Ray head), the
``train-stack`` deployment, two process workers on one pool, two trainings at once with
``sandbox.executor=ray``; then ``stack down``, after which no process it or the test started
is left.

Skipped, with the reason, where PostgreSQL or Ray cannot start (no ``initdb`` and no way to
install it, no ``ray``). The stack's bookkeeping (state files, stopping by session) is
tested without servers at the end."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from procs import descendants, kill_group, log_tail, proc_stat, start, wait_gone

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
RUN_DEADLINE_S = 540   # both trainings, from trigger to a final state (~2 min on 2 idle cores)
UP_TIMEOUT_S = 400
RUN_IDS = ("stack-a", "stack-b")
CLI_TIMEOUT_S = 240    # one CLI call (status, deploy, each run's trigger)
DOWN_TIMEOUT_S = 180   # teardown: stopping the stack
# The test's own clocks, added up: each gives a message naming what did not finish, so
# pytest-timeout (600 s for other tests) must not cut in before them on a loaded machine.
TEST_TIMEOUT_S = UP_TIMEOUT_S + 2 * CLI_TIMEOUT_S + len(RUN_IDS) * CLI_TIMEOUT_S + \
    RUN_DEADLINE_S + DOWN_TIMEOUT_S


def _cli(args: list[str], env: dict[str, str], timeout: float = CLI_TIMEOUT_S) -> str:
    done = subprocess.run([PY, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{' '.join(args)}: exit {done.returncode}\n" \
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _exports(text: str) -> dict[str, str]:
    return dict(re.findall(r"^export (\w+)=(\S+)$", text, re.M))


async def _final_runs(api_url: str, ids: list[str], deadline: float):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}):
        async with get_client() as client:
            while True:
                runs = [await client.read_flow_run(i) for i in ids]
                if all(r.state is not None and r.state.is_final() for r in runs):
                    return runs
                if time.monotonic() > deadline:
                    return runs
                await asyncio.sleep(2)


@pytest.mark.slow
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_two_trainings_on_two_workers_on_the_stack_with_ray(tiny_model_dir):
    pytest.importorskip("ray")
    # PostgreSQL runs as 'nobody' when the tests run as root: its folder must be reachable
    # for that user, which pytest's own temp folders (0700) are not.
    folder = Path(tempfile.mkdtemp(prefix="stack-", dir="/tmp"))
    folder.chmod(0o711)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env["PREFECT_HOME"] = str(folder / "client-home")
    up = subprocess.run([PY, "-m", "deployments", "stack", "up", "--dir", str(folder),
                         "--ray-cpus", "2"], cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=UP_TIMEOUT_S)
    if up.returncode != 0 and re.search(r"not installed|could not install", up.stderr):
        subprocess.run([PY, "-m", "deployments", "stack", "down", "--dir", str(folder)],
                       cwd=REPO, env=env, timeout=120)
        pytest.skip(f"PostgreSQL cannot start here: {up.stderr.strip()[-300:]}")
    stack = json.loads((folder / "stack.json").read_text())
    tree: dict[int, str] = {}  # pid -> start time of everything the stack and workers run
    for svc in stack["services"].values():
        tree |= descendants(svc["pid"]) | _self(svc["pid"])
    workers = []
    try:
        assert up.returncode == 0, f"stack up: {up.returncode}\n{up.stdout}\n{up.stderr}"
        exports = _exports(up.stdout)
        assert set(exports) >= {"PREFECT_API_URL", "MLFLOW_TRACKING_URI", "RAY_ADDRESS",
                                "STACK_POSTGRES_URL"}
        assert exports["MLFLOW_TRACKING_URI"].startswith("http://127.0.0.1:")
        assert (folder / "stack.env").read_text().count("export ") == len(exports)
        env |= exports
        status = _cli(["-m", "deployments", "stack", "status", "--dir", str(folder)], env)
        assert re.findall(r"^(\w+)\s+up$", status, re.M) == ["postgres", "prefect", "mlflow",
                                                             "ray"], status

        _cli(["-m", "deployments", "deploy", "--name", "train-stack"], env)
        overrides = [f"model.generator={tiny_model_dir}", "schedule.stages=[1, 2]",
                     "schedule.n_discriminator_steps=1", "schedule.n_generator_steps=1",
                     "schedule.k_alternating=0", "sampling.max_new_tokens=12",
                     "sampling.samples_per_problem=2", "problems.limit=2",
                     "schedule.problems_per_step=2", "rewards.mutants_per_problem=2",
                     "sandbox.executor=ray"]
        flow_runs = []
        for run_id in RUN_IDS:  # both queued before any worker runs: they start together
            out = _cli(["-m", "prefect", "deployment", "run", "train/train-stack",
                        "--param", 'config="configs/minimal.yaml"',
                        "--param", f"overrides={json.dumps(overrides)}",
                        "--param", f"artifacts_root={json.dumps(str(folder / 'runs'))}",
                        "--param", f"run_id={json.dumps(run_id)}"], env)
            found = re.search(r"UUID: ([0-9a-f-]{36})", out)
            assert found, out
            flow_runs.append(found.group(1))
        worker_env = {k: v for k, v in env.items() if k != "MLFLOW_TRACKING_URI"}  # job vars
        worker_env["PREFECT_WORKER_QUERY_SECONDS"] = "2"  # the second worker finds its run soon
        for name in ("w1", "w2"):  # one run at a time each: two runs need both workers
            workers.append(start([PY, "-m", "prefect", "--no-prompt", "worker", "start",
                                  "--pool", "adversarial-cpu", "--type", "process", "--limit",
                                  "1", "--name", name], worker_env, REPO,
                                 folder / f"worker-{name}.log"))
        runs = asyncio.run(_final_runs(env["PREFECT_API_URL"], flow_runs,
                                       time.monotonic() + RUN_DEADLINE_S))
        logs = "\n".join(log_tail(folder / f"worker-{n}.log", 3000) for n in ("w1", "w2"))
        for run in runs:
            assert run.state.is_completed(), f"{run.name}: {run.state!r}\n{logs}"
        # two workers, one run each, at the same time
        assert {run.work_queue_name for run in runs} == {"default"}
        spans = sorted((run.start_time, run.end_time) for run in runs)
        assert spans[1][0] < spans[0][1], f"the runs did not overlap: {spans}"
        # Each worker ran one of them: its log holds that flow run's own lines (both workers
        # may try to submit the same run first; the server gives it to one).
        picked = [re.findall(r"Beginning flow run '([\w-]+)'",
                             (folder / f"worker-{n}.log").read_text(errors="replace"))
                  for n in ("w1", "w2")]
        assert sorted(map(len, picked)) == [1, 1] and \
            {*picked[0], *picked[1]} == set(RUN_IDS), (picked, logs)
        for log in ("w1", "w2"):
            text = (folder / f"worker-{log}.log").read_text(errors="replace")
            assert "database is locked" not in text
        _check_runs(folder, exports["MLFLOW_TRACKING_URI"], flow_runs)
    finally:
        # What runs now, before anything is stopped: the Ray workers and their sandbox jails,
        # the workers' flow-run processes; all of it must be gone at the end.
        for pid in [svc["pid"] for svc in stack["services"].values()] + [w.pid for w in workers]:
            tree |= descendants(pid)
        for worker in workers:
            kill_group(worker, 20)
        down = subprocess.run([PY, "-m", "deployments", "stack", "down", "--dir", str(folder)],
                              cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=DOWN_TIMEOUT_S)
    assert down.returncode == 0, f"{down.stdout}\n{down.stderr}"
    assert re.findall(r"^(\w+)\s+stopped$", down.stdout + down.stderr, re.M) == \
        ["ray", "mlflow", "prefect", "postgres"], down.stdout + down.stderr
    left = wait_gone(tree, 15)
    assert not left, f"processes left after stack down: {left}"
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _in(folder, int(p))]
    shutil.rmtree(folder, ignore_errors=True)


def _self(pid: int) -> dict[int, str]:
    st = proc_stat(pid)
    return {pid: st[2]} if st is not None else {}


def _in(folder: Path, pid: int) -> bool:
    """Does process ``pid`` name ``folder`` on its command line (a server, a Ray daemon)?"""
    try:
        return str(folder).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _check_runs(folder: Path, mlflow_uri: str, flow_runs: list[str]) -> None:
    import pyarrow.compute as pc

    from artifacts import RunStore
    from artifacts.tracking import TAG_FLOW_RUN, Tracker

    tracker = Tracker(mlflow_uri, "minimal")
    nodes = set()
    for run_id, flow_run in zip(RUN_IDS, flow_runs, strict=True):
        store = RunStore(str(folder / "runs"), run_id)
        assert store.complete_steps() == [1, 2, 3, 4] and store.incomplete_steps() == []
        executions = store.read_table("executions")
        ran = executions.filter(pc.field("status") != "not_run")
        assert ran.num_rows and set(ran.column("executor").to_pylist()) == {"ray"}
        nodes |= set(ran.column("node").to_pylist())
        assert set(executions.column("run_id").to_pylist()) == {run_id}  # nothing mixed up
        (mlflow_run,) = tracker.client.search_runs(
            [tracker.experiment_id], f"tags.`{TAG_FLOW_RUN}` = '{flow_run}'")
        assert mlflow_run.info.status == "FINISHED"
        assert mlflow_run.data.tags["adversarial.run_id"] == run_id
        assert "ppo/generator/loss" in mlflow_run.data.metrics
        versions = [v for name in ("minimal-generator", "minimal-discriminator")
                    for v in tracker.client.search_model_versions(f"name = '{name}'")
                    if v.run_id == mlflow_run.info.run_id]
        assert {v.name for v in versions} == {"minimal-generator", "minimal-discriminator"}
    # Both runs' shards ran on the stack's one Ray node (a Ray started by each flow run would
    # be a node of its own).
    assert len(nodes) == 1 and all(nodes), nodes


# -- the stack's bookkeeping, without servers -------------------------------------------------

def _finished_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_state_and_env_files_are_private_and_name_every_service(tmp_path):
    from deployments.stack import Service, Stack, status

    stack = Stack(str(tmp_path), "s3cret", {
        "postgres": Service("postgres", _finished_pid(), 5432, "127.0.0.1:5432", None, "l"),
        "ray": Service("ray", _finished_pid(), 6379, "10.0.0.1:6379", None, "l")})
    stack.save()
    for name in ("stack.json", "stack.env"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600  # the password is in them
    env = (tmp_path / "stack.env").read_text()
    assert "export STACK_POSTGRES_URL=postgresql://stack:s3cret@127.0.0.1:5432/postgres" in env
    assert "export RAY_ADDRESS=10.0.0.1:6379" in env and "RAY_AUTH_TOKEN_PATH" in env
    assert "PREFECT_API_URL" not in env  # only what was started
    assert status(tmp_path) == {"postgres": "down", "ray": "down"}  # their pids are gone


def test_a_damaged_state_file_is_refused_naming_it(tmp_path):
    from deployments.stack import StackError, status

    (tmp_path / "stack.json").write_text('{"dir": 1')
    with pytest.raises(StackError, match="stack.json is damaged"):
        status(tmp_path)


def test_stop_session_stops_what_a_service_started_and_nothing_else(tmp_path):
    from deployments.stack import session_members, stop_session

    bystander = subprocess.Popen(["sleep", "60"])
    service = start(["sh", "-c", "sleep 60 & sleep 60 & wait"], dict(os.environ), tmp_path,
                    tmp_path / "svc.log")
    deadline = time.monotonic() + 10
    while len(session_members(service.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(session_members(service.pid)) == 3
    try:
        assert stop_session(service.pid, grace_s=1) == []  # sh exits; its sleeps need more
        assert session_members(service.pid) == []
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
        service.wait()
