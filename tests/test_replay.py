"""Replays of a real recorded run (the train flow on a shrunk config, recorded once per module):
deterministic stages reproduce the stored rows, generation reproduces its output from the
recorded adapter and seed, ``--failed`` finishes a broken step in place, and a step that cannot
be replayed says which file or adapter version is missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from test_train_flow import overrides

from artifacts import RunStore
from flows.replay import main
from lifecycle.recorded import ReplayError, run_config
from pipeline.compare import compare_tables
from pipeline.schedule import PlannedStep
from tasks.replay import REPLAY_SUFFIX, inputs_to_copy, replay_sequence, replay_stage

REPO = Path(__file__).resolve().parent.parent
RUN = "replay-src"


# -- pure helpers (no run needed) ---------------------------------------------------------------

def test_compare_ignores_only_timings():
    t = pa.table({"stage": [1, 1], "status": ["passed", "failed"], "message": [None, "boom"],
                  "duration_s": [0.1, 0.2]})
    assert compare_tables("executions", t, t.set_column(3, "duration_s", pa.array([5.0, 6.0])))\
        is None
    diff = compare_tables("executions", t, t.set_column(2, "message", pa.array([None, "bam"])))
    assert diff == "row 1, column 'message': recorded 'boom', replayed 'bam'"
    assert compare_tables("executions", t, t.slice(1)) == "2 rows recorded, 1 replayed"
    # a timing column of one table is data in another
    r = pa.table({"n_tests": [1], "duration_s": [0.1]})
    assert compare_tables("rewards", r, r.set_column(1, "duration_s", pa.array([0.2])))


def test_downstream_copies_only_what_no_replayed_stage_makes():
    planned = PlannedStep(step=2, stage=1, role="discriminator", phase="discriminator")
    assert inputs_to_copy(replay_sequence("rewards", False), planned)[-1] == ("executions", "all")
    copied = inputs_to_copy(replay_sequence("execute", True), planned)
    assert ("executions", "all") not in copied and ("rewards", "all") not in copied
    assert ("chains", "discriminator-1") in copied  # the update trains on it
    assert inputs_to_copy(replay_sequence("rollout", True), planned) == []
    with pytest.raises(ReplayError, match="stage='decode'"):
        replay_sequence("decode", False)


# -- a real recorded run ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def recorded(prefect_harness, tiny_model_dir, tmp_path_factory) -> Path:
    """Root of a finished two-step run: step 1 updates the discriminator from the fresh
    adapters, step 2 the generator from step 1's state (both states are kept)."""
    from flows.train import train

    tmp = tmp_path_factory.mktemp("replay-run")
    # One training stage is all a replay needs (steps from fresh and from saved adapters);
    # everything else is tests/test_train_flow.py's shrunk config.
    items = [o for o in overrides(tiny_model_dir, tmp) if not o.startswith("schedule.stages")]
    train(config=str(REPO / "configs/minimal.yaml"), overrides=[*items, "schedule.stages=[1]"],
          run_id=RUN)
    root = tmp / "runs"
    assert RunStore(str(root), RUN).complete_steps() == [1, 2]
    return root


@pytest.fixture
def run_copy(recorded, tmp_path) -> Path:
    """A private copy of the recorded run (store + resume states) for a test to break."""
    root = tmp_path / "runs"
    shutil.copytree(recorded, root)
    return root


def part_path(root: Path, table: str, step: int, part: str) -> Path:
    return root / f"run_id={RUN}" / f"table={table}" / f"step={step:06d}" / f"part-{part}.parquet"


@pytest.mark.slow
def test_the_run_stores_its_config(recorded):
    cfg = run_config(str(recorded), RUN)
    assert cfg.schedule.stages == (1,) and cfg.artifacts.root == str(recorded)


@pytest.mark.slow
def test_execution_replay_reproduces_deleted_or_corrupted_executions(run_copy):
    from flows.replay import replay

    store = RunStore(str(run_copy), RUN)
    original = store.read_table("executions", step=2)
    replayed_store = RunStore(str(run_copy), RUN + REPLAY_SUFFIX)
    path = part_path(run_copy, "executions", 2, "all")
    for damage in ("delete", "corrupt"):
        if damage == "delete":
            path.unlink()
        else:
            path.write_bytes(b"PAR1 not really parquet")
        report = replay(run_id=RUN, step=2, stage="execute", artifacts_root=str(run_copy))
        (part,) = report["parts"]
        assert part["matched"] is None and "executions/step=000002" in part["detail"]
        again = replayed_store.read_table("executions", step=2)
        assert again.num_rows == original.num_rows > 0
        assert compare_tables("executions", original, again) is None, damage
        assert replayed_store.is_complete(2)
    assert path.read_bytes() == b"PAR1 not really parquet"  # the record is never rewritten


@pytest.mark.slow
def test_deterministic_replays_match_the_recorded_rows_downstream(run_copy):
    from flows.replay import replay

    report = replay(run_id=RUN, step=1, stage="execute", downstream=True,
                    artifacts_root=str(run_copy))
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    name = f"{RUN} replay: step 1 execute+"  # named for what it replays, not at random
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            name=FlowRunFilterName(any_=[name])))
    assert runs, f"no flow run named {name!r}"
    results = {f"{p['table']}/{p['part']}": p for p in report["parts"]}
    assert set(results) == {"executions/all", "rewards/all", "updates/discriminator"}
    assert results["executions/all"]["matched"], results["executions/all"]["detail"]
    assert results["rewards/all"]["matched"], results["rewards/all"]["detail"]
    # rewards carry no timing column: the replay equals the stored table exactly
    stored = RunStore(str(run_copy), RUN).read_table("rewards", step=1).drop_columns(["run_id"])
    again = RunStore(str(run_copy), RUN + REPLAY_SUFFIX).read_table("rewards", step=1)
    assert again.drop_columns(["run_id"]).equals(stored)
    # the update starts from the fresh discriminator and must land on the recorded adapter
    assert results["updates/discriminator"]["matched"], results["updates/discriminator"]
    assert report["matched"] is True


@pytest.mark.slow
def test_generation_replay_matches_with_recorded_adapter_and_seed(run_copy):
    from flows.replay import replay

    store = RunStore(str(run_copy), RUN)
    for step, stage, role, source in ((2, "rollout", "generator", "step=000001"),
                                      (1, "tests", "discriminator", "fresh adapters")):
        report = replay(run_id=RUN, step=step, stage=stage, artifacts_root=str(run_copy))
        assert report["matched"] is True, [p for p in report["parts"] if not p["matched"]]
        # five chains parts; the tests' five chains and five suites (the problems' own tests
        # are the baseline item's)
        assert len(report["parts"]) == (5 if stage == "rollout" else 10)
        recorded = store.read_table("chains", step=step, part=f"{role}-1")
        assert report["adapters"][role].startswith(recorded["adapter_version"][0].as_py())
        assert source in report["adapters"][role]
        assert set(recorded["seed"].to_pylist()) == {report["seeds"][f"{role}-1"]}


@pytest.mark.slow
def test_failed_finishes_an_incomplete_step_in_place(run_copy):
    from flows.replay import replay

    store = RunStore(str(run_copy), RUN)
    before = {t: store.read_table(t, step=2) for t in ("executions", "rewards", "updates")}
    # a crash in step 2 after the discriminator's stage-5 output, before its tests were parsed
    (run_copy / f"run_id={RUN}" / "_manifests" / "step=000002.json").unlink()
    for table, part in (("tests", "stage-5"), ("executions", "all"), ("rewards", "all"),
                        ("updates", "generator")):
        part_path(run_copy, table, 2, part).unlink()
    shutil.rmtree(run_copy / "_state" / f"run_id={RUN}" / "step=000002")
    assert store.incomplete_steps() == [2]

    result = replay(run_id=RUN, failed=True, artifacts_root=str(run_copy))
    assert [(r["step"], r["resumed_from"]) for r in result["finished"]] == [(2, "tests-5")]
    assert store.complete_steps() == [1, 2] and store.incomplete_steps() == []
    for table, rows in before.items():
        assert compare_tables(table, rows, store.read_table(table, step=2)) is None, table
    assert (run_copy / "_state" / f"run_id={RUN}" / "step=000002").is_dir()
    assert replay(run_id=RUN, failed=True, artifacts_root=str(run_copy))["finished"] == []


@pytest.mark.slow
def test_missing_input_file_is_named(run_copy, capsys):
    part_path(run_copy, "tests", 1, "stage-3").unlink()
    code = main(["--artifacts-root", str(run_copy), "--run-id", RUN, "--step", "1",
                 "--stage", "rewards"])
    assert code == 2
    err = capsys.readouterr().err
    assert "tests/step=000001/part-stage-3.parquet" in err and "missing" in err


@pytest.mark.slow
def test_missing_adapter_version_is_named(run_copy, capsys, monkeypatch):
    shutil.rmtree(run_copy / "_state" / f"run_id={RUN}" / "step=000001")
    # the command says so before any server starts or model loads: one error line, exit 2
    monkeypatch.setattr("flows.replay.ensure_prefect_api", lambda **_: pytest.fail("started"))
    assert main(["--artifacts-root", str(run_copy), "--run-id", RUN, "--step", "2",
                 "--stage", "rollout"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: adapter version ") and "can be replayed: " in err, err
    assert "Traceback" not in err
    cfg = run_config(str(run_copy), RUN)
    version = RunStore(str(run_copy), RUN).read_table(
        "chains", step=2, part="generator-1")["adapter_version"][0].as_py()
    with pytest.raises(ReplayError, match=f"adapter version {version} \\(generator\\) of step 1 "
                                          "is gone") as info:
        replay_stage(cfg, RUN, 2, "rollout")
    # it names the steps that can be replayed: not 2 (its start state is what was removed)
    listed = str(info.value).rsplit("so they can be replayed: ", 1)[1]
    steps = [] if listed == "none" else [int(s) for s in listed.split(", ")]
    assert 2 not in steps and set(steps) <= set(RunStore(str(run_copy), RUN).list_steps())
    assert steps, str(info.value)  # the run keeps later states (and step 1 starts fresh)


def test_cli_needs_failed_or_step_and_stage():
    for argv in (["--run-id", "r"], ["--run-id", "r", "--step", "1"],
                 ["--run-id", "r", "--failed", "--step", "1", "--stage", "execute"]):
        with pytest.raises(SystemExit):
            main(argv)


def _make_step_incomplete(root: Path, step: int) -> RunStore:
    (root / f"run_id={RUN}" / "_manifests" / f"step={step:06d}.json").unlink()
    return RunStore(str(root), RUN)


@pytest.mark.slow
def test_execution_replay_reproduces_real_verdicts(run_copy):
    """The tiny model writes no code; give step 1 real candidates (one right, one raising) and
    valid and invalid discriminator tests, finish it, then replay its execution."""
    from flows.replay import replay
    from lifecycle.context import RunContext

    store = _make_step_incomplete(run_copy, 1)
    ctx = RunContext.open(run_config(str(run_copy), RUN), RUN, load_models=False)
    chains = store.read_table("chains", step=1, part="generator-5").to_pylist()
    tests = []
    for row, (problem, j) in zip(chains, ctx.samples(1), strict=True):
        bad = f"def {problem.entry_point}(*args, **kwargs):\n    raise ValueError('nope')\n"
        row["output_text"] = f"```python\n{problem.reference_solution if j == 0 else bad}```"
        good = problem.baseline_tests[0]
        for i, snippet in enumerate((good, good.replace("==", "!=", 1))):
            tests.append({"stage": 1, "problem_id": problem.id, "sample_idx": j, "test_idx": i,
                          "test_id": f"s1.{i}", "origin": "discriminator", "snippet": snippet,
                          "parse_status": "ok", "drop_reason": None, "is_duplicate": False,
                          "duplicate_of": None})
    store.write("chains", 1, "generator-5", [{k: v for k, v in r.items()
                                               if k not in ("run_id", "step")} for r in chains])
    store.write("tests", 1, "stage-1", tests)
    for table, part in (("executions", "all"), ("rewards", "all"), ("updates", "discriminator")):
        part_path(run_copy, table, 1, part).unlink()
    assert replay(run_id=RUN, failed=True, artifacts_root=str(run_copy))["finished"][0][
        "resumed_from"] == "execute"
    statuses = set(store.read_table("executions", step=1)["status"].to_pylist())
    assert {"passed", "failed", "error"} <= statuses, statuses

    report = replay(run_id=RUN, step=1, stage="execute", downstream=True,
                    artifacts_root=str(run_copy))
    assert report["matched"] is True, [p for p in report["parts"] if not p["matched"]]


@pytest.mark.slow
def test_a_replay_that_differs_says_where(run_copy, capsys):
    store = _make_step_incomplete(run_copy, 1)
    rows = store.read_table("executions", step=1).to_pylist()
    for r in rows:  # the reference now fails every test: no test is valid any more
        if r["target_kind"] == "reference":
            r["status"] = "failed"
    store.write("executions", 1, "all", [{k: v for k, v in r.items()
                                          if k not in ("run_id", "step")} for r in rows])
    code = main(["--artifacts-root", str(run_copy), "--run-id", RUN, "--step", "1",
                 "--stage", "rewards"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "rewards/all" in out and "DIFFERS: row 0, column 'n_" in out  # n_tests, n_valid
