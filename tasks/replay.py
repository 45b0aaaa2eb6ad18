"""Replay one stage of a recorded training step from its stored inputs, or finish failed steps.

    python -m flows.replay [--artifacts-root DIR] --run-id ID --step N \
        --stage <rollout|tests|execute|rewards|update> [--downstream]
    python -m flows.replay [--artifacts-root DIR] --run-id ID --failed [--rebuild-manifest]

A stage replay never touches the recorded run. It copies the inputs the stage needs from step N
to the sibling run ``<ID>.replay`` (same root, same step), runs the same Prefect tasks the train
flow runs there (with ``--downstream``, every later stage too), writes that step's manifest and
compares every output part with the original:

- ``execute`` and ``rewards`` are deterministic: every column must be equal except timings
  (``executions.duration_s``; ``chains.latency_s`` and ``updates.duration_s`` elsewhere).
- ``rollout``/``tests`` (generation) and ``update`` load the adapters (and optimizers) the step
  started from, i.e. the resume state saved after step N-1 (or the fresh adapters of step 1, or
  the run's MLflow checkpoint of step N-1), check that their content hash is the recorded
  ``adapter_version``, sample with the recorded seed and say whether the output matched.

The result is printed, returned, and kept as ``run_id=<ID>.replay/_run/replay-<N>-<stage>.json``.
MATCHED means every output part equals the recorded one, read and checked against the sha256
of step N's manifest; a step recorded without a manifest (incomplete) can only give SAME ROWS,
UNVERIFIED. Exit codes: 0 matched (or same rows, unverified), 1 DIFFERS, 2 the comparison could
not be made: NOT COMPARED (a recorded output part missing or unreadable; the reason is printed),
or nothing replayed (an input part, adapter version or the step's manifest missing or corrupt).

``--failed`` finishes, in place, every step that has files but no manifest: it keeps the parts
that are there and readable, redoes the first missing one and everything after it (each chain
stage, execution, rewards, update), saves the state, logs the step, and writes the manifest last.
A manifest that exists but does not parse or validate is corruption, not an incomplete step: the
command names it and stops (exit 2) with nothing written, unless ``--rebuild-manifest`` asks to
rebuild it from the step's parts, each checked first, none rewritten (``flows.recover``).

A step that cannot be replayed raises ``ReplayError`` naming the missing file or adapter version
(``CorruptManifestError`` for a corrupt manifest).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from prefect import flow, get_run_logger

from artifacts.store import RunStore
from configs.schema import TrainConfig
from flows.recover import check_failed, finish_failed, format_failed
from tasks.recorded import (
    CHAIN_STAGES,
    STAGES,
    Part,
    ReplayError,
    load_start_state,
    part_uri,
    planned_step,
    read_part,
    recorded_versions,
    run_config,
    run_stage,
    stage_outputs,
    step_manifest,
    test_parts,
)
from tasks.runtime import RunContext, StateIntegrityError
from tasks.schedule import ROLES, PlannedStep

TIMING_COLUMNS = {"chains": {"latency_s"}, "executions": {"duration_s"},
                  "updates": {"duration_s"}}  # wall-clock: never reproducible, never compared
REPLAY_SUFFIX = ".replay"
EXIT_CODES = {True: 0, False: 1, None: 2}  # a report's "matched": MATCHED, DIFFERS, NOT COMPARED
ERROR_EXIT = 2  # ReplayError: nothing was replayed (a file, adapter version or manifest)


# -- what each stage reads ----------------------------------------------------------------------

def stage_inputs(stage: str, planned: PlannedStep) -> list[Part]:
    return {"rollout": [],
            "tests": [("chains", f"generator-{s}") for s in CHAIN_STAGES],
            "execute": [("chains", "generator-5"), *test_parts()],
            "rewards": [*test_parts(), ("executions", "all")],
            "update": [("chains", f"{planned.role}-{planned.stage}"), ("rewards", "all")],
            }[stage]


def replay_sequence(stage: str, downstream: bool) -> list[str]:
    if stage not in STAGES:
        raise ReplayError(f"stage={stage!r}: expected one of {', '.join(STAGES)}")
    return list(STAGES[STAGES.index(stage):]) if downstream else [stage]


def inputs_to_copy(sequence: list[str], planned: PlannedStep) -> list[Part]:
    """Inputs of the replayed stages that no replayed stage produces, in first-use order."""
    made = {p for s in sequence for p in stage_outputs(s, planned)}
    needed = [p for s in sequence for p in stage_inputs(s, planned) if p not in made]
    return list(dict.fromkeys(needed))


def roles_needed(sequence: list[str], planned: PlannedStep) -> list[str]:
    """Adapters the replay samples or updates with (the state step N started from)."""
    roles = {"rollout": "generator", "tests": "discriminator", "update": planned.role}
    return [r for r in ROLES if r in {roles[s] for s in sequence if s in roles}]


# -- comparing parts ----------------------------------------------------------------------------

def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def compare_tables(table: str, recorded: pa.Table, replayed: pa.Table) -> str | None:
    """None when both agree on every column but the timings, else the first difference.

    >>> t = pa.table({"stage": [1], "status": ["passed"], "duration_s": [0.1]})
    >>> compare_tables("executions", t, t.set_column(2, "duration_s", pa.array([9.0])))
    >>> compare_tables("executions", t, t.set_column(1, "status", pa.array(["failed"])))
    "row 0, column 'status': recorded 'passed', replayed 'failed'"
    """
    if recorded.num_rows != replayed.num_rows:
        return f"{recorded.num_rows} rows recorded, {replayed.num_rows} replayed"
    skip = TIMING_COLUMNS.get(table, set()) | {"run_id", "step"}
    for col in [c for c in recorded.column_names if c not in skip]:
        a, b = recorded.column(col).to_pylist(), replayed.column(col).to_pylist()
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if not _same(x, y):
                return f"row {i}, column {col!r}: recorded {_short(x)}, replayed {_short(y)}"
    return None


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
    path = part_uri(replayed, table, step, part)
    try:
        old = read_part(original, table, step, part)
    except ReplayError as exc:  # missing, unreadable, differs from the manifest, corrupt manifest
        return PartResult(table, part, new.num_rows, None,
                          f"recorded part cannot be used: {exc}", path)
    diff = compare_tables(table, old, new)
    return PartResult(table, part, new.num_rows, diff is None, diff or "", path)


def clear_step(store: RunStore, step: int) -> None:
    """Remove a step of a scratch run (the replay namespace): manifest first, then its parts."""
    fs = store.fs
    manifest = f"{store.run_dir}/_manifests/step={step:06d}.json"
    if fs.get_file_info(manifest).type == pafs.FileType.File:
        fs.delete_file(manifest)
    if fs.get_file_info(store.run_dir).type != pafs.FileType.Directory:
        return
    for info in fs.get_file_info(pafs.FileSelector(store.run_dir)):
        folder = f"{info.path}/step={step:06d}"
        if info.base_name.startswith("table=") and \
                fs.get_file_info(folder).type == pafs.FileType.Directory:
            fs.delete_dir(folder)


# -- replaying a stage --------------------------------------------------------------------------

def check_replayable(cfg: TrainConfig, run_id: str, step: int, stage: str,
                     downstream: bool) -> tuple[PlannedStep, list[str], list[Part]]:
    """Everything that can be checked without models: step, stage, every input file."""
    planned = planned_step(cfg, step)
    sequence = replay_sequence(stage, downstream)
    store = RunStore(cfg.artifacts.root, run_id)
    step_manifest(store, step)  # a corrupt one: CorruptManifestError, nothing is replayed
    needed = inputs_to_copy(sequence, planned)
    for table, part in needed:
        read_part(store, table, step, part)
    return planned, sequence, needed


def replay_stage(cfg: TrainConfig, run_id: str, step: int, stage: str,
                 downstream: bool = False) -> dict[str, Any]:
    """Replay ``stage`` (and with ``downstream`` every later one) of ``step`` into
    ``<run_id>.replay`` and compare with the recorded parts."""
    planned, sequence, needed = check_replayable(cfg, run_id, step, stage, downstream)
    original = RunStore(cfg.artifacts.root, run_id)
    target = RunStore(cfg.artifacts.root, run_id + REPLAY_SUFFIX)
    roles = roles_needed(sequence, planned)
    ctx = RunContext.open(cfg, run_id, load_models=bool(roles))
    adapters = {}
    if roles:
        expected = recorded_versions(original, step)
        adapters = load_start_state(ctx, step, roles, expected,
                                    optimizers="update" in sequence)
    clear_step(target, step)  # the previous replay of this step, if any
    for table, part in needed:
        target.write(table, step, part, read_part(original, table, step, part)
                     .drop_columns(["run_id", "step"]))
    replay_ctx = dataclasses.replace(ctx, store=target)
    for s in sequence:
        run_stage(replay_ctx, planned, s)
    target.complete_step(step)
    try:  # hashes are checked only against a manifest
        verified = step_manifest(original, step) is not None
    except ReplayError:
        verified = False  # corrupt since the check: every part says so, NOT COMPARED
    parts = [compare_part(original, target, step, t, p)
             for s in sequence for t, p in stage_outputs(s, planned)]
    gen_roles = {"rollout": "generator", "tests": "discriminator"}
    seeds = {f"{gen_roles[s]}-{c}": ctx.seed(step, c, gen_roles[s])
             for s in sequence if s in gen_roles for c in CHAIN_STAGES}
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


def format_report(report: dict[str, Any]) -> str:
    verdict = {True: "MATCHED", False: "DIFFERS", None: "NOT COMPARED"}[report["matched"]]
    unverified = not report.get("verified", True)
    if report["matched"] is True and unverified:
        verdict = "SAME ROWS, UNVERIFIED"
    lines = [f"replay of run {report['run_id']} step {report['step']} "
             f"({' -> '.join(report['replayed'])}): {verdict}"]
    if report["matched"] is None:
        n = sum(p["matched"] is None for p in report["parts"])
        lines.append(f"  the comparison could not be made: {n} recorded part(s) missing or "
                     "unreadable (below)")
    if unverified:
        lines.append(f"  step {report['step']} of run {report['run_id']} has no manifest (an "
                     "incomplete step): its recorded parts were read without a sha256 check")
    for role, where in report["adapters"].items():
        lines.append(f"  {role} adapter {where}")
    for p in report["parts"]:
        state = {True: "match", False: "DIFFERS", None: "not compared"}[p["matched"]]
        lines.append(f"  {p['table']}/{p['part']:<16} {p['rows']:>5} rows  {state}"
                     + (f": {p['detail']}" if p["detail"] else ""))
    lines.append(f"  replayed parts: {report['replay_run']}; report: {report['report']}")
    return "\n".join(lines)


# -- flow and command line ------------------------------------------------------------------------

@flow(name="replay", log_prints=True)
def replay(run_id: str, step: int | None = None, stage: str | None = None,
           downstream: bool = False, failed: bool = False, artifacts_root: str = "runs",
           config: str | None = None, overrides: list[str] | None = None,
           rebuild_manifest: bool = False) -> dict[str, Any]:
    """Replay one stage of a recorded step (``failed=False``) or finish incomplete steps
    (with ``rebuild_manifest``, first rebuild corrupt manifests of intact steps)."""
    cfg = run_config(artifacts_root, run_id, config, overrides or [])
    if failed:
        result = finish_failed(cfg, run_id, rebuild_manifest)
        print(format_failed(result))
    else:
        if step is None or stage is None:
            raise ReplayError("a stage replay needs step and stage")
        result = replay_stage(cfg, run_id, step, stage, downstream)
        get_run_logger().info(format_report(result))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts-root", default="runs", help="Parquet run store root")
    parser.add_argument("--run-id", required=True, help="the recorded run")
    parser.add_argument("--step", type=int, help="the step to replay")
    parser.add_argument("--stage", choices=STAGES, help="the stage to replay")
    parser.add_argument("--downstream", action="store_true",
                        help="also replay every stage after --stage")
    parser.add_argument("--failed", action="store_true",
                        help="finish every step that has no manifest, in place")
    parser.add_argument("--rebuild-manifest", action="store_true",
                        help="with --failed: rebuild a corrupt manifest of a completed step "
                        "from its parts (each checked; no data rewritten)")
    parser.add_argument("--config", help="config file, for runs recorded without a stored one")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a value of the stored config")
    args = parser.parse_args(argv)
    if args.failed == (args.step is not None or args.stage is not None):
        parser.error("give either --failed or both --step and --stage")
    if not args.failed and (args.step is None or args.stage is None):
        parser.error("--step and --stage go together")
    if args.downstream and args.failed:
        parser.error("--downstream goes with --stage")
    if args.rebuild_manifest and not args.failed:
        parser.error("--rebuild-manifest goes with --failed")
    try:  # fail fast, before Prefect starts: config, step, manifests, input files
        cfg = run_config(args.artifacts_root, args.run_id, args.config, args.overrides)
        if args.failed:
            check_failed(cfg, args.run_id, args.rebuild_manifest)
        else:
            check_replayable(cfg, args.run_id, args.step, args.stage, args.downstream)
        from flows.server import ensure_prefect_api
        ensure_prefect_api()  # a temporary Prefect server that dies with this replay
        result = replay(run_id=args.run_id, step=args.step, stage=args.stage,
                        downstream=args.downstream, failed=args.failed,
                        artifacts_root=args.artifacts_root, config=args.config,
                        overrides=args.overrides, rebuild_manifest=args.rebuild_manifest)
    except (ReplayError, StateIntegrityError) as exc:  # a damaged resume state is named too
        print(f"error: {exc}", file=sys.stderr)
        return ERROR_EXIT
    if args.failed:
        return 0
    print(format_report(result))
    return EXIT_CODES[result["matched"]]


if __name__ == "__main__":
    raise SystemExit(main())
