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
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from deployments import load_prefect_yaml, pool_names

REPO = Path(__file__).resolve().parent.parent
PREFECT = [sys.executable, "-m", "prefect"]


def test_prefect_yaml_declares_the_deployments():
    spec = load_prefect_yaml()
    deployments = {d["name"]: d for d in spec["deployments"]}
    assert set(deployments) == {"train", "replay", "evaluate"}
    assert pool_names(spec) == ["adversarial-cpu"]
    assert spec["pull"] == [{"prefect.deployments.steps.set_working_directory": {
        "directory": "{{ project-dir.stdout }}"}}]
    for name, dep in deployments.items():
        assert dep["entrypoint"] == f"flows/{name}.py:{name}"
        assert "MLFLOW_TRACKING_URI" in dep["work_pool"]["job_variables"]["env"]
    (schedule,) = deployments["train"]["schedules"]
    assert schedule["cron"] and schedule["timezone"]
    assert deployments["train"]["parameters"]["config"] == "configs/tiny.yaml"
    assert (REPO / deployments["train"]["parameters"]["config"]).is_file()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], env: dict[str, str], log: Path, cwd: Path) -> subprocess.Popen:
    # own session: the kill below takes the process and everything it started
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_healthy(api_url: str, server: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert server.poll() is None, f"prefect server exited:\n{log.read_text()[-4000:]}"
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"prefect server not healthy in {timeout}s:\n{log.read_text()[-4000:]}")


def cli(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([*PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-3000:]}" \
                                 f"\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_deploy_and_run_train_through_a_worker(tiny_model_dir, tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from artifacts import RunStore
    from artifacts.tracking import TAG_FLOW_RUN, Tracker

    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    mlflow_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "PREFECT_API_URL": api_url, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_UI_ENABLED": "false",
           # the nightly cron must not add runs a --run-once worker could pick up
           "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
           "MLFLOW_TRACKING_URI": mlflow_uri}  # read by the mlflow-uri build step at deploy
    worker_env = {k: v for k, v in env.items() if k != "MLFLOW_TRACKING_URI"}  # job vars only
    server = start([*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                   env, tmp_path / "server.log", tmp_path)
    worker = None
    try:
        wait_healthy(api_url, server, tmp_path / "server.log")
        setup = subprocess.run([sys.executable, "-m", "deployments", "setup"], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=120)
        assert setup.returncode == 0, setup.stdout + setup.stderr
        assert "work pool 'adversarial-cpu': created" in setup.stdout
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
        flow_run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)

        worker = start([*PREFECT, "--no-prompt", "worker", "start", "--pool", "adversarial-cpu",
                        "--type", "process", "--run-once", "--limit", "1"],
                       worker_env, tmp_path / "worker.log", tmp_path)
        try:
            worker.wait(timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker still running after 300s:\n"
                        f"{(tmp_path / 'worker.log').read_text()[-4000:]}")
        log = (tmp_path / "worker.log").read_text()
        assert worker.returncode == 0, log[-4000:]

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
                stop(proc)

    assert run.state.is_completed(), f"{run.state!r}\n{log[-4000:]}"
    assert run.deployment_id == dep.id
    assert {d.name for d in all_deps} == {"train", "replay", "evaluate"}
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
