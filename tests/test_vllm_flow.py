"""The training flow with ``sampling.engine=vllm``: all five stages, every sample drawn with the
adapter version the previous update produced, the sampler mismatch logged per role, the engine
started once and gone afterwards, and the run replayable (execute and rollout MATCHED)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest
from procs import kill_group, log_tail, start
from test_train_flow import EPHEMERAL_SERVER_STARTUP_S, overrides
from test_vllm_engine import ENGINE_ATOL

from artifacts import RunStore
from models.engine.client import EngineError, vllm_python
from models.engine.sampler import remove_orphaned_weights

REPO = Path(__file__).resolve().parent.parent
RUN = "vllm-flow"
pytestmark = pytest.mark.slow
try:
    vllm_python()
except EngineError as exc:
    pytestmark = [pytestmark, pytest.mark.skip(reason=str(exc))]


def _engines() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True)
            if any(part.endswith("engine/worker.py") for part in p.cmdline())]


@pytest.fixture(scope="module")
def vllm_run(prefect_harness, tiny_model_dir, tmp_path_factory):
    from flows.train import train

    tmp = tmp_path_factory.mktemp("vllm-run")
    items = [o for o in overrides(tiny_model_dir, tmp) if not o.startswith("schedule.stages")]
    summary = train(config=str(REPO / "configs/minimal.yaml"),
                    overrides=[*items, "schedule.stages=[1, 2, 3, 4, 5]",
                               "sampling.engine=vllm"], run_id=RUN)
    return tmp, summary


def test_vllm_run_trains_every_stage_on_fresh_adapters(vllm_run):
    from artifacts.tracking import Tracker

    tmp, summary = vllm_run
    assert _engines() == [], "the vLLM engine outlived its run"
    store = RunStore(str(tmp / "runs"), RUN)
    assert store.complete_steps() == list(range(1, 11))
    updates = store.read("updates").sort_values("step")
    assert sorted(set(updates["stage"])) == [1, 2, 3, 4, 5]
    # every sample of a step was drawn with the version its role's last update produced
    latest: dict[str, str] = {}
    for step in range(1, 11):
        chains = store.read("chains", step=step)
        for role in ("generator", "discriminator"):
            drawn = set(chains[chains["role"] == role]["adapter_version"])
            assert len(drawn) == 1, (step, role, drawn)
            if role in latest:
                assert drawn == {latest[role]}, (step, role)
        (row,) = updates[updates["step"] == step].to_dict("records")
        # an update that took no optimizer step (every group without reward spread) keeps it
        moved = row["adapter_version_after"] != row["adapter_version_before"]
        assert moved == (row["optimizer_steps"] > 0), row
        latest[row["role"]] = row["adapter_version_after"]
        # the engine's log-probs are the trainer's, up to float32 kernels
        assert 0 <= row["logprob_mismatch"] < ENGINE_ATOL, row
        assert row["logprob_mismatch_share"] == 0.0

    tracker = Tracker(summary["mlflow_tracking_uri"], "minimal")
    run_id = summary["mlflow_run_id"]
    for role in ("generator", "discriminator"):
        history = tracker.client.get_metric_history(run_id, f"ppo/{role}/logprob_mismatch")
        assert len(history) == 5, role                        # one update per role per stage
    starts = {m.step: m.value for m in
              tracker.client.get_metric_history(run_id, "time/engine_start_s")}
    assert sorted(starts) == list(range(1, 11))
    # started once (in the held-out evaluation before step 1 or in step 1), reused after
    assert all(v == 0.0 for s, v in starts.items() if s > 1)
    syncs = [m.value for m in tracker.client.get_metric_history(run_id, "time/engine_sync_s")]
    assert len(syncs) == 10 and sum(syncs) > 0                # roles alternate: pushes happen


def test_vllm_run_replays_matched(vllm_run):
    from flows.replay import replay

    tmp, _ = vllm_run
    for stage in ("execute", "rollout"):
        report = replay(run_id=RUN, step=10, stage=stage, artifacts_root=str(tmp / "runs"))
        assert report["matched"] is True, (stage, report["parts"])
    assert _engines() == [], "a replay's vLLM engine outlived it"


ENGINE_READY_DEADLINE_S = 420  # Prefect server, problems, models, then the engine: ~40 s idle


def _engine_workers(log: Path) -> list[psutil.Process]:
    """Engine processes writing ``log`` (found by their log file: they are in no session of
    ours once their parent is gone)."""
    found = []
    for p in psutil.process_iter(["cmdline", "open_files"]):
        try:
            if any(c.endswith("engine/worker.py") for c in p.info["cmdline"] or ()) and \
                    any(f.path == str(log) for f in p.open_files()):
                found.append(p)
        except psutil.Error:
            pass
    return found


@pytest.mark.timeout(ENGINE_READY_DEADLINE_S + 120)
def test_kill_9_of_a_vllm_run_leaves_no_engine(tiny_model_dir, tmp_path):
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(REPO),
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(EPHEMERAL_SERVER_STARTUP_S)}
    cmd = [sys.executable, "-m", "flows.train", "--config", str(REPO / "configs/minimal.yaml"),
           "--run-id", "killed", "--set", "sampling.engine=vllm"]
    for item in overrides(tiny_model_dir, tmp_path):
        cmd += ["--set", item]
    engine_log = tmp_path / "runs" / "run_id=killed" / "_run" / "engine.log"
    log = tmp_path / "run.log"
    proc = start(cmd, env, tmp_path, log)
    try:
        deadline = time.monotonic() + ENGINE_READY_DEADLINE_S
        while "vLLM engine: ready" not in log.read_text(errors="replace"):
            assert proc.poll() is None, f"the run ended (exit {proc.returncode})\n{log_tail(log)}"
            assert time.monotonic() < deadline, f"no engine after {ENGINE_READY_DEADLINE_S}s\n" \
                f"{log_tail(log)}"
            time.sleep(0.2)
        engines = _engine_workers(engine_log)
        assert len(engines) == 1, log_tail(log)
        os.kill(proc.pid, signal.SIGKILL)                    # the run only, not its session
        proc.wait()
        gone, alive = psutil.wait_procs(engines, timeout=10)
        assert not alive, "the vLLM engine outlived the killed run"
    finally:
        kill_group(proc)
        remove_orphaned_weights()  # the killed run's push folder: what its close would do
