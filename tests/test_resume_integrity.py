"""Resume verifies what it restores: every file of a resume state against the state's manifest
(sha256) and every adapter against its recorded ``adapter_version``, before anything is
trained. A damaged newest state makes the run fall back to the newest intact one and redo the
steps after it; no intact state exits 2 with a message naming the files.

One real GAE run (two steps, so the adapters, their configs, the value heads and the
optimizers are all in each state) is recorded once per module; each test breaks a copy.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from test_train_flow import overrides

from artifacts import RunStore

REPO = Path(__file__).resolve().parent.parent
CONFIG = str(REPO / "configs/minimal.yaml")
RUN = "resume-integrity"
pytestmark = pytest.mark.slow


def run_overrides(tiny_model_dir: Path, tmp: Path) -> list[str]:
    """tests/test_train_flow.py's shrunk config with one training stage (steps 1 and 2, so
    states 1 and 2 are kept) and GAE, so every state holds value heads too; the KL reference
    is the start (``ppo.kl_reference=start``), so the run keeps one more folder to check."""
    items = [o for o in overrides(tiny_model_dir, tmp) if not o.startswith("schedule.stages")]
    return [*items, "schedule.stages=[1]", "ppo.advantage=gae", "tracking.register_models=false",
            "rewards.generator={shifted_pass_rate: 1.0}", "ppo.kl_reference=start"]


@pytest.fixture(scope="module")
def recorded(prefect_harness, tiny_model_dir, tmp_path_factory) -> Path:
    """Folder of a finished two-step run: step 1 updates the discriminator, step 2 the
    generator; resume states 1 and 2 are kept."""
    from flows.train import train

    tmp = tmp_path_factory.mktemp("resume-integrity")
    cwd = os.getcwd()
    os.chdir(tmp)  # nothing may be written to the caller's folder
    try:
        train(config=CONFIG, overrides=run_overrides(tiny_model_dir, tmp), run_id=RUN)
    finally:
        os.chdir(cwd)
    assert RunStore(str(tmp / "runs"), RUN).complete_steps() == [1, 2]
    return tmp


class Copy:
    """A private copy of the recorded run for one test to break (its own MLflow store)."""

    def __init__(self, recorded: Path, tmp: Path, tiny_model_dir: Path) -> None:
        shutil.copytree(recorded / "runs", tmp / "runs")
        self.root = tmp
        self.sets = run_overrides(tiny_model_dir, tmp)
        self.store = RunStore(str(tmp / "runs"), RUN)
        self.states = tmp / "runs" / "_state" / f"run_id={RUN}"

    def state(self, step: int) -> Path:
        return self.states / f"step={step:06d}"

    def manifest(self, step: int) -> dict:
        return json.loads((self.state(step) / "manifest.json").read_text())

    def cfg(self):
        from configs import load_config

        return load_config(CONFIG, self.sets)

    def context(self):
        from lifecycle.context import RunContext

        return RunContext.open(self.cfg(), RUN)

    def cli(self) -> list[str]:
        argv = ["--config", CONFIG, "--run-id", RUN]
        for item in self.sets:
            argv += ["--set", item]
        return argv


@pytest.fixture
def run_copy(recorded, tmp_path, tiny_model_dir, monkeypatch) -> Copy:
    monkeypatch.chdir(tmp_path)
    return Copy(recorded, tmp_path, tiny_model_dir)


def zero_tail(path: Path) -> None:
    """Zero the second half of a file, keeping its size (the header of a safetensors file
    survives: it still parses, with zeroed weights)."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def garbage(path: Path) -> None:
    """Same size, the middle scrambled (what gave ``probability tensor contains inf/nan``)."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid: mid + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))


# -- the real flow: fall back, redo, complete ---------------------------------------------------

def console(capfd, caplog) -> str:
    """What a run printed: its flow's prints reach the console through Prefect's logger."""
    return "".join(capfd.readouterr()) + caplog.text


def test_zeroed_adapter_falls_back_to_the_older_state_and_redoes_the_step(run_copy, capfd,
                                                                          caplog):
    from flows.train import train

    bad = run_copy.state(2) / "generator" / "adapter_model.safetensors"
    size = bad.stat().st_size
    zero_tail(bad)
    assert bad.stat().st_size == size
    expected = run_copy.manifest(1)["adapter_versions"]
    before = run_copy.store.read("updates")
    assert list(before["step"]) == [1, 2]

    train(config=CONFIG, overrides=run_copy.sets, run_id=RUN)

    out = console(capfd, caplog)
    assert str(bad) in out  # names the file, with the expected and found versions
    recorded_v = run_copy.store.read("updates", step=2)["adapter_version_after"][0]
    assert f"generator adapter_version expected {recorded_v}, found " in out
    assert "resuming from the resume state of step 1" in out
    assert "step 2 of run resume-integrity will be redone from the state of step 1" in out
    assert "Traceback" not in out
    # the run completed again, step 2 redone from the verified state of step 1
    assert run_copy.store.complete_steps() == [1, 2] and run_copy.store.incomplete_steps() == []
    updates = run_copy.store.read("updates")
    assert list(updates["step"]) == [1, 2]
    redone = updates.set_index("role").loc["generator"]
    assert redone["adapter_version_before"] == expected["generator"]
    assert expected["generator"] == run_copy.store.read(
        "chains", step=1, part="generator-1")["adapter_version"][0]
    # the new state 2 is whole and verified; the damaged one is kept aside
    assert run_copy.manifest(2)["adapter_versions"]["generator"] == \
        redone["adapter_version_after"]
    assert (run_copy.states / "damaged-step=000002" / "generator" /
            "adapter_model.safetensors").read_bytes()[-16:] == bytes(16)
    assert sorted(p.name for p in run_copy.states.iterdir()) == [
        "damaged-step=000002", "reference", "step=000001", "step=000002"]


def test_the_kl_reference_is_the_start_and_a_damaged_one_is_refused(run_copy):
    """``ppo.kl_reference=start``: the run's reference holds the adapters its step-1 chains
    were sampled with (before any update), and a resumed run checks it before using it."""
    from models.resume import StateIntegrityError

    reference = run_copy.states / "reference"
    versions = json.loads((reference / "manifest.json").read_text())["adapter_versions"]
    for role in ("generator", "discriminator"):
        assert versions[role] == run_copy.store.read(
            "chains", step=1, part=f"{role}-1")["adapter_version"][0]
    ctx = run_copy.context()
    ctx.fix_reference(2)  # what the train flow does resuming after step 2
    assert ctx.policies.has_reference("discriminator")
    bad = reference / "discriminator" / "adapter_model.safetensors"
    garbage(bad)
    with pytest.raises(StateIntegrityError, match=f"{bad}: content differs"):
        run_copy.context().fix_reference(2)


def test_a_replayed_update_loads_the_runs_kl_reference(run_copy):
    """A replay builds its own models: the update it redoes finds the run's reference there
    (without it, it would refuse) and lands on the recorded adapter."""
    from flows.replay import replay

    report = replay(run_id=RUN, step=2, stage="update", artifacts_root=str(run_copy.root / "runs"))
    assert [p["part"] for p in report["parts"]] == ["generator"]
    assert report["matched"] is True, report["parts"]


def test_truncated_adapter_falls_back_without_a_traceback(run_copy, capfd, caplog):
    from flows.train import main

    bad = run_copy.state(2) / "discriminator" / "adapter_model.safetensors"
    truncate(bad)
    assert main(run_copy.cli()) == 0
    out = console(capfd, caplog)
    assert str(bad) in out and "resuming from the resume state of step 1" in out
    assert "unreadable (SafetensorError" in out  # the found version: the reason, in one line
    assert "Traceback" not in out
    assert run_copy.store.complete_steps() == [1, 2]


# -- detection of every kind of file, through resume_point directly -----------------------------

@pytest.mark.parametrize(("rel", "damage"), [
    ("generator-optimizer.pt", zero_tail),
    ("discriminator-optimizer.pt", truncate),
    ("generator/value_head.safetensors", zero_tail),
    ("discriminator/value_head.safetensors", garbage),
    ("generator/adapter_model.safetensors", garbage),
    ("generator/adapter_config.json", garbage),
])
def test_every_damaged_state_file_is_detected_and_step_2_reopened(run_copy, rel, damage,
                                                                   capsys):
    from lifecycle.resume import resume_point
    from pipeline.schedule import plan

    damage(run_copy.state(2) / rel)
    ctx = run_copy.context()
    assert resume_point(ctx, plan(ctx.cfg.schedule)) == 1
    out = capsys.readouterr().out
    assert f"{run_copy.state(2) / rel}: content differs from manifest.json (" in out
    assert "sha256 expected" in out and "resuming from the resume state of step 1" in out
    versions = run_copy.manifest(1)["adapter_versions"]
    assert {r: ctx.policies.adapter_version(r) for r in versions} == versions
    # step 2 is open again, with none of its data left; state 2 is set aside
    assert run_copy.store.complete_steps() == [1] and run_copy.store.list_steps() == [1]
    assert ctx.resume.steps() == [1]
    assert (run_copy.states / "damaged-step=000002" / rel).is_file()


def test_recorded_versions_come_from_the_updates_table_or_the_first_chains(run_copy):
    from models.resume import recorded_state_versions

    updates = run_copy.store.read("updates").set_index("step")
    chains = run_copy.store.read("chains", step=1, part="generator-1")["adapter_version"][0]
    assert recorded_state_versions(run_copy.store, 1) == {  # generator: not updated yet
        "discriminator": (updates.loc[1, "adapter_version_after"], "updates table, step 1"),
        "generator": (chains, "chains table, step 1 (sampled before any update)")}
    assert recorded_state_versions(run_copy.store, 2) == {
        "generator": (updates.loc[2, "adapter_version_after"], "updates table, step 2"),
        "discriminator": (updates.loc[1, "adapter_version_after"], "updates table, step 1")}
    for step in (1, 2):
        assert {r: v for r, (v, _) in recorded_state_versions(run_copy.store, step).items()} \
            == run_copy.manifest(step)["adapter_versions"]


def test_missing_value_head_is_named(run_copy):
    from models.resume import StateFileMissingError

    (run_copy.state(2) / "generator" / "value_head.safetensors").unlink()
    with pytest.raises(StateFileMissingError, match="no value head for generator"):
        run_copy.context().restore_state(2)


def test_state_that_disagrees_with_the_updates_table_is_refused(run_copy):
    """Intact files, but the manifest's version is not the one the updates table recorded."""
    from models.resume import StateIntegrityError

    path = run_copy.state(2) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["adapter_versions"]["generator"] = "0123456789abcdef"
    path.write_text(json.dumps(manifest))
    recorded_v = run_copy.store.read("updates", step=2)["adapter_version_after"][0]
    with pytest.raises(StateIntegrityError,
                       match=f"generator adapter_version expected {recorded_v} \\(the updates "
                             "table, step 2\\), found 0123456789abcdef"):
        run_copy.context().restore_state(2)


# -- states without a manifest (written before manifests) --------------------------------------

def test_state_without_manifest_is_checked_against_the_updates_table(run_copy, capsys):
    from models.resume import StateIntegrityError

    (run_copy.state(2) / "manifest.json").unlink()
    ctx = run_copy.context()
    versions = ctx.restore_state(2)  # the adapter files hold the recorded versions: accepted
    updates = run_copy.store.read("updates").set_index("role")["adapter_version_after"]
    assert versions == dict(updates)
    assert "no manifest.json" in capsys.readouterr().out  # with a warning

    zero_tail(run_copy.state(2) / "generator" / "adapter_model.safetensors")
    with pytest.raises(StateIntegrityError, match=f"generator adapter_version expected "
                                                  f"{updates['generator']} \\(the updates table"):
        ctx.restore_state(2)


def test_state_without_manifest_or_record_cannot_be_verified(run_copy):
    from models.resume import StateIntegrityError

    (run_copy.state(2) / "manifest.json").unlink()
    (run_copy.root / "runs" / f"run_id={RUN}" / "table=updates" / "step=000002" /
     "part-generator.parquet").write_bytes(b"not parquet")  # the record is unreadable too
    with pytest.raises(StateIntegrityError, match="records no adapter_version for generator"):
        run_copy.context().restore_state(2)


# -- nothing intact: exit 2 -------------------------------------------------------------------

def test_all_states_damaged_exits_2_naming_each_file(run_copy, capsys):
    from flows.train import main

    first = run_copy.state(2) / "generator" / "adapter_model.safetensors"
    second = run_copy.state(1) / "discriminator-optimizer.pt"
    zero_tail(first)
    truncate(second)
    assert main(run_copy.cli()) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("error: run resume-integrity: no intact resume state")
    assert f"step 2: {first}: content differs" in err
    assert f"step 1: {second}: content differs" in err and "start a new run id" in err
    assert "Traceback" not in captured.out + err
    # nothing was touched: the run can still be repaired by putting intact states back
    assert run_copy.store.complete_steps() == [1, 2]
    assert sorted(p.name for p in run_copy.states.iterdir()) == [
        "reference", "step=000001", "step=000002"]


def test_no_intact_state_in_the_flow_raises_the_same_error(run_copy):
    """What the flow sees if the check before Prefect was skipped (or the damage came after):
    resume_point raises StateIntegrityError, which the CLI turns into exit 2."""
    from lifecycle.resume import resume_point
    from models.resume import StateIntegrityError
    from pipeline.schedule import plan

    shutil.rmtree(run_copy.state(2))
    (run_copy.state(1) / "manifest.json").write_text("{")
    ctx = run_copy.context()
    with pytest.raises(StateIntegrityError) as info:
        resume_point(ctx, plan(ctx.cfg.schedule))
    message = str(info.value)
    assert f"step 2: {run_copy.state(2)}: missing (step 2 is complete)" in message
    assert f"step 1: {run_copy.state(1) / 'manifest.json'}: unreadable" in message
    assert run_copy.store.complete_steps() == [1, 2]


def test_damaged_warm_start_state_is_redone_when_no_step_is_complete(run_copy, capsys):
    """State 0 only (a warm start, then a kill before step 1 completed): nothing is lost by
    redoing the warm start, so a damaged state 0 is set aside rather than refused."""
    from lifecycle.resume import resume_point
    from pipeline.schedule import plan

    for step in (1, 2):
        shutil.rmtree(run_copy.state(step))
    ctx = run_copy.context()
    ctx.save_state(0)  # stands in for the warm start's state
    for step in (2, 1):
        (run_copy.root / "runs" / f"run_id={RUN}" / "_manifests" /
         f"step={step:06d}.json").unlink()
    garbage(run_copy.state(0) / "generator" / "adapter_model.safetensors")
    assert resume_point(ctx, plan(ctx.cfg.schedule)) == 0
    out = capsys.readouterr().out
    assert "the warm start is redone" in out
    assert ctx.resume.steps() == [] and run_copy.store.list_steps() == []
    assert (run_copy.states / "damaged-step=000000").is_dir()
