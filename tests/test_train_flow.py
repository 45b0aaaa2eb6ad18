"""The real training flow on a shrunk config: under Prefect's test harness, and killed mid-step
in a subprocess then resumed with the same run id."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from procs import kill_group, log_tail, start

from artifacts import RunStore

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def overrides(tiny_model_dir: Path, tmp: Path) -> list[str]:
    # Shrunk for wall-clock time only: two training stages, one step per phase, two problems,
    # two samples, short outputs. Everything else is the real pipeline.
    return [f"model.generator={tiny_model_dir}", f"artifacts.root={tmp / 'runs'}",
            f"tracking.tracking_uri=sqlite:///{tmp / 'mlflow.db'}",
            "schedule.stages=[1, 2]", "schedule.n_discriminator_steps=1",
            "schedule.n_generator_steps=1", "schedule.k_alternating=0",
            "sampling.max_new_tokens=12", "sampling.samples_per_problem=2",
            "problems.limit=2", "schedule.problems_per_step=2", "rewards.mutants_per_problem=2"]


def test_flow_trains_stage_by_stage_and_records_everything(prefect_harness, tiny_model_dir,
                                                           tmp_path, monkeypatch, capsys,
                                                           context_walks):
    from artifacts.tracking import Tracker
    from flows.train import train
    from serving.registry import ModelRegistry

    monkeypatch.chdir(tmp_path)  # nothing may be written to the caller's folder
    summary = train(config=str(REPO / "configs/minimal.yaml"),
                    overrides=overrides(tiny_model_dir, tmp_path), run_id="flow-test")
    store = RunStore(str(tmp_path / "runs"), "flow-test")
    assert store.complete_steps() == [1, 2, 3, 4] and store.incomplete_steps() == []
    assert context_walks == []  # every task got the run context quoted
    updates = store.read("updates")
    assert list(zip(updates["stage"], updates["role"], strict=True)) == [
        (1, "discriminator"), (1, "generator"), (2, "discriminator"), (2, "generator")]
    chains = store.read("chains", step=1)
    assert set(zip(chains["role"], chains["stage"], strict=True)) == {
        (role, s) for role in ("generator", "discriminator") for s in range(1, 6)}
    assert len(chains) == 2 * 5 * 2 * 2  # roles x stages x problems x samples
    executions = store.read("executions", step=1)
    assert {"candidate", "reference"} <= set(executions["target_kind"])
    assert (executions["isolation"] != "").all()
    rewards = store.read("rewards")
    assert len(rewards) == 4 * 2 * 2 and rewards["generator_reward"].between(0, 1).all()
    # each update starts from the adapter the previous update of that role left behind
    for role in ("generator", "discriminator"):
        rows = updates[updates["role"] == role]
        assert list(rows["adapter_version_before"])[1:] == list(rows["adapter_version_after"])[:-1]

    tracker = Tracker(summary["mlflow_tracking_uri"], "minimal")
    run = tracker.client.get_run(summary["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["adversarial.run_id"] == "flow-test"
    assert run.data.tags["mlflow.note.content"].startswith("Adversarial PPO training run flow-test")
    assert "config.json" in {f.path for f in tracker.client.list_artifacts(run.info.run_id)}
    datasets = [d.dataset for d in run.inputs.dataset_inputs]
    assert len(datasets) == 1 and datasets[0].name.startswith("problems:"), datasets
    for key in ("generator/reward", "discriminator/validity", "sandbox/timeouts",
                "time/generation_s", "time/other_fraction"):
        history = tracker.client.get_metric_history(run.info.run_id, key)
        assert [m.step for m in history] == [1, 2, 3, 4], key
    assert {c.step for c in tracker.list_checkpoints(run.info.run_id)} == {2, 4}
    # a few samples per step as an MLflow table
    import json as _json

    table = _json.loads(Path(tracker.client.download_artifacts(
        run.info.run_id, "completions/step_000003.json", str(tmp_path))).read_text())
    assert {"problem_id", "stage_1", "stage_5", "code", "tests", "generator_reward"} <= \
        set(table["columns"]) and len(table["data"]) >= 2
    # the chain stages' report, meaned over each training stage, at its last step
    for field in ("written", "parsed", "distinct", "valid", "mutant_kill_rate", "bugs_caught"):
        history = tracker.client.get_metric_history(run.info.run_id, f"stage_report/s3/{field}")
        assert [m.step for m in history] == [2, 4], field
    # ... stored per step in the run store, one row per chain stage, under the step's manifest
    for step in (1, 2, 3, 4):
        rows = store.read_table("stage_reports", step=step).to_pylist()
        assert [r["stage"] for r in rows] == [1, 2, 3, 4, 5]
        assert all(r["parsed"] <= r["written"] and r["valid"] <= r["distinct"] for r in rows)
        assert any("stage_reports" in f["path"] for f in store.manifest(step)["files"])
    written = tracker.client.get_metric_history(run.info.run_id, "stage_report/s1/written")
    parsed = tracker.client.get_metric_history(run.info.run_id, "stage_report/s1/parsed")
    assert all(p.value <= w.value for p, w in zip(parsed, written, strict=True))
    for name in summary["registered_models"]:
        assert ModelRegistry(tracker).alias_version(name, "candidate") is not None
        assert ModelRegistry(tracker).alias_version(name, "champion") is not None

    # what a user sees: one plain line per step (stdout is piped here), a flow run named by the
    # run id and tagged, task runs named with step, stage and role
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("step ")]
    assert [ln.split(" | ")[0] for ln in lines] == [
        "step 1/4 stage 1 discriminator", "step 2/4 stage 1 generator",
        "step 3/4 stage 2 discriminator", "step 4/4 stage 2 generator"], out
    # each line ends with its time, and every step but the last with the time left
    assert all(re.search(r"\| [0-9.]+ s \| ETA \w+$", ln) for ln in lines[:-1]), lines
    assert re.search(r"\| [0-9.]+ s$", lines[-1]), lines
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, FlowRunFilterName

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(any_=["flow-test"])))
        assert len(runs) == 1, [r.name for r in runs]
        assert {"config:minimal", "stages:1,2"} <= set(runs[0].tags), runs[0].tags
        names = {t.name for t in client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[runs[0].id])))}
    assert {"rollout-step1-stage1", "tests-step1-stage5", "execute-step3",
            "rewards-step4-stage2", "ppo-update-step1-stage1-discriminator",
            "ppo-update-step4-stage2-generator"} <= names, sorted(names)


def test_gae_trains_a_value_head_that_is_saved_and_restored(prefect_harness, tiny_model_dir,
                                                             tmp_path, monkeypatch):
    """ppo.advantage=gae: the update fits a value head next to the adapter; the head rides in
    the resume state and in the stage checkpoint, and a restored run gets it back exactly."""
    from safetensors.torch import load_file

    from artifacts.checkpoints import ADAPTER_DIR
    from artifacts.tracking import Tracker
    from configs import load_config
    from flows.train import train
    from lifecycle.context import RunContext
    from models.resume import VALUE_HEAD_FILE

    monkeypatch.chdir(tmp_path)
    sets = overrides(tiny_model_dir, tmp_path) + [
        "ppo.advantage=gae", "schedule.stages=[1]", "tracking.register_models=false",
        # An untrained model writes no code: pass_rate would be 0 everywhere and leave nothing
        # to fit. The seed's shifted reward gives those samples -0.5.
        "rewards.generator={shifted_pass_rate: 1.0}"]
    summary = train(config=str(REPO / "configs/minimal.yaml"), overrides=sets, run_id="gae-test")
    store = RunStore(str(tmp_path / "runs"), "gae-test")
    updates = store.read("updates")
    assert list(updates["role"]) == ["discriminator", "generator"]
    assert updates["value_loss"].notna().all()
    assert updates.set_index("role").loc["generator", "value_loss"] > 0

    cfg = load_config(str(REPO / "configs/minimal.yaml"), sets)
    ctx = RunContext.open(cfg, "gae-test")
    saved = ctx.resume.folder(2)
    assert load_file(saved / "generator" / VALUE_HEAD_FILE)["proj.bias"].abs().sum() > 0
    for role in ("generator", "discriminator"):                # zero-initialised when loaded
        assert ctx.roles[role].value_head.proj.weight.abs().sum() == 0
    ctx.restore_state(2)
    for role in ("generator", "discriminator"):
        restored = ctx.roles[role].value_head.state_dict()
        for name, tensor in load_file(saved / role / VALUE_HEAD_FILE).items():
            assert restored[name].equal(tensor), (role, name)
        # The optimizer covers the head too: its state has one entry per trained tensor.
        assert len(ctx.roles[role].optimizer.state_dict()["state"]) == len(
            ctx.roles[role].parameters())
    tracker = Tracker(summary["mlflow_tracking_uri"], "minimal")
    ckpt = tracker.latest_checkpoint(summary["mlflow_run_id"], "generator")
    local = tracker.load_checkpoint(ckpt, tmp_path / "ckpt")
    assert (local / ADAPTER_DIR / VALUE_HEAD_FILE).is_file()   # the stage checkpoint has it
    (saved / "generator" / VALUE_HEAD_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="no value head for generator"):
        ctx.restore_state(2)


# The flow subprocesses below have no PREFECT_API_URL, so each starts a temporary Prefect server
# and waits PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS (default 20) for it to answer. In a
# fresh PREFECT_HOME the server first creates and migrates its SQLite database: 9-16 s on an
# idle 2-core machine, 19-34 s with busy loops on the cores, and past 20 s the flow exits 1
# ("Timed out while attempting to connect to ephemeral Prefect API server") before it trains.
EPHEMERAL_SERVER_STARTUP_S = 300
STEP_3_DEADLINE_S = 420  # start to "step 2 complete, step 3 under way": ~25 s idle, ~1 min loaded
RESUME_DEADLINE_S = 420  # the resumed run, steps 3 and 4: ~17 s idle, ~30 s loaded


# Both deadlines fit in the test's own limit, so a slow run fails with its log, not pytest-timeout.
@pytest.mark.timeout(STEP_3_DEADLINE_S + RESUME_DEADLINE_S + 120)
def test_killed_run_resumes_without_losing_or_repeating_a_step(tiny_model_dir, tmp_path):
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(REPO),
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(EPHEMERAL_SERVER_STARTUP_S)}
    cmd = [sys.executable, "-m", "flows.train", "--config", str(REPO / "configs/minimal.yaml"),
           "--run-id", "resume-test"]
    for item in overrides(tiny_model_dir, tmp_path):
        cmd += ["--set", item]
    store = RunStore(str(tmp_path / "runs"), "resume-test")
    first_log = tmp_path / "first-run.log"
    proc = start(cmd, env, tmp_path, first_log)
    try:  # kill it in the middle of step 3: step 2 complete, some of step 3 written
        deadline = time.monotonic() + STEP_3_DEADLINE_S
        in_step_3 = False
        while not in_step_3 and time.monotonic() < deadline and proc.poll() is None:
            in_step_3 = store.is_complete(2) and bool(store.list_parts("chains", 3))
            if not in_step_3:
                time.sleep(0.05)
        assert proc.poll() is None, (f"the run ended (exit code {proc.returncode}) before it "
                                     f"could be killed\n{log_tail(first_log)}")
        assert in_step_3, (f"step 3 not under way after {STEP_3_DEADLINE_S}s (complete: "
                           f"{store.complete_steps()})\n{log_tail(first_log)}")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        kill_group(proc)
    assert store.complete_steps() == [1, 2] and 3 in store.incomplete_steps(), \
        log_tail(first_log)

    resume_log = tmp_path / "resumed-run.log"
    proc = start(cmd, env, tmp_path, resume_log)
    try:
        proc.wait(timeout=RESUME_DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the resumed run still runs after {RESUME_DEADLINE_S}s "
                    f"(complete: {store.complete_steps()})\n{log_tail(resume_log)}")
    finally:
        kill_group(proc)
    assert proc.returncode == 0, log_tail(resume_log)
    assert "resuming after step 2" in resume_log.read_text(errors="replace"), \
        log_tail(resume_log)
    assert store.complete_steps() == [1, 2, 3, 4], log_tail(resume_log)
    updates = store.read("updates")
    assert list(updates["step"]) == [1, 2, 3, 4]  # none lost, none done twice
    for role in ("generator", "discriminator"):
        rows = updates[updates["role"] == role]
        assert list(rows["adapter_version_before"])[1:] == list(rows["adapter_version_after"])[:-1]


def test_init_from_a_registry_alias_starts_from_the_registered_adapters(
        prefect_harness, tiny_model_dir, tmp_path, monkeypatch):
    """A new run with init_from=models:/<name>@champion samples its first step with exactly
    the registered adapters (both roles: the discriminator comes from the same alias), and
    skips the warm start."""
    from artifacts.tracking import Tracker
    from flows.train import train
    from serving.registry import ModelRegistry

    monkeypatch.chdir(tmp_path)
    sets = overrides(tiny_model_dir, tmp_path) + ["schedule.stages=[1]"]
    first = train(config=str(REPO / "configs/minimal.yaml"), overrides=sets, run_id="source")
    tracker = Tracker(first["mlflow_tracking_uri"], "minimal")
    expected = {}
    for name in first["registered_models"]:
        reg = ModelRegistry(tracker).registered_checkpoint(f"models:/{name}@champion",
                                                           tmp_path / "dl")
        expected[reg.checkpoint.role] = reg.checkpoint.extra["adapter_version"]
    assert set(expected) == {"generator", "discriminator"}

    second = train(config=str(REPO / "configs/minimal.yaml"), run_id="started",
                   overrides=sets + ["warm_start.enabled=true", "warm_start.steps=1000"],
                   init_from="models:/minimal-generator@champion")
    chains = RunStore(str(tmp_path / "runs"), "started").read("chains", step=1)
    for role, version in expected.items():
        assert set(chains[chains["role"] == role]["adapter_version"]) == {version}, role
    run = tracker.client.get_run(second["mlflow_run_id"])
    assert run.data.tags["init_from"] == "models:/minimal-generator@champion"
    assert not tracker.client.get_metric_history(run.info.run_id,
                                                 "warm_start/generator_seconds")
