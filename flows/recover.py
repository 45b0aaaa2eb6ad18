"""``python -m flows.replay --run-id ID --failed``: finish, in place, the steps a crash left
incomplete.

A step with files but no manifest keeps the parts that are there and readable; the first
missing one and everything after it (each chain stage, execution, rewards, update) is redone
with the train flow's tasks from the state the step started from. Then the state is saved,
the step logged, and the manifest written last, as the train flow does, so a second crash
leaves the step incomplete again rather than half-recorded.
"""

from __future__ import annotations

from typing import Any

from artifacts.store import RunStore
from configs.schema import TrainConfig
from tasks import generate_tests, rollout
from tasks.recorded import (
    CHAIN_STAGES,
    Part,
    ReplayError,
    load_start_state,
    planned_step,
    read_part,
    recorded_versions,
    run_stage,
    stage_outputs,
)
from tasks.reporting import close_step
from tasks.runtime import RunContext, open_run
from tasks.schedule import ROLES, PlannedStep, plan

Item = tuple[str, int | None]  # (stage, chain stage for rollout/tests)


def work_items() -> list[Item]:
    """A step's work in the train flow's order: g1, d1, ..., g5, d5, execute, rewards, update."""
    items: list[Item] = []
    for s in CHAIN_STAGES:
        items += [("rollout", s), ("tests", s)]
    return items + [("execute", None), ("rewards", None), ("update", None)]


def item_outputs(item: Item, planned: PlannedStep) -> list[Part]:
    kind, s = item
    if kind == "rollout":
        return [("chains", f"generator-{s}")]
    if kind == "tests":
        return [("chains", f"discriminator-{s}"), ("tests", f"stage-{s}")] + \
            ([("tests", "baseline")] if s == 1 else [])
    return stage_outputs(kind, planned)


def first_missing(store: RunStore, planned: PlannedStep, state_steps: list[int]) -> int:
    """Index in ``work_items()`` of the first item whose outputs are not all there and
    readable (the update also needs its saved state); ``len(work_items())`` when all are."""
    items = work_items()
    for i, item in enumerate(items):
        for table, part in item_outputs(item, planned):
            try:
                read_part(store, table, planned.step, part)
            except ReplayError:
                return i
    return len(items) - 1 if planned.step not in state_steps else len(items)


def finish_step(ctx: RunContext, planned: PlannedStep, last_of_stage: bool) -> dict[str, Any]:
    """Redo the first missing item of an incomplete step and everything after it, then save
    the state, log the step and write the manifest last (as the train flow does)."""
    step, items = planned.step, work_items()
    if step > 1 and not ctx.store.is_complete(step - 1):
        raise ReplayError(f"{ctx.store.root}/run_id={ctx.run_id}/_manifests/step="
                          f"{step - 1:06d}.json: missing; step {step} cannot be finished before "
                          f"step {step - 1}")
    start = first_missing(ctx.store, planned, ctx.state_steps())
    if start < len(items):
        expected = recorded_versions(ctx.store, step)
        load_start_state(ctx, step, list(ROLES), expected, optimizers=True)
        for kind, s in items[start:]:
            if kind == "rollout":
                rollout(ctx, step, s)
            elif kind == "tests":
                generate_tests(ctx, step, s)
            else:
                run_stage(ctx, planned, kind)
        ctx.save_state(step)
    else:
        ctx.restore_state(step)  # only the manifest was missing
    _, manifest = close_step(ctx, step, planned.stage, planned.role, last_of_stage)
    redone = "nothing (manifest only)" if start == len(items) else \
        "-".join(str(x) for x in items[start] if x is not None)
    return {"step": step, "resumed_from": redone, "manifest": manifest}


def finish_failed(cfg: TrainConfig, run_id: str) -> dict[str, Any]:
    """Finish every incomplete step of ``run_id`` in place, oldest first."""
    store = RunStore(cfg.artifacts.root, run_id)
    todo = store.incomplete_steps()
    steps = plan(cfg.schedule)
    for step in todo:
        planned_step(cfg, step)  # in the schedule, before anything is loaded
    out: dict[str, Any] = {"run_id": run_id, "finished": []}
    if not todo:
        return out
    ctx = open_run(cfg, run_id)
    status = "FAILED"
    try:
        for step in todo:
            planned = steps[step - 1]
            last_of_stage = step == len(steps) or steps[step].stage != planned.stage
            out["finished"].append(finish_step(ctx, planned, last_of_stage))
        # the run is over only when its schedule is; else it waits for flows.train --run-id
        status = "FINISHED" if len(store.complete_steps()) == len(steps) else "KILLED"
    finally:
        ctx.tracker.end_run(ctx.mlflow_run_id, status)
    return out


def format_failed(result: dict[str, Any]) -> str:
    if not result["finished"]:
        return f"run {result['run_id']}: no incomplete steps"
    return "\n".join([f"run {result['run_id']}: finished {len(result['finished'])} step(s)"] + [
        f"  step {r['step']}: redone from {r['resumed_from']}; manifest {r['manifest']}"
        for r in result["finished"]])
