"""Replay one kind of work item of a recorded step into ``<ID>.replay`` and compare.

The inputs a replay needs and the outputs it compares come from the step catalogue
(``pipeline.catalogue``); the items run with the train flow's own tasks
(``tasks.step.run_item``); the command line is ``flows.replay``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from artifacts.store import RunStore
from configs.learning import ChainConfig
from configs.names import ROLES
from configs.schema import TrainConfig
from lifecycle.context import RunContext
from lifecycle.recorded import (
    ReplayError,
    check_start_state,
    load_start_state,
    planned_step,
    read_part,
    recorded_versions,
    step_manifest,
)
from pipeline.catalogue import KINDS, StageItem, WorkItem, inputs_of, items_of, kind_outputs
from pipeline.compare import compare_tables
from pipeline.parts import Part
from pipeline.progress import WorkProgress
from pipeline.schedule import PlannedStep
from tasks.step import run_item

REPLAY_SUFFIX = ".replay"


def replay_sequence(stage: str, downstream: bool) -> list[str]:
    """The kinds a replay of ``stage`` runs: it, and with ``downstream`` every later one."""
    if stage not in KINDS:
        raise ReplayError(f"stage={stage!r}: expected one of {', '.join(KINDS)}")
    return list(KINDS[KINDS.index(stage):]) if downstream else [stage]


def replayed_items(sequence: list[str], chain: ChainConfig | None = None) -> list[WorkItem]:
    """The work items of the kinds in ``sequence`` in the run's ``chain``, in step order."""
    return [i for kind in sequence for i in items_of(kind, chain)]


def inputs_to_copy(sequence: list[str], planned: PlannedStep,
                   chain: ChainConfig | None = None) -> list[Part]:
    """Inputs of the replayed items that no replayed item produces, in first-use order."""
    return inputs_of(replayed_items(sequence, chain), planned.role, planned.stage)


def roles_needed(sequence: list[str], planned: PlannedStep,
                 chain: ChainConfig | None = None) -> list[str]:
    """Adapters the replay samples or updates with (the state step N started from)."""
    used = {i.model_role(planned.role) for i in replayed_items(sequence, chain)}
    return [r for r in ROLES if r in used]


@dataclasses.dataclass
class PartResult:
    table: str
    part: str
    rows: int
    matched: bool | None          # None: no readable original to compare with
    detail: str                   # first difference, or why it could not be compared
    path: str


def compare_part(original: RunStore, replayed: RunStore, step: int, table: str,
                 part: str) -> PartResult:
    new = replayed.read_table(table, step=step, part=part)
    path = replayed.part_uri(table, step, part)
    try:
        old = read_part(original, table, step, part)
    except ReplayError as exc:  # missing, unreadable, differs from the manifest, corrupt manifest
        return PartResult(table, part, new.num_rows, None,
                          f"recorded part cannot be used: {exc}", path)
    diff = compare_tables(table, old, new)
    return PartResult(table, part, new.num_rows, diff is None, diff or "", path)


# -- replaying a stage --------------------------------------------------------------------------

def check_replayable(cfg: TrainConfig, run_id: str, step: int, stage: str,
                     downstream: bool) -> tuple[PlannedStep, list[str], list[Part]]:
    """Everything that can be checked without models: step, stage, every input file."""
    planned = planned_step(cfg, step)
    sequence = replay_sequence(stage, downstream)
    if not replayed_items(sequence, cfg.chain):
        raise ReplayError(f"stage={stage!r}: run {run_id}'s chain has no such work "
                          f"(chain.stages={list(cfg.chain.stages)}, chain.discriminator="
                          f"{str(cfg.chain.discriminator).lower()})")
    store = RunStore(cfg.artifacts.root, run_id)
    step_manifest(store, step)  # a corrupt one: CorruptManifestError, nothing is replayed
    needed = inputs_to_copy(sequence, planned, cfg.chain)
    for table, part in needed:
        read_part(store, table, step, part)
    check_start_state(cfg, run_id, step, roles_needed(sequence, planned, cfg.chain))
    return planned, sequence, needed


def replay_stage(cfg: TrainConfig, run_id: str, step: int, stage: str,
                 downstream: bool = False) -> dict[str, Any]:
    """Replay ``stage`` (and with ``downstream`` every later one) of ``step`` into
    ``<run_id>.replay`` and compare with the recorded parts."""
    planned, sequence, needed = check_replayable(cfg, run_id, step, stage, downstream)
    original = RunStore(cfg.artifacts.root, run_id)
    target = RunStore(cfg.artifacts.root, run_id + REPLAY_SUFFIX)
    roles = roles_needed(sequence, planned, cfg.chain)
    ctx = RunContext.open(cfg, run_id, load_models=bool(roles))
    adapters = {}
    if roles:
        expected = recorded_versions(original, step)
        adapters = load_start_state(ctx, step, roles, expected,
                                    optimizers="update" in sequence)
    target.clear_steps([step])  # the previous replay of this step, if any
    for table, part in needed:
        target.write(table, step, part, read_part(original, table, step, part)
                     .drop_columns(["run_id", "step"]))
    replay_ctx = dataclasses.replace(ctx, store=target)
    items = replayed_items(sequence, cfg.chain)
    try:
        with WorkProgress(f"replay of step {step}", len(items), "parts") as progress:
            for item in items:  # run_stage's loop, one item at a time for the progress
                run_item(replay_ctx, planned, item)
                progress.advance(1)
    finally:
        replay_ctx.close()  # the vLLM engine a replayed rollout started
    target.complete_step(step)
    try:  # hashes are checked only against a manifest
        verified = step_manifest(original, step) is not None
    except ReplayError:
        verified = False  # corrupt since the check: every part says so, NOT COMPARED
    parts = [compare_part(original, target, step, t, p)
             for s in sequence for t, p in kind_outputs(s, planned.role, cfg.chain)]
    seeds = {f"{role}-{i.stage}": ctx.seed(step, i.stage, role)
             for i in items if isinstance(i, StageItem)
             for role in [i.model_role(planned.role)]}
    matched = None if any(p.matched is None for p in parts) else all(p.matched for p in parts)
    if any(p.matched is False for p in parts):
        matched = False
    report = {"run_id": run_id, "step": step, "stage": stage, "replayed": sequence,
              "training_stage": planned.stage, "role": planned.role, "matched": matched,
              "verified": verified,
              "adapters": adapters, "seeds": seeds,
              "copied_inputs": [f"{t}/{p}" for t, p in needed],
              "replay_run": target.run_dir, "parts": [dataclasses.asdict(p) for p in parts]}
    report["report"] = target.write_json(f"replay-{step:06d}-{stage}.json", report)
    return report
