"""``prefect.yaml`` deployments, checked as a user runs them: a real ``prefect server`` on
loopback, the work pool, ``prefect --no-prompt deploy --all``, a ``train`` run triggered on the
smallest config and executed by ``prefect worker start --run-once``.

Everything it starts is a subprocess in its own session, killed by pid at the end; all state
(Prefect home and database, MLflow store, run store) lives in the test's temp folder.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from procs import kill_group, log_tail, start

from deployments import load_prefect_yaml, pool_names
from deployments.server import free_port

REPO = Path(__file__).resolve().parent.parent
PREFECT = [sys.executable, "-m", "prefect"]
WORKER_DEADLINE_S = 300  # the worker picks the run up and trains it: ~60 s on an idle machine
STOP_GRACE_S = 20  # from SIGTERM to SIGKILL when the server and the worker are stopped


def test_prefect_yaml_declares_the_deployments():
    spec = load_prefect_yaml()
    deployments = {d["name"]: d for d in spec["deployments"]}
    assert set(deployments) == {"train", "train-stack", "replay", "evaluate"}
    assert pool_names(spec) == ["adversarial-cpu"]
    assert spec["pull"] == [{"prefect.deployments.steps.set_working_directory": {
        "directory": "{{ project-dir.stdout }}"}}]
    for name, dep in deployments.items():
        flow = name.split("-")[0]  # train-stack: the same flow, runs may overlap
        assert dep["entrypoint"] == f"flows/{flow}.py:{flow}"
        assert "MLFLOW_TRACKING_URI" in dep["work_pool"]["job_variables"]["env"]
    (schedule,) = deployments["train"]["schedules"]
    assert schedule["cron"] and schedule["timezone"]
    assert deployments["train"]["parameters"]["config"] == "configs/tiny.yaml"
    assert (REPO / deployments["train"]["parameters"]["config"]).is_file()


def wait_healthy(api_url: str, server: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    """Until ``/health`` answers. The server creates and migrates a fresh SQLite database
    first: ~15 s on an idle 2-core machine, a few times that when the cores are shared."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, \
            f"prefect server exited with code {server.returncode}\n{log_tail(log)}"
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"prefect server not healthy in {timeout}s\n{log_tail(log)}")


def start_server(env: dict[str, str], tmp_path: Path) -> tuple[subprocess.Popen, str, Path]:
    """``prefect server start`` on a free loopback port; ``(process, api_url, log)``.

    ``free_port`` releases the port and the server binds it again only after its imports,
    seconds later on a loaded machine; any process may take the port meanwhile (an outgoing
    connection's local port, another test's server) and the server then exits 1 with "Port N
    is already in use". Only that case is retried, on a new port."""
    for attempt in range(1, 4):
        port = free_port()
        api_url = f"http://127.0.0.1:{port}/api"
        log = tmp_path / f"server-{attempt}.log"
        server = start([*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                       {**env, "PREFECT_API_URL": api_url}, tmp_path, log)
        try:
            wait_healthy(api_url, server, log)
            return server, api_url, log
        except AssertionError:
            kill_group(server, STOP_GRACE_S)
            taken = re.search(r"already\s+in\s+use", log.read_text(errors="replace"), re.I)
            if attempt == 3 or not taken:
                raise
    raise AssertionError("unreachable")


def run_checked(cmd: list[str], env: dict[str, str], timeout: float = 180) -> str:
    """Run a short command to completion; its output (stdout) on success, else a failure that
    shows what it printed, also when it had to be stopped at ``timeout``."""
    name = " ".join(cmd[2:])
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out, err = (b.decode(errors="replace") if isinstance(b, bytes) else b or ""
                    for b in (exc.stdout, exc.stderr))
        pytest.fail(f"{name}: still running after {timeout}s\n{out[-3000:]}\n{err[-3000:]}")
    assert done.returncode == 0, f"{name}: exit code {done.returncode}\n" \
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def cli(args: list[str], env: dict[str, str]) -> str:
    return run_checked([*PREFECT, *args], env)


@pytest.mark.slow
def test_deploy_and_run_train_through_a_worker(tiny_model_dir, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from artifacts import RunStore
    from artifacts.tracking import TAG_FLOW_RUN, Tracker

    mlflow_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_UI_ENABLED": "false",
           # the nightly cron must not add runs a --run-once worker could pick up
           "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
           "MLFLOW_TRACKING_URI": mlflow_uri}  # read by the mlflow-uri build step at deploy
    server, api_url, server_log = start_server(env, tmp_path)
    env["PREFECT_API_URL"] = api_url
    worker_env = {k: v for k, v in env.items() if k != "MLFLOW_TRACKING_URI"}  # job vars only
    worker = None
    try:
        setup = run_checked([sys.executable, "-m", "deployments", "setup"], env)
        assert "work pool 'adversarial-cpu': created" in setup, setup
        cli(["--no-prompt", "deploy", "--all"], env)

        # Shrunk for wall-clock time only, as in test_train_flow: two training stages, one step
        # per phase, two problems, two samples, short outputs; the prebuilt tiny model.
        overrides = [f"model.generator={tiny_model_dir}", "schedule.stages=[1, 2]",
                     "schedule.n_discriminator_steps=1", "schedule.n_generator_steps=1",
                     "schedule.k_alternating=0", "sampling.max_new_tokens=12",
                     "sampling.samples_per_problem=2", "problems.limit=2",
                     "schedule.problems_per_step=2", "rewards.mutants_per_problem=2"]
        out = cli(["deployment", "run", "train/train",
                   # relative: resolved in the pull step's working directory (the repo)
                   "--param", 'config="configs/minimal.yaml"',
                   "--param", f"overrides={json.dumps(overrides)}",
                   "--param", f"artifacts_root={json.dumps(str(tmp_path / 'runs'))}",
                   "--param", 'run_id="deploy-test"'], env)
        started = re.search(r"UUID: ([0-9a-f-]{36})", out)
        assert started, out
        flow_run_id = started.group(1)

        worker = start([*PREFECT, "--no-prompt", "worker", "start", "--pool", "adversarial-cpu",
                        "--type", "process", "--run-once", "--limit", "1"],
                       worker_env, tmp_path, tmp_path / "worker.log")
        try:
            worker.wait(timeout=WORKER_DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker still running after {WORKER_DEADLINE_S}s\n"
                        f"{log_tail(tmp_path / 'worker.log')}")
        log = log_tail(tmp_path / "worker.log")
        assert worker.returncode == 0, log

        async def read():
            async with get_client() as client:
                run = await client.read_flow_run(flow_run_id)
                dep = await client.read_deployment_by_name("train/train")
                return run, dep, await client.read_deployments()

        with temporary_settings({PREFECT_API_URL: api_url}):
            run, dep, all_deps = asyncio.run(read())
    finally:
        for proc in (worker, server):
            if proc is not None:
                kill_group(proc, STOP_GRACE_S)

    assert run.state.is_completed(), f"{run.state!r}\n{log}\n{log_tail(server_log)}"
    assert run.deployment_id == dep.id
    assert {d.name for d in all_deps} == {"train", "train-stack", "replay", "evaluate"}
    # what the deploy baked in: this checkout as working directory, the deploying shell's
    # MLflow URI in the job's environment, the nightly cron with its timezone
    assert dep.pull_steps == [{"prefect.deployments.steps.set_working_directory": {
        "directory": str(REPO)}}]
    assert dep.job_variables["env"]["MLFLOW_TRACKING_URI"] == mlflow_uri
    (schedule,) = dep.schedules
    assert schedule.schedule.cron and schedule.schedule.timezone

    store = RunStore(str(tmp_path / "runs"), "deploy-test")
    assert store.complete_steps() == [1, 2, 3, 4] and store.incomplete_steps() == []
    assert len(store.read("updates")) == 4

    tracker = Tracker(mlflow_uri, "minimal")
    (mlflow_run,) = tracker.client.search_runs(
        [tracker.experiment_id], f"tags.`{TAG_FLOW_RUN}` = '{flow_run_id}'")
    assert mlflow_run.info.status == "FINISHED"
    assert mlflow_run.data.tags["adversarial.run_id"] == "deploy-test"
