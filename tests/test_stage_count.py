"""The chain's length is one declaration (``configs.names.STAGE_TABLE``): the stage ids, the
prompts and the per-stage rules derive from it, and a table with a sixth stage, or with the
code stage alone, trains through a real step of the train flow on the tiny model, warm start
and held-out evaluation included, with no other file changed.

Each such run is a subprocess that loads ``configs/names.py`` with one statement added right after
the table, before anything else of the project is imported: what a developer adding or
removing a stage writes, and nothing more.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from procs import kill_group, log_tail, start

from artifacts import RunStore
from configs.names import CODE_STAGE, STAGE_TABLE, STAGES
from models.stages import get_all_stages
from pipeline.evaluation import coherence
from problems import guards

REPO = Path(__file__).resolve().parent.parent


def test_stage_ids_and_prompts_come_from_the_table():
    assert STAGES == tuple(range(1, len(STAGE_TABLE) + 1)) and CODE_STAGE == STAGES[-1]
    for stage, spec in zip(get_all_stages(), STAGE_TABLE, strict=True):
        assert stage.generator_prompt_template == (
            f"Stage {stage.id} of {len(STAGES)}: {spec.name}. {spec.instruction}")
        assert (stage.name, stage.discriminator_focus, stage.names_edge_cases) == (
            spec.name, spec.focus, spec.names_edge_cases)


def test_coherence_reads_the_stages_declared_to_name_edge_cases():
    tests = ["assert f([]) == 0", "assert f(-1) == 0"]
    edge = {s for s in STAGES if STAGE_TABLE[s - 1].names_edge_cases}
    assert edge == {2, 4}  # structured reasoning, constraints and invariants
    # a shorter chain's texts are read as the stages they are, not by their position
    assert coherence(["an empty list", "negative x"], tests, "f", stages=(2, 4))[1:] == (2, 2)
    assert coherence(["an empty list", "negative x"], tests, "f", stages=(1, 3))[0] is None


def test_reasoning_stages_take_the_focus_tests_in_turn(monkeypatch):
    monkeypatch.setattr(guards, "STAGES", tuple(range(1, 8)))  # six reasoning stages
    assert guards.per_reasoning_stage("main", ("edge", "boundary", "large")) == {
        1: "main", 2: "edge", 3: "boundary", 4: "large", 5: "edge", 6: "boundary"}
    monkeypatch.setattr(guards, "STAGES", (1,))  # the code stage alone
    assert guards.per_reasoning_stage("main", ("edge",)) == {}

SIXTH = ('StageSpec(name="test plan", description="The cases the code must pass.", '
         'instruction="List the inputs `{entry_point}` must handle and what it returns.", '
         'focus="planned cases: every input the plan lists", names_edge_cases=True)')
TABLES = {
    "six": f"STAGE_TABLE = (*STAGE_TABLE[:-1], {SIXTH}, STAGE_TABLE[-1])",
    "one": "STAGE_TABLE = STAGE_TABLE[-1:]",  # the code stage alone
}

# Runs ``flows.train`` as ``python -m flows.train`` does, with ``configs.names`` loaded from
# its file plus the statement ``EDIT`` right after ``STAGE_TABLE``'s declaration.
RUNNER = textwrap.dedent("""
    import ast, runpy, sys, types
    path, edit, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    source = open(path).read()
    (table,) = [n for n in ast.parse(source).body if isinstance(n, ast.Assign)
                and [getattr(t, "id", None) for t in n.targets] == ["STAGE_TABLE"]]
    lines = source.splitlines()
    lines.insert(table.end_lineno, edit)
    names = types.ModuleType("configs.names")
    names.__file__ = path
    sys.modules["configs.names"] = names
    exec(compile("\\n".join(lines), path, "exec"), names.__dict__)
    import configs
    configs.names = names
    sys.argv = ["flows.train", *argv]
    runpy.run_module("flows.train", run_name="__main__", alter_sys=True)
""")

EPHEMERAL_SERVER_STARTUP_S = 300  # a fresh PREFECT_HOME migrates its database first
RUN_DEADLINE_S = 600


def _run(tmp: Path, tiny_model_dir: Path, table: str, trained: int) -> RunStore:
    """One training step of ``table``'s chain at stage ``trained`` (the generator's), on two
    ``guards`` problems x two samples with short outputs: shrunk for wall-clock time only."""
    overrides = [
        f"model.generator={tiny_model_dir}", f"artifacts.root={tmp / 'runs'}",
        f"tracking.tracking_uri=sqlite:///{tmp / 'mlflow.db'}",
        f"schedule.stages=[{trained}]", "schedule.n_discriminator_steps=0",
        "schedule.n_generator_steps=1", "schedule.k_alternating=0",
        "sampling.max_new_tokens=12", "sampling.samples_per_problem=2",
        "problems.source=family:guards:train", "problems.limit=2",
        "schedule.problems_per_step=2", "rewards.mutants_per_problem=1",
        "warm_start.enabled=true", "warm_start.steps=1", "warm_start.limit=2",
        "warm_start.source=family:guards:warmstart", "evaluation.source=family:guards:heldout",
        "evaluation.limit=1"]
    # configs/minimal.yaml as shipped: it names no stage ids, so the table decides them
    assert "stages" not in yaml.safe_load((REPO / "configs/minimal.yaml").read_text())["schedule"]
    cmd = [sys.executable, "-c", RUNNER, str(REPO / "configs/names.py"), TABLES[table],
           "--config", str(REPO / "configs/minimal.yaml"), "--run-id", table]
    for item in overrides:
        cmd += ["--set", item]
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "PYTHONPATH": str(REPO),
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(EPHEMERAL_SERVER_STARTUP_S)}
    log = tmp / f"{table}.log"
    proc = start(cmd, env, tmp, log)
    try:
        proc.wait(timeout=RUN_DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {table}-stage run still runs after {RUN_DEADLINE_S}s\n{log_tail(log)}")
    finally:
        kill_group(proc)
    assert proc.returncode == 0, log_tail(log)
    store = RunStore(str(tmp / "runs"), table)
    assert store.complete_steps() == [1], log_tail(log)
    return store


def _chain_written(store: RunStore, stages: range) -> None:
    """Step 1 holds both roles' chains and a tests part at every stage, and one generator
    update at the trained stage; the held-out evaluation ran before and after it."""
    chains = store.read("chains", step=1)
    assert set(zip(chains["role"], chains["stage"], strict=True)) == {
        (role, s) for role in ("generator", "discriminator") for s in stages}
    assert len(chains) == 2 * len(stages) * 2 * 2  # roles x stages x problems x samples
    assert {f"stage-{s}" for s in stages} <= set(store.list_parts("tests", 1))
    updates = store.read("updates")
    assert list(zip(updates["role"], updates["stage"], strict=True)) == [
        ("generator", stages[-1])]
    heldout = store.read_json("heldout.json")
    assert [e["label"] for e in heldout] == ["before", f"stage {stages[-1]}"]
    for entry in heldout:  # per-stage figures for exactly the chain's stages
        assert {k for k in entry["metrics"] if k.startswith("new_s")} == {
            f"new_s{s}" for s in stages}


@pytest.mark.slow
@pytest.mark.timeout(RUN_DEADLINE_S + 120)
def test_a_sixth_stage_is_one_entry_in_the_stage_table(tiny_model_dir, tmp_path):
    store = _run(tmp_path, tiny_model_dir, "six", trained=6)
    _chain_written(store, range(1, 7))
    chains = store.read("chains", step=1)
    code = chains[(chains["role"] == "generator") & (chains["stage"] == 6)]
    for prompt in code["prompt"]:  # the new stage sits before the code, numbered in turn
        assert "### Stage 5: test plan" in prompt and "Stage 6 of 6: executable code" in prompt
    plan = chains[(chains["role"] == "discriminator") & (chains["stage"] == 5)]
    assert all("Focus on planned cases" in p for p in plan["prompt"])
    assert store.read_json("config.json")["chain"]["stages"] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
@pytest.mark.timeout(RUN_DEADLINE_S + 120)
def test_a_chain_of_the_code_stage_alone_is_one_entry_in_the_stage_table(tiny_model_dir,
                                                                        tmp_path):
    store = _run(tmp_path, tiny_model_dir, "one", trained=1)
    _chain_written(store, range(1, 2))
    chains = store.read("chains", step=1)
    for prompt in chains[chains["role"] == "generator"]["prompt"]:
        assert "Stage 1 of 1: executable code" in prompt and "### Stage" not in prompt
