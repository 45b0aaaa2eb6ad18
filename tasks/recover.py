"""Finish, in place, the steps a crash left incomplete (``python -m flows.replay --run-id ID
--failed``).

A step with files but no manifest keeps the parts that are there and readable; the first
work item (``pipeline.catalogue``) whose outputs are missing and every item after it is redone
with the train flow's tasks from the state the step started from. Then the state is saved,
the step logged, and the manifest written last, as the train flow does, so a second crash
leaves the step incomplete again rather than half-recorded.

A step whose manifest exists but does not parse or validate is not incomplete: it was completed
and its record is damaged. Then nothing is done (``CorruptManifestError``, exit 2 from the CLI,
naming every such manifest) unless ``rebuild_manifest`` asks for it explicitly: every part file
of the step is read and checked against its schema and against the sha256 the corrupt manifest
still holds for it, every part the step must have is there, and only then a new manifest is
written (the corrupt one is kept beside it as ``step=NNNNNN.json.corrupt``). No data file is
rewritten; a step whose parts fail the check is left as it is, named in the error.
"""

from __future__ import annotations

from typing import Any

from artifacts.convert import ArtifactError
from artifacts.store import ManifestCorrupt, RunStore
from configs.learning import ChainConfig
from configs.names import ROLES
from configs.schema import TrainConfig
from lifecycle.context import RunContext
from lifecycle.recorded import (
    REBUILD_HINT,
    CorruptManifestError,
    ReplayError,
    load_start_state,
    planned_step,
    read_part,
    recorded_versions,
)
from pipeline.catalogue import step_parts, work_items
from pipeline.progress import WorkProgress
from pipeline.schedule import PlannedStep, ends_stage, plan
from tasks.reporting import close_step
from tasks.runtime import open_run
from tasks.step import run_item


def first_missing(store: RunStore, planned: PlannedStep, state_steps: list[int],
                  chain: ChainConfig | None = None) -> int:
    """Index in ``work_items(chain)`` of the first item whose outputs are not all there and
    readable (the update also needs its saved state); ``len(work_items(chain))`` when all
    are."""
    items = work_items(chain)
    for i, item in enumerate(items):
        for table, part in item.outputs(planned.role):
            try:
                read_part(store, table, planned.step, part)
            except CorruptManifestError:
                raise  # a completed step: never "missing", never redone
            except ReplayError:
                return i
    return len(items) - 1 if planned.step not in state_steps else len(items)


def finish_step(ctx: RunContext, planned: PlannedStep, last_of_stage: bool) -> dict[str, Any]:
    """Redo the first missing item of an incomplete step and everything after it, then save
    the state, log the step and write the manifest last (as the train flow does)."""
    step, items = planned.step, work_items(ctx.cfg.chain)
    if step > 1 and not ctx.store.is_complete(step - 1):
        raise ReplayError(f"{ctx.store.manifest_uri(step - 1)}: missing; step {step} cannot be "
                          f"finished before step {step - 1}")
    start = first_missing(ctx.store, planned, ctx.resume.steps(), ctx.cfg.chain)
    if start < len(items):
        expected = recorded_versions(ctx.store, step)
        load_start_state(ctx, step, list(ROLES), expected, optimizers=True)
        for item in items[start:]:
            run_item(ctx, planned, item)
        ctx.save_state(step)
    else:
        ctx.restore_state(step)  # only the manifest was missing
    _, manifest = close_step(ctx, step, planned.stage, planned.role, last_of_stage)
    redone = "nothing (manifest only)" if start == len(items) else items[start].name
    return {"step": step, "resumed_from": redone, "manifest": manifest}


# -- corrupt manifests ----------------------------------------------------------------------------

def check_manifests(store: RunStore, rebuild: bool) -> list[ManifestCorrupt]:
    """The steps whose manifest is corrupt; ``CorruptManifestError`` naming every one unless
    ``rebuild`` asks to rebuild them."""
    corrupt = store.corrupt_manifests()
    if corrupt and not rebuild:
        names = "\n".join(f"  {exc}" for exc in corrupt)
        steps = ", ".join(str(exc.step) for exc in corrupt)
        raise CorruptManifestError(
            f"run {store.run_id}: {len(corrupt)} corrupt step manifest(s):\n{names}\n"
            f"step(s) {steps} were completed (the manifest is written last): they are not "
            f"incomplete, and nothing was redone or rewritten; "
            + REBUILD_HINT.format(run_id=store.run_id))
    return corrupt


def verify_rebuild(store: RunStore, planned: PlannedStep, exc: ManifestCorrupt,
                   chain: ChainConfig | None = None) -> dict[str, Any]:
    """Check, without writing anything, that the step's manifest can be rebuilt from its parts:
    every part the corrupt manifest still lists is there with that sha256, every part file of
    the step reads and fits its schema, and every part the step must have is there. Returns
    the entries to write; ``ReplayError`` naming the first part that fails."""
    step = planned.step
    where = f"{exc.uri} cannot be rebuilt"
    salvaged = {e["path"]: e for e in store.salvage_manifest(step)}
    on_disk = store.step_files(step)
    entries = {}
    for rel in on_disk:
        try:
            entries[rel] = store.file_entry(rel)
        except ArtifactError as err:
            raise ReplayError(f"{where}: {err}; the step's data is damaged too, nothing was "
                              "written") from None
    for rel, old in salvaged.items():
        uri = store.uri_of(rel)
        if rel not in entries:
            raise ReplayError(f"{where}: {uri} is listed in it but missing; nothing was "
                              "written")
        if entries[rel]["sha256"] != old["sha256"]:
            raise ReplayError(f"{where}: {uri} differs from the sha256 it lists (sha256 "
                              f"{old['sha256'][:16]}, {old['bytes']} bytes recorded; "
                              f"{entries[rel]['sha256'][:16]}, {entries[rel]['bytes']} bytes "
                              "found); nothing was written")
    for table, part in step_parts(planned.role, chain):
        rel = store.part_relpath(table, step, part)
        if rel not in entries:
            raise ReplayError(f"{where}: {store.part_uri(table, step, part)} is missing, so "
                              f"step {step} is not complete on disk; nothing was written (to "
                              "redo the step from there instead, remove the manifest and run "
                              "--failed)")
    return {"step": step, "manifest": exc.uri, "was": exc.reason, "entries": entries,
            "by_hash": sum(rel in salvaged for rel in entries),
            "by_reading": sum(rel not in salvaged for rel in entries)}


def write_rebuilt(store: RunStore, plan_: dict[str, Any]) -> dict[str, Any]:
    """Keep the corrupt manifest aside, write the new one (nothing else), check it lists the
    verified files."""
    step = plan_["step"]
    store.keep_manifest_aside(step, ".corrupt")
    uri = store.complete_step(step)
    written = {e["path"]: e["sha256"] for e in store.manifest(step)["files"]}
    if written != {rel: e["sha256"] for rel, e in plan_["entries"].items()}:
        raise ReplayError(f"{uri}: the step's files changed while its manifest was rebuilt")
    out = {k: v for k, v in plan_.items() if k != "entries"}
    return {**out, "manifest": uri, "files": len(written),
            "kept_as": plan_["manifest"] + ".corrupt"}


def check_failed(cfg: TrainConfig, run_id: str,
                 rebuild_manifest: bool = False) -> list[dict[str, Any]]:
    """What ``--failed`` can check before anything is loaded: every corrupt manifest stops it
    (``CorruptManifestError``) unless ``rebuild_manifest``; then each is checked for a rebuild
    (returns the plans, nothing written) and every incomplete step is in the schedule."""
    store = RunStore(cfg.artifacts.root, run_id)
    corrupt = check_manifests(store, rebuild_manifest)
    plans = [verify_rebuild(store, planned_step(cfg, exc.step), exc, cfg.chain)
             for exc in corrupt]
    rebuilt = {p["step"] for p in plans}
    for step in store.list_steps():
        if step not in rebuilt and not store.is_complete(step):
            planned_step(cfg, step)  # in the schedule, before anything is loaded
    return plans


def finish_failed(cfg: TrainConfig, run_id: str, rebuild_manifest: bool = False) -> dict[str, Any]:
    """Finish every incomplete step of ``run_id`` in place, oldest first; with
    ``rebuild_manifest``, first rebuild every corrupt manifest whose step's parts are intact."""
    store = RunStore(cfg.artifacts.root, run_id)
    plans = check_failed(cfg, run_id, rebuild_manifest)  # all checked before any is written
    out: dict[str, Any] = {"run_id": run_id, "finished": [],
                           "rebuilt": [write_rebuilt(store, p) for p in plans]}
    todo = store.incomplete_steps()
    steps = plan(cfg.schedule)
    if not todo:
        return out
    ctx = open_run(cfg, run_id)
    status = "FAILED"
    try:
        with WorkProgress("finishing failed steps", len(todo), "steps") as progress:
            for step in todo:
                planned = steps[step - 1]
                out["finished"].append(finish_step(ctx, planned, ends_stage(steps, step - 1)))
                progress.advance(1)
        # the run is over only when its schedule is; else it waits for flows.train --run-id
        status = "FINISHED" if len(store.complete_steps()) == len(steps) else "KILLED"
    finally:
        ctx.close()
        ctx.tracker.end_run(ctx.mlflow_run_id, status)
    return out


def format_failed(result: dict[str, Any]) -> str:
    lines = []
    for r in result.get("rebuilt", []):
        lines.append(f"run {result['run_id']} step {r['step']}: manifest rebuilt, {r['manifest']} "
                     f"(it was corrupt: {r['was']}; kept as {r['kept_as']}); its {r['files']} "
                     f"part files are intact ({r['by_hash']} checked against the sha256 the "
                     f"corrupt manifest still held, {r['by_reading']} read and schema-checked: "
                     "their hashes were lost); no data file was rewritten")
    if not result["finished"]:
        return "\n".join([*lines, f"run {result['run_id']}: no incomplete steps"])
    return "\n".join(lines + [f"run {result['run_id']}: finished {len(result['finished'])} "
                               "step(s)"] + [
        f"  step {r['step']}: redone from {r['resumed_from']}; manifest {r['manifest']}"
        for r in result["finished"]])
