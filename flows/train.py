"""The training flow: adversarial PPO over five reasoning stages, stage by stage.

    python -m flows.train --config configs/tiny.yaml [--artifacts-root DIR] [--run-id ID] \
        [--set key=value ...]

For each training stage 1..5: N discriminator steps (generator frozen), N generator steps
(discriminator frozen), K alternating steps (generator first). Every step regenerates the full
chain: for each stage s, the generator writes stage s and the discriminator writes tests for it;
then every accumulated test runs against the final code, the reference and its mutants; rewards
come from those executions; PPO updates one role on the trained stage's tokens.

Each task writes its output to the Parquet run store; a step's manifest is written last. Started
again with the same ``--run-id``, the flow continues after the last complete step (the adapters
and optimizers of that step are restored), so no step is lost and none is done twice.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m flows.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/tiny.yaml", help="YAML config file")
    parser.add_argument("--artifacts-root", help="Parquet run store root (folder or URI)")
    parser.add_argument("--run-id", help="continue this run (or name a new one)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config value, e.g. "
                        "ppo.learning_rate=1e-5 (repeatable)")
    parser.add_argument("--init-from", metavar="SPEC",
                        help="start a new run from trained adapters instead of the warm start: "
                        "models:/NAME@ALIAS, models:/NAME/VERSION, runs:/<id>/checkpoints/... "
                        "or a checkpoint folder (hash-verified)")
    return parser


if __name__ == "__main__":  # --help, usage and config errors answer before Prefect and torch
    from flows import check_config_first, preload, stopping

    stopping.install()  # Ctrl-C / SIGTERM: one line, within seconds, from here on
    _args = build_parser().parse_args()
    check_config_first(_args.config, _args.overrides, learnable=True)

from prefect import flow, get_run_logger

from artifacts.store import ManifestCorrupt, RunStore
from configs import ConfigError, load_config
from configs.schema import TrainConfig, check_learnable
from deployments.server import ensure_prefect_api
from flows import preflight, preload, stopping
from lifecycle.context import RunContext, load_run_problems, new_run_id
from lifecycle.resume import check_resume_state, resume_hint, stopped_runs
from models.resume import StateIntegrityError
from pipeline.catalogue import work_items
from pipeline.schedule import PlannedStep, ends_stage, plan
from problems import ProblemLoadError
from tasks.progress import Progress, flow_run_name, name_flow_run, quiet_console
from tasks.reporting import close_step, finish_run, log_step_time
from tasks.runtime import open_run
from tasks.start import start_point
from tasks.step import run_item


def train_step(ctx: RunContext, planned: PlannedStep, last_of_stage: bool) -> dict[str, float]:
    """One step of the schedule, the catalogue's items in order::

        for s in stages:  the generator writes stage s (given its stages before s)
        for s in stages:  the discriminator writes tests of stage s (given stages 1..s)
        execute:          every kept test vs the final code, the reference and its mutants
        rewards:          both roles' rewards from those executions
        update:           one PPO update of planned.role on planned.stage's tokens

    then save both roles' state and close the step (its manifest is written last). Where the
    step's time went is logged as ``time/*``."""
    start, item_s = time.perf_counter(), {}
    engine_before = ctx.engine_seconds()
    for item in work_items(ctx.cfg.chain):
        t = time.perf_counter()
        run_item(ctx, planned, item)
        item_s[item.kind] = item_s.get(item.kind, 0.0) + time.perf_counter() - t
    for part, seconds in ctx.engine_seconds().items():  # vLLM start-up and adapter pushes
        item_s[part] = seconds - engine_before.get(part, 0.0)
    ctx.save_state(planned.step)
    metrics, _ = close_step(ctx, planned.step, planned.stage, planned.role, last_of_stage,
                            item_s)
    ctx.timings.append(log_step_time(ctx, planned.step, time.perf_counter() - start, item_s))
    return metrics


@flow(name="train", log_prints=True, flow_run_name=flow_run_name)
def train(config: str = "configs/tiny.yaml", overrides: list[str] | None = None,
          artifacts_root: str | None = None, run_id: str | None = None,
          init_from: str | None = None) -> dict[str, Any]:
    """Train both adapters on ``config``; returns where the results are."""
    stopping.reclaim()  # SIGTERM: our one line, not Prefect's crash report
    overrides = list(overrides or [])
    if artifacts_root:
        overrides.append(f"artifacts.root={artifacts_root}")
    quiet_console()
    cfg = load_config(config, overrides)
    for warning in check_learnable(cfg, config):  # refused here too when not via main()
        get_run_logger().warning("config: %s", warning)
    run_id = run_id or new_run_id(cfg)
    name_flow_run(run_id, [f"config:{cfg.name}",
                           "stages:" + ",".join(str(s) for s in cfg.schedule.stages)])
    ctx = open_run(cfg, run_id)
    try:
        steps = plan(cfg.schedule)
        start = start_point(ctx, steps, init_from)  # resumed, --init-from or warm start
        with Progress(ctx, total=len(steps), done=start) as progress:
            for i, planned in enumerate(steps):  # N + N + K steps per training stage
                if planned.step > start:
                    metrics = train_step(ctx, planned, last_of_stage=ends_stage(steps, i))
                    progress.advance(planned, metrics)
    finally:
        ctx.close()  # the vLLM engine, on every way out
    return finish_run(ctx)


def kept(root: str, run_id: str) -> str:
    """What a stopped run leaves: its complete steps (each with its manifest), and how to go
    on from them."""
    store = RunStore(root, run_id)
    done = store.complete_steps()
    if not done:
        return f"no step of run {run_id} was complete, so there is nothing to continue from"
    return (f"run {run_id} keeps step(s) {stopping.steps_text(done)} in {store.run_dir} (a step "
            f"in progress was not kept); {resume_hint(run_id)} continues after step {done[-1]}")


def name_stopped_runs(cfg: TrainConfig) -> None:
    """Before a new run starts: say which stopped runs of the same config it could have
    continued instead (a run is never continued unless named)."""
    stopped = stopped_runs(cfg)
    if not stopped:
        return
    run_id, last, total = stopped[-1]
    others = f" ({len(stopped) - 1} older stopped run(s) too)" if len(stopped) > 1 else ""
    print(f"note: starting a new run; run {run_id} stopped after step {last} of {total}"
          f"{others}, and {resume_hint(run_id)} continues it")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:  # fail fast, before Prefect starts: bad values, configs that cannot learn, problems
        cfg = load_config(args.config, args.overrides)
        check_learnable(cfg, args.config)
        preflight.check(cfg)  # this machine: model folders, hub ids, CUDA, 4-bit, vLLM, bwrap
        load_run_problems(cfg)  # a bad problem file exits 2 here; the flow reuses the result
    except (ConfigError, ProblemLoadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:  # resume state: checked before Prefect starts, and again once the models are loaded
        if args.run_id:
            check_resume_state(load_config(args.config, args.overrides), args.run_id,
                               args.artifacts_root)
        else:  # the config as the flow resolves it, its store's root included
            name_stopped_runs(load_config(args.config, args.overrides + (
                [f"artifacts.root={args.artifacts_root}"] if args.artifacts_root else [])))
        run_id = args.run_id or new_run_id(cfg)  # named by its run id from the start
        stopping.keeping(lambda: kept(args.artifacts_root or cfg.artifacts.root, run_id))
        # A temporary Prefect server that dies with this run; the libraries the run loads
        # anyway are imported while it starts (two processes, two cores: seconds saved).
        ensure_prefect_api(meanwhile=lambda: preload(cfg.model.load_in_4bit))
        train(config=args.config, overrides=args.overrides, artifacts_root=args.artifacts_root,
              run_id=run_id, init_from=args.init_from)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (flows.stopping): its one line, its code
        return stopping.leave()
    except (StateIntegrityError, ManifestCorrupt) as exc:  # no intact resume state, or a
        # corrupt step manifest (a completed step, never redone): nothing was trained on it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
