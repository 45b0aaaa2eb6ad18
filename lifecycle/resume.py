"""Where a run continues: the last complete step with its state restored and verified, or an
older intact state with the steps after it redone; and the same check, files only, before any
model is loaded (the CLI runs it before Prefect starts).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from artifacts.store import RunStore, list_runs
from configs import config_to_dict
from configs.names import ROLES
from configs.schema import TrainConfig
from lifecycle.context import CONFIG_FILE, RunContext
from models.resume import (
    ResumeStore,
    StateFileMissingError,
    StateIntegrityError,
    recorded_state_versions,
    verify_state_files,
)
from pipeline.schedule import PlannedStep, plan

Damaged = list[tuple[int, Exception]]


def last_complete(store: RunStore, n_steps: int) -> int:
    """The run's last complete step within its schedule (0: none)."""
    return max((s for s in store.complete_steps() if s <= n_steps), default=0)


def candidates(resume: ResumeStore, last: int) -> tuple[list[int], Damaged]:
    """States to try, newest first, for a run whose last complete step is ``last``; and the
    damage known before any is read (``last``'s state missing)."""
    kept = resume.steps()
    damaged: Damaged = []
    if last not in kept:
        damaged.append((last, StateFileMissingError(
            f"{resume.folder(last)}: missing (step {last} is complete)")))
    return sorted((s for s in kept if s <= last), reverse=True), damaged


def resume_point(ctx: RunContext, steps: Sequence[PlannedStep]) -> int:
    """The last complete step (0 for a new run), with its adapters and optimizers restored.

    Steps after it that left files but no manifest are incomplete: their parts are rewritten.
    The restored state is verified first (:meth:`RunContext.restore_state`). When it is damaged,
    missing or cannot be verified, the message names the file with the expected and found
    values, and the newest intact older state is restored instead: the steps after it are
    made incomplete again (manifests, then their parts, removed from the run store), so the
    flow redoes them, and the damaged states are set aside as ``damaged-step=NNNNNN``. No
    intact state: ``StateIntegrityError`` (the CLI exits 2 with its message). A damaged
    warm-start state when no step is complete is set aside and the warm start redone.
    """
    last = last_complete(ctx.store, len(steps))
    if not last and 0 not in ctx.resume.steps():
        return 0
    tries, damaged = candidates(ctx.resume, last)
    loaded = False
    for step in tries:
        try:
            versions = ctx.restore_state(step)
        except StateIntegrityError as exc:
            loaded |= exc.loaded
            print(f"resume state of step {step} failed its check: {exc}")
            damaged.append((step, exc))
            continue
        if step < last:
            _fall_back(ctx, step, damaged)
            print(f"resuming from the resume state of step {step} ("
                  + ", ".join(f"{r} {v}" for r, v in versions.items())
                  + f", verified) instead of step {last}")
        return step
    if last == 0:  # only a damaged warm-start state: no step is lost by redoing it
        if loaded:  # weights of the damaged state are in the model: start from fresh ones
            ctx.load_policies()
        _fall_back(ctx, 0, damaged)
        print("the warm start is redone (no step was complete)")
        return 0
    raise StateIntegrityError(_no_intact_state(ctx.run_id, ctx.resume, last, damaged))


def check_resume_state(cfg: TrainConfig, run_id: str, artifacts_root: str | None = None) -> None:
    """Before any model is loaded: raise ``StateIntegrityError`` when ``run_id`` has complete
    steps but no resume state at or before the last of them passes :func:`verify_state_files`.
    Prints nothing: the flow's :func:`resume_point` checks again, reports and falls back."""
    if artifacts_root:
        cfg = dataclasses.replace(cfg, artifacts=dataclasses.replace(cfg.artifacts,
                                                                     root=artifacts_root))
    store = RunStore(cfg.artifacts.root, run_id)
    last = last_complete(store, len(plan(cfg.schedule)))
    if not last:
        return
    resume = ResumeStore.for_run(cfg.artifacts.root, run_id)
    tries, damaged = candidates(resume, last)
    for step in tries:
        try:
            verify_state_files(resume.folder(step), ROLES, gae=cfg.ppo.advantage == "gae",
                               optimizer=True, recorded=recorded_state_versions(store, step),
                               require_verified=True)
            return
        except StateIntegrityError as exc:
            damaged.append((step, exc))
    raise StateIntegrityError(_no_intact_state(run_id, resume, last, damaged))


def stopped_runs(cfg: TrainConfig) -> list[tuple[str, int, int]]:
    """Runs under ``cfg.artifacts.root`` that a run of ``cfg`` could continue: started with
    the same resolved config and stopped before their last step. Each as ``(run id, last
    complete step, steps planned)``, oldest first; files only, nothing loaded."""
    wanted, total, found = config_to_dict(cfg), len(plan(cfg.schedule)), []
    for run_id in list_runs(cfg.artifacts.root):
        store = RunStore(cfg.artifacts.root, run_id)
        try:
            same = store.read_json(CONFIG_FILE) == wanted
        except Exception:  # noqa: BLE001 - an unreadable record is not a run to name
            same = False
        last = last_complete(store, total) if same else total
        if last < total:
            found.append((run_id, last, total))
    return found


def resume_hint(run_id: str) -> str:
    """The command that continues ``run_id``: through make when the run came through make
    (the Makefile sets ``RESUME_COMMAND``), else the same command with ``--run-id``."""
    via_make = os.environ.get("RESUME_COMMAND")
    if via_make:
        return f"`{via_make} RUN_ID={run_id}`"
    return f"the same command with --run-id {run_id}"


def _no_intact_state(run_id: str, resume: ResumeStore, last: int, damaged: Damaged) -> str:
    return (f"run {run_id}: no intact resume state to continue from (step {last} is the last "
            f"complete step; states kept in {resume.root}):\n"
            + "\n".join(f"  step {s}: {exc}" for s, exc in damaged)
            + "\nnothing was trained on them; start a new run id, or put back intact state "
              "folders")


def _fall_back(ctx: RunContext, step: int, damaged: Damaged) -> None:
    """After restoring the state of ``step`` in place of a later one: set the damaged states
    aside, drop every other state after ``step``, and make every step after ``step`` incomplete
    again (manifests first, newest first, then their parts), saying so on the console. A kill
    half-way leaves a run that resumes the same way."""
    for folder, aside in ctx.resume.drop_after(step, {s for s, _ in damaged}):
        print(f"set aside the damaged resume state {folder} as {aside.name} (delete it once "
              "inspected)")
    redo = [s for s in ctx.store.list_steps() if s > step]
    if redo:
        ctx.store.clear_steps(redo)
        span = f"step {redo[0]}" if len(redo) == 1 else f"steps {redo[0]}..{redo[-1]}"
        print(f"{span} of run {ctx.run_id} will be redone from the state of step {step}: "
              f"{'its' if len(redo) == 1 else 'their'} recorded data was removed from "
              f"{ctx.store.run_dir}")
