"""Replay one stage of a recorded training step from its stored inputs, or finish failed steps.

    python -m flows.replay [--artifacts-root DIR] --run-id ID --step N \
        --stage <rollout|baseline|tests|execute|rewards|update> [--downstream]
    python -m flows.replay [--artifacts-root DIR] --run-id ID --failed [--rebuild-manifest]

A stage replay never touches the recorded run. It copies the inputs the stage needs from step N
to the sibling run ``<ID>.replay`` (same root, same step), runs the same Prefect tasks the train
flow runs there (with ``--downstream``, every later stage too), writes that step's manifest and
compares every output part with the original (``tasks.replay``):

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
rebuild it from the step's parts, each checked first, none rewritten (``tasks.recover``).

A step that cannot be replayed raises ``ReplayError`` naming the missing file or adapter version
(``CorruptManifestError`` for a corrupt manifest).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pipeline.catalogue import ITEM_TYPES, KINDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m flows.replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts-root", default="runs", help="Parquet run store root")
    parser.add_argument("--run-id", required=True, help="the recorded run")
    parser.add_argument("--step", type=int, help="the step to replay")
    parser.add_argument("--stage", choices=KINDS, help="the stage to replay")
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
    return parser


if __name__ == "__main__":  # --help and usage errors answer before Prefect and torch load
    from flows import preload, stopping

    stopping.install()  # Ctrl-C / SIGTERM: one line, within seconds, from here on
    build_parser().parse_args()

from prefect import flow, get_run_logger

from artifacts.manifests import ManifestCorrupt
from artifacts.store import RunStore
from configs import ConfigError
from deployments.server import ensure_prefect_api
from flows import preload, stopping
from flows.preflight import check as check_preconditions
from lifecycle.recorded import ReplayError, run_config
from models.resume import StateIntegrityError
from tasks.progress import quiet_console, replay_run_name
from tasks.recover import check_failed, finish_failed, format_failed
from tasks.replay import REPLAY_SUFFIX, check_replayable, replay_stage, roles_needed

EXIT_CODES = {True: 0, False: 1, None: 2}  # a report's "matched": MATCHED, DIFFERS, NOT COMPARED
ERROR_EXIT = 2  # ReplayError: nothing was replayed (a file, adapter version or manifest)


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

@flow(name="replay", log_prints=True, flow_run_name=replay_run_name)
def replay(run_id: str, step: int | None = None, stage: str | None = None,
           downstream: bool = False, failed: bool = False, artifacts_root: str = "runs",
           config: str | None = None, overrides: list[str] | None = None,
           rebuild_manifest: bool = False) -> dict[str, Any]:
    """Replay one stage of a recorded step (``failed=False``) or finish incomplete steps
    (with ``rebuild_manifest``, first rebuild corrupt manifests of intact steps)."""
    stopping.reclaim()  # SIGTERM: our one line, not Prefect's crash report
    quiet_console()
    cfg = run_config(artifacts_root, run_id, config, overrides or [])
    if failed:
        result = finish_failed(cfg, run_id, rebuild_manifest)
        print(format_failed(result))
    else:
        if step is None or stage is None:
            raise ReplayError("a stage replay needs step and stage")
        result = replay_stage(cfg, run_id, step, stage, downstream)
        # The verdict line for the flow's log; the command line prints the whole report once.
        get_run_logger().info(format_report(result).splitlines()[0])
    return result


def incomplete(root: str, run_id: str) -> list[int]:
    """The run's steps without a readable manifest: a corrupt one counts as incomplete (it is
    what ``--failed --rebuild-manifest`` repairs), so the stop line never raises on it."""
    store = RunStore(root, run_id)
    out = []
    for step in store.list_steps():
        try:
            if not store.is_complete(step):
                out.append(step)
        except ManifestCorrupt:
            out.append(step)
    return out


def kept(root: str, run_id: str, step: int | None, unfinished: list[int]) -> str:
    """What a stopped replay leaves: the recorded run as it was; a stage replay's parts so far
    in ``<ID>.replay`` (no manifest); with ``--failed``, the steps it finished."""
    if step is not None:
        target = RunStore(root, run_id + REPLAY_SUFFIX)
        return (f"run {run_id} is untouched; the replay of step {step} is incomplete (no "
                f"manifest) in {target.run_dir}")
    now = incomplete(root, run_id)
    done = [s for s in unfinished if s not in now]
    finished = (f"finished step(s) {stopping.steps_text(done)} (manifests written)" if done
                else "finished no step")
    left = f"; step(s) {stopping.steps_text(now)} keep their parts for the next --failed" \
        if now else ""
    return f"run {run_id}: --failed {finished}{left}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.failed == (args.step is not None or args.stage is not None):
        parser.error("give either --failed or both --step and --stage")
    if not args.failed and (args.step is None or args.stage is None):
        parser.error("--step and --stage go together")
    if args.downstream and args.failed:
        parser.error("--downstream goes with --stage")
    if args.rebuild_manifest and not args.failed:
        parser.error("--rebuild-manifest goes with --failed")
    try:  # fail fast, before Prefect starts: config, step, manifests, input files, and what
        # the replayed work needs of this machine (models, the vLLM engine, the sandbox)
        cfg = run_config(args.artifacts_root, args.run_id, args.config, args.overrides)
        if args.failed:
            check_failed(cfg, args.run_id, args.rebuild_manifest)
        else:
            planned, sequence, _ = check_replayable(cfg, args.run_id, args.step, args.stage,
                                                    args.downstream)
        unfinished = incomplete(args.artifacts_root, args.run_id)
        if args.failed:  # a step is finished from its first missing item on: any may be redone
            needs = dict.fromkeys(("models", "engine", "sandbox"), bool(unfinished))
        else:
            needs = {"models": bool(roles_needed(sequence, planned, cfg.chain)),
                     "engine": any(t.samples for t in ITEM_TYPES if t.kind in sequence),
                     "sandbox": any(t.judges for t in ITEM_TYPES if t.kind in sequence)}
        check_preconditions(cfg, **needs)
        stopping.keeping(lambda: kept(args.artifacts_root, args.run_id,
                                      None if args.failed else args.step, unfinished))
        # a temporary Prefect server that dies with this replay; what the replay loads anyway
        # is imported while it starts
        ensure_prefect_api(meanwhile=lambda: preload(cfg.model.load_in_4bit))
        result = replay(run_id=args.run_id, step=args.step, stage=args.stage,
                        downstream=args.downstream, failed=args.failed,
                        artifacts_root=args.artifacts_root, config=args.config,
                        overrides=args.overrides, rebuild_manifest=args.rebuild_manifest)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (flows.stopping): its one line, its code
        return stopping.leave()
    except (ReplayError, StateIntegrityError, ConfigError) as exc:  # a damaged resume state
        # is named too, and what this machine lacks for the replayed work
        print(f"error: {exc}", file=sys.stderr)
        return ERROR_EXIT
    if args.failed:
        return 0
    print(format_report(result))
    return EXIT_CODES[result["matched"]]


if __name__ == "__main__":
    raise SystemExit(main())
