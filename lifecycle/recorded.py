"""A recorded step read back: its parts, its config and plan, the adapters it started from.

What a replay (``tasks.replay``: a stage replayed into ``<ID>.replay``) and a recovery
(``tasks.recover``: a failed step finished in place) share. Both read the same Parquet parts,
rebuild the run's config, put the adapters (and optimizers) where the step started, checked
against the recorded ``adapter_version``, and run the step catalogue's items with the train
flow's own tasks (``tasks.step.run_item``), so neither can drift from what training does.

Anything that makes a step impossible to replay or finish raises ``ReplayError`` naming the
missing file or adapter version; a step whose manifest exists but is corrupt raises
``CorruptManifestError`` (a ``ReplayError``): it was completed, and is never treated as
incomplete.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa

from artifacts.checkpoints import ADAPTER_DIR, OPTIMIZER_FILE
from artifacts.convert import ArtifactError
from artifacts.store import ManifestCorrupt, RunStore
from artifacts.tracking import MlflowException, Tracker
from configs import ConfigError, apply_overrides, load_config
from configs.loader import config_from_dict
from configs.schema import TrainConfig
from lifecycle.context import CONFIG_FILE, RunContext
from models.resume import ResumeStore
from pipeline.schedule import PlannedStep, plan


class ReplayError(Exception):
    """A step cannot be replayed or finished; the message names the missing file or adapter
    version."""


class CorruptManifestError(ReplayError):
    """A step's manifest exists but does not parse or validate: the step was completed, its
    record is damaged. Nothing is replayed from it or rewritten in it; the message names the
    manifest, what is wrong, and the explicit way to rebuild it."""


REBUILD_HINT = ("restore the file, or rebuild it from the step's parts (each checked first, "
                "none rewritten): python -m flows.replay --run-id {run_id} --failed "
                "--rebuild-manifest")


def corrupt_manifest_error(store: RunStore, exc: ManifestCorrupt) -> CorruptManifestError:
    return CorruptManifestError(
        f"{exc}; step {exc.step} was completed and its parts cannot be checked against it, so "
        f"nothing was replayed or rewritten; " + REBUILD_HINT.format(run_id=store.run_id))


def step_manifest(store: RunStore, step: int) -> dict | None:
    """The step's manifest (None: the step is incomplete), or ``CorruptManifestError``."""
    try:
        return store.manifest(step)
    except ManifestCorrupt as exc:
        raise corrupt_manifest_error(store, exc) from None


# -- reading parts ------------------------------------------------------------------------------

def read_part(store: RunStore, table: str, step: int, part: str) -> pa.Table:
    """One recorded part (checked against the manifest of a complete step), or ReplayError
    (``CorruptManifestError`` when the step's manifest is corrupt)."""
    manifest = step_manifest(store, step)
    rel = store.part_relpath(table, step, part)
    listed = (any(e["path"] == rel for e in manifest["files"]) if manifest is not None
              else part in store.list_parts(table, step))
    if not listed:
        raise ReplayError(f"{store.part_uri(table, step, part)}: missing (step {step} of run "
                          f"{store.run_id} has no {table} part {part!r})")
    try:
        return store.read_table(table, step=step, part=part)
    except ManifestCorrupt as exc:
        raise corrupt_manifest_error(store, exc) from None
    except ArtifactError as exc:
        raise ReplayError(str(exc)) from None


# -- config and adapter state -------------------------------------------------------------------

def run_config(root: str, run_id: str, config: str | None = None,
               overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """The run's config as stored by the train flow (or ``config`` + ``overrides`` for runs
    recorded before configs were stored), with ``artifacts.root`` set to ``root``."""
    store = RunStore(root, run_id)
    try:
        if config is not None:
            cfg = load_config(config, list(overrides))
        else:
            data = store.read_json(CONFIG_FILE)
            if data is None:
                if not store.list_steps():
                    raise ReplayError(f"{store.root}/run_id={run_id}: no such run")
                raise ReplayError(f"{store.root}/run_id={run_id}/_run/{CONFIG_FILE}: missing (run "
                                  "recorded before configs were stored); pass --config FILE "
                                  "[--set key=value ...] with the config it ran with")
            cfg = config_from_dict(apply_overrides(data, overrides))
    except (ConfigError, ArtifactError) as exc:
        raise ReplayError(str(exc)) from None
    return dataclasses.replace(cfg, artifacts=dataclasses.replace(cfg.artifacts, root=root))


def planned_step(cfg: TrainConfig, step: int) -> PlannedStep:
    steps = plan(cfg.schedule)
    if not 1 <= step <= len(steps):
        raise ReplayError(f"step={step}: the run's schedule has steps 1..{len(steps)}")
    return steps[step - 1]


def recorded_versions(store: RunStore, step: int) -> dict[str, str]:
    """Adapter version each role sampled with at ``step`` (chains), or started its update from."""
    found: dict[str, str] = {}
    for table, column in (("updates", "adapter_version_before"), ("chains", "adapter_version")):
        for part in store.list_parts(table, step):
            try:
                rows = store.read_table(table, step=step, part=part,
                                        columns=["role", column]).to_pylist()
            except ManifestCorrupt as exc:  # never read past: the step was complete
                raise corrupt_manifest_error(store, exc) from None
            except ArtifactError:
                continue  # an unreadable part: another part of the step says the same
            for r in rows:
                found.setdefault(r["role"], r[column])
    return found


def _mlflow_checkpoints(ctx: RunContext) -> tuple[Any, str, list] | None:
    """``(tracker, MLflow run id, stage checkpoints)`` of the run's training run; None when
    MLflow has no such run or cannot be reached."""
    try:
        tracker = Tracker.from_config(ctx.cfg.tracking)
        run = tracker.training_run(ctx.run_id)
        if run is None:
            return None
        return tracker, run.info.run_id, tracker.list_checkpoints(run.info.run_id)
    except (MlflowException, OSError, ArtifactError):
        return None


def _mlflow_state(ctx: RunContext, step: int, roles: list[str], optimizers: bool) -> str | None:
    """Load ``roles`` from the run's MLflow stage checkpoint of ``step``, if there is one."""
    known = _mlflow_checkpoints(ctx)
    if known is None:
        return None
    tracker, mlflow_run_id, checkpoints = known
    found = {c.role: c for c in checkpoints if c.step == step}
    if not all(r in found for r in roles):
        return None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for role in roles:
                local = tracker.load_checkpoint(found[role], Path(tmp) / role)
                ctx.roles[role].load(local / ADAPTER_DIR,
                                     local / OPTIMIZER_FILE if optimizers else None)
    except (MlflowException, OSError, ArtifactError):
        return None
    return f"MLflow checkpoint of step {step} (run {mlflow_run_id})"


def replayable_steps(ctx: RunContext) -> list[int]:
    """The recorded steps whose start state is still kept: the state saved after the step
    before (``_state``), an MLflow checkpoint of it, or step 1's fresh initialisation."""
    starts = set(ctx.resume.steps())
    if not ctx.cfg.warm_start.enabled:
        starts.add(0)
    known = _mlflow_checkpoints(ctx)  # None: no MLflow here, the kept states alone say it
    if known is not None:
        starts.update(c.step for c in known[2])
    return sorted(s for s in ctx.store.list_steps() if s - 1 in starts)


def _gone(ctx: Any, step: int, roles: list[str], expected: dict[str, str]) -> str:
    prev = step - 1
    kept = ", ".join(f"step={s}" for s in ctx.resume.steps()) or "none"
    wanted = ", ".join(f"{expected[r]} ({r})" for r in roles if r in expected)
    can = ", ".join(str(s) for s in replayable_steps(ctx)) or "none"
    return (f"adapter version {wanted or '(unrecorded)'} of step {prev} is gone: "
            f"{ctx.resume.folder(prev)} does not exist and MLflow has no checkpoint of step "
            f"{prev} (kept states: {kept}); steps whose start state is kept, so they can be "
            f"replayed: {can}")


def check_start_state(cfg: TrainConfig, run_id: str, step: int, roles: list[str]) -> None:
    """Before any model loads (and before Prefect starts): ``ReplayError`` naming the steps
    that can be replayed when the state ``step`` started from is kept nowhere
    (:func:`replayable_steps`). Whether it still holds the recorded version is checked when it
    is loaded (:func:`load_start_state`)."""
    resume = ResumeStore.for_run(cfg.artifacts.root, run_id)
    if not roles or resume.folder(step - 1).is_dir() or (
            step == 1 and not cfg.warm_start.enabled):
        return  # the common case, without asking MLflow
    view = SimpleNamespace(cfg=cfg, run_id=run_id, resume=resume,
                           store=RunStore(cfg.artifacts.root, run_id))
    if step not in replayable_steps(view):
        raise ReplayError(_gone(view, step, roles, recorded_versions(view.store, step)))


def load_start_state(ctx: RunContext, step: int, roles: list[str], expected: dict[str, str],
                     *, optimizers: bool) -> dict[str, str]:
    """Put ``roles``' adapters (and optimizers) where step ``step`` started: the state saved
    after step-1, the fresh adapters for step 1, or the MLflow checkpoint of step-1. Checks each
    against the recorded version; returns ``role -> "<version> (<source>)"``. Under
    ``ppo.kl_reference: start`` the run's saved reference is attached too: the one the
    recorded updates measured their KL against (a replay and ``--finish-failed`` redo them)."""
    ctx.attach_saved_reference()
    prev = step - 1
    folder = ctx.resume.folder(prev)
    if folder.is_dir():
        for role in roles:
            ctx.restore_role(role, folder, optimizers)
        source = str(folder)
    elif prev == 0 and not ctx.cfg.warm_start.enabled:
        source = "fresh adapters (step 1 starts from the initialisation)"
    else:
        source = _mlflow_state(ctx, prev, roles, optimizers)
        if source is None:
            raise ReplayError(_gone(ctx, step, roles, expected))
    out = {}
    for role in roles:
        version = ctx.roles[role].version
        if role in expected and version != expected[role]:
            raise ReplayError(f"adapter version {expected[role]} ({role}) of step {prev} is gone: "
                              f"{source} holds {version}")
        out[role] = f"{version} ({source})"
    return out

