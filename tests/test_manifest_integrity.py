"""A completed step is never rewritten by accident: a step manifest that exists but does not
parse or validate is corruption, not absence. The store raises ``ManifestCorrupt`` naming it;
``replay --failed`` and the train flow's resume stop with exit 2 and write nothing, unless
``--rebuild-manifest`` asks to rebuild it (parts checked first, none rewritten); a stage replay
exits non-zero whenever its comparison could not be made, and says MATCHED only when the
recorded parts were checked against the manifest's sha256.

The store tests use tiny hand-made steps; the rest break copies of the real two-step run that
tests/test_replay.py records (its fixtures, recorded once for this module too).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import test_replay
from test_artifacts_store import sample_rows
from test_replay import RUN, part_path
from test_train_flow import overrides

from artifacts.store import ManifestCorrupt, RunStore, StepCompleteError

# tests/test_replay.py's fixtures: its real two-step run (recorded once for this module too)
# and a private copy of it per test
recorded = test_replay.recorded
run_copy = test_replay.run_copy

REPO = Path(__file__).resolve().parent.parent


# -- the store: corrupt is not absent ----------------------------------------------------------

@pytest.fixture()
def store(tmp_path) -> RunStore:
    store = RunStore(str(tmp_path / "runs"), "run-1")
    for step in (1, 2):
        ptrs = [store.write("updates", step, "g", sample_rows("updates", 2)),
                store.write("rewards", step, "all", sample_rows("rewards", 3))]
        store.complete_step(step, ptrs)
    store.write("updates", 3, "g", sample_rows("updates", 1))  # incomplete
    return store


def manifest_file(store: RunStore, step: int) -> Path:
    return Path(store.run_dir) / "_manifests" / f"step={step:06d}.json"


def edit_manifest(store: RunStore, step: int, change) -> None:
    path = manifest_file(store, step)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("damage, reason", [
    (lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]), "not valid JSON"),
    (lambda p: p.write_bytes(b""), "not valid JSON (0 bytes)"),
    (lambda p: p.write_bytes(b"\xff\xfe" * 40), "not valid JSON"),
    (lambda p: p.write_text("[1, 2]"), "a JSON list, not an object"),
])
def test_unparsable_manifest_is_corrupt_not_incomplete(store, damage, reason):
    path = manifest_file(store, 2)
    damage(path)
    with pytest.raises(ManifestCorrupt, match="corrupt manifest of step 2") as info:
        store.manifest(2)
    assert info.value.uri == f"{store.root}/run_id=run-1/_manifests/step=000002.json"
    assert reason in info.value.reason and str(path) in str(info.value)
    for call in (store.is_complete, store.verify_step):
        with pytest.raises(ManifestCorrupt):
            call(2)
    for call in (store.complete_steps, store.incomplete_steps, store.last_complete_step):
        with pytest.raises(ManifestCorrupt, match="step=000002.json"):
            call()
    with pytest.raises(ManifestCorrupt):  # a corrupt step is never written into
        store.write("updates", 2, "g", sample_rows("updates", 1))
    assert [e.step for e in store.corrupt_manifests()] == [2]
    assert store.manifest(1) is not None and store.manifest(3) is None  # the others as before
    assert store.manifest(4) is None  # no manifest at all: absent, not corrupt
    again = pickle.loads(pickle.dumps(info.value))
    assert (type(again), str(again), again.step) == (ManifestCorrupt, str(info.value), 2)


@pytest.mark.parametrize("change, reason", [
    (lambda d: d.update(format="artifacts.manifest/0"), "format 'artifacts.manifest/0'"),
    (lambda d: d.pop("files"), "missing key(s) 'files'"),
    (lambda d: d.pop("run_id"), "missing key(s) 'run_id'"),
    (lambda d: d.update(run_id="run-2"), "it is for run 'run-2', not 'run-1'"),
    (lambda d: d.update(step=1), "it is for step 1, not 2"),
    (lambda d: d.update(step="2"), "'step' is str, expected int"),
    (lambda d: d.update(files={}), "'files' is dict, expected list"),
    (lambda d: d["files"][0].pop("sha256"), "a file entry has no 'sha256'"),
    (lambda d: d["files"][0].update(rows="2"), "'rows' is str"),
    (lambda d: d["files"][0].update(sha256="00"), "'sha256' is not 64 hex digits"),
    (lambda d: d["files"][0].update(path="table=rewards/step=000001/part-all.parquet"),
     "not a part of table 'rewards' in step 2"),
    (lambda d: d["files"].append(d["files"][0]), "listed twice"),
])
def test_manifest_that_does_not_validate_is_corrupt(store, change, reason):
    edit_manifest(store, 2, change)
    with pytest.raises(ManifestCorrupt) as info:
        store.manifest(2)
    assert reason in info.value.reason, info.value.reason


def test_salvage_keeps_the_entries_before_the_cut(store):
    whole = store.manifest(2)["files"]
    path = manifest_file(store, 2)
    text = path.read_text()
    path.write_text(text[: text.index(whole[1]["sha256"])])  # cut inside the second entry
    assert store.salvage_manifest(2) == whole[:1]
    assert store.salvage_manifest(1) == store.manifest(1)["files"]
    assert store.salvage_manifest(3) == []  # no manifest


def test_killed_manifest_write_is_still_incomplete(store):
    """Atomic writes leave a temp file, never a partial manifest: that step is incomplete."""
    (manifest_file(store, 1).parent / ".step=000003.json.tmp-1").write_text("{")
    assert store.incomplete_steps() == [3] and store.complete_steps() == [1, 2]
    with pytest.raises(StepCompleteError):
        store.write("updates", 2, "g", sample_rows("updates", 1))


# -- a real recorded run: replay --failed -------------------------------------------------------

def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (run store, resume states, replay runs) with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def run_manifest(root: Path, step: int) -> Path:
    return root / f"run_id={RUN}" / "_manifests" / f"step={step:06d}.json"


def truncate(path: Path) -> bytes:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return data


def flip(path: Path) -> None:
    """Same size, bytes in the middle flipped."""
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    for i in range(mid, mid + 16):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def cli(root: Path, *args: str) -> list[str]:
    return ["--artifacts-root", str(root), "--run-id", RUN, *args]


@pytest.mark.slow
def test_failed_stops_on_a_truncated_manifest_and_rewrites_nothing(run_copy, capsys):
    from flows.replay import main, replay
    from lifecycle.recorded import CorruptManifestError

    manifest = run_manifest(run_copy, 2)
    truncate(manifest)
    updates = part_path(run_copy, "updates", 2, "generator").read_bytes()
    before = snapshot(run_copy)

    assert main(cli(run_copy, "--failed")) == 2
    err = capsys.readouterr().err
    assert f"{manifest}: corrupt manifest of step 2 (not valid JSON" in err, err
    assert "--rebuild-manifest" in err and "nothing was redone or rewritten" in err
    # the flow itself (a deployment run) refuses the same way
    with pytest.raises(CorruptManifestError, match="step=000002.json: corrupt manifest"):
        replay(run_id=RUN, failed=True, artifacts_root=str(run_copy))
    assert part_path(run_copy, "updates", 2, "generator").read_bytes() == updates
    assert snapshot(run_copy) == before  # nothing written, renamed or removed


@pytest.mark.slow
def test_rebuild_manifest_rebuilds_it_and_changes_nothing_else(run_copy, caplog):
    from flows.replay import main

    manifest = run_manifest(run_copy, 2)
    original = json.loads(manifest.read_bytes())
    truncate(manifest)
    truncated = manifest.read_bytes()
    before = snapshot(run_copy)

    assert main(cli(run_copy, "--failed", "--rebuild-manifest")) == 0
    out = caplog.text  # the flow prints its result through Prefect's logger (log_prints)
    assert "step 2: manifest rebuilt" in out and "no data file was rewritten" in out, out
    assert "not valid JSON" in out
    store = RunStore(str(run_copy), RUN)
    rebuilt = store.manifest(2)
    assert rebuilt["files"] == original["files"]  # every part, same rows, sha256, bytes
    assert {k: v for k, v in rebuilt.items() if k != "completed_at"} == \
        {k: v for k, v in original.items() if k != "completed_at"}
    store.verify_step(2)
    assert store.complete_steps() == [1, 2] and store.incomplete_steps() == []
    after = snapshot(run_copy)
    name = manifest.relative_to(run_copy).as_posix()
    assert after.pop(name + ".corrupt") == truncated  # the corrupt one, kept for inspection
    assert set(after) == set(before)
    assert [k for k in before if after[k] != before[k]] == [name]  # only the manifest changed

    caplog.clear()
    assert main(cli(run_copy, "--failed")) == 0  # nothing left to do
    assert "no incomplete steps" in caplog.text and "rebuilt" not in caplog.text
    assert snapshot(run_copy) == {**after, name + ".corrupt": truncated}


@pytest.mark.slow
def test_rebuild_manifest_refuses_a_step_whose_parts_are_not_intact(run_copy, capsys):
    from flows.replay import main

    manifest = run_manifest(run_copy, 2)
    truncate(manifest)  # the first entries (chains/...) survive the cut, with their sha256
    chains = part_path(run_copy, "chains", 2, "discriminator-1")
    good = chains.read_bytes()
    flip(chains)
    before = snapshot(run_copy)
    assert main(cli(run_copy, "--failed", "--rebuild-manifest")) == 2
    err = capsys.readouterr().err
    assert "step=000002.json cannot be rebuilt" in err and str(chains) in err, err
    assert ("differs from the sha256 it lists" in err or "not a readable Parquet" in err), err
    assert snapshot(run_copy) == before  # nothing written

    chains.write_bytes(good)
    part_path(run_copy, "rewards", 2, "all").unlink()
    before = snapshot(run_copy)
    assert main(cli(run_copy, "--failed", "--rebuild-manifest")) == 2
    err = capsys.readouterr().err
    assert "rewards/step=000002/part-all.parquet is missing" in err, err
    assert snapshot(run_copy) == before


@pytest.mark.slow
def test_train_resume_refuses_a_corrupt_manifest(run_copy, tiny_model_dir, capsys):
    """The train CLI's resume check stops before Prefect starts: step 2 is not redone."""
    from flows.train import main

    manifest = run_manifest(run_copy, 2)
    truncate(manifest)
    before = snapshot(run_copy)
    sets = [o for o in overrides(tiny_model_dir, run_copy.parent)
            if not o.startswith("schedule.stages")] + ["schedule.stages=[1]"]
    argv = ["--config", str(REPO / "configs/minimal.yaml"), "--run-id", RUN,
            "--artifacts-root", str(run_copy)]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{manifest}: corrupt manifest of step 2" in err, err
    assert snapshot(run_copy) == before


# -- a real recorded run: a stage replay that cannot compare says so ---------------------------

@pytest.mark.slow
def test_stage_replay_with_a_truncated_manifest_exits_nonzero(run_copy, capsys):
    from flows.replay import main

    manifest = run_manifest(run_copy, 2)
    truncate(manifest)
    code = main(cli(run_copy, "--step", "2", "--stage", "execute"))
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "MATCHED" not in out + err
    assert f"{manifest}: corrupt manifest of step 2" in err and "cannot be checked" in err


@pytest.mark.slow
def test_stage_replay_with_a_corrupt_recorded_output_is_not_compared(run_copy, capsys):
    from flows.replay import main

    executions = part_path(run_copy, "executions", 2, "all")
    size = executions.stat().st_size
    flip(executions)
    assert executions.stat().st_size == size
    code = main(cli(run_copy, "--step", "2", "--stage", "execute"))
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "NOT COMPARED" in out and "MATCHED" not in out, out
    assert f"{executions}: content differs from the manifest (sha256, {size} bytes" in out, out
    assert "the comparison could not be made" in out


@pytest.mark.slow
def test_stage_replay_of_a_step_without_manifest_is_not_called_matched(run_copy, capsys):
    from flows.replay import main

    run_manifest(run_copy, 2).unlink()  # incomplete: nothing to check the hashes against
    code = main(cli(run_copy, "--step", "2", "--stage", "execute"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "SAME ROWS, UNVERIFIED" in out and "MATCHED" not in out, out
    assert "read without a sha256 check" in out
