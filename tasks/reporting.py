"""What a step and a stage report: metrics to MLflow, Prefect artifacts, stage checkpoints.

``step_metrics`` is a pure summary of a step's tables (namespaced keys, the MLflow convention
of this project); the tasks log it, publish Prefect artifacts, and write a stage's checkpoint
(both adapters, with optimizer state) to MLflow and the registry.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import get_run_context

from artifacts.checkpoints import checkpoint_score
from artifacts.tracking import run_page
from configs.loader import config_to_dict
from configs.names import ROLES
from deployments.server import flow_run_page
from lifecycle.context import RunContext
from pipeline.completions import chain_markdown, completions
from pipeline.heldout import heldout_table
from pipeline.metrics import round3, skipped_line, skipped_updates, stage_table, step_metrics
from pipeline.parts import CHAINS, EXECUTIONS, REWARDS, STAGE_REPORTS, TESTS, UPDATES
from pipeline.schedule import plan
from pipeline.stagereport import FIELDS as REPORT_FIELDS
from pipeline.stagereport import (
    format_report,
    mean_report,
    new_share,
    report_metrics,
    stage_report,
)
from pipeline.timing import mean_breakdown, step_breakdown
from serving.registry import ModelRegistry
from serving.served import example_row
from tasks.heldout import RECORD as HELDOUT_RECORD
from tasks.heldout import evaluate_heldout
from tasks.runtime import artifact_key


@task(name="log-step", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2)
def log_step(ctx: RunContext, step: int, stage: int, role: str) -> dict[str, float]:
    """Metrics of a completed step to MLflow (one batched call) and a Prefect table artifact."""
    read = ctx.store.read_table
    metrics = step_metrics(read(REWARDS, step=step).to_pylist(),
                           read(EXECUTIONS, step=step).to_pylist(),
                           read(UPDATES, step=step).to_pylist(),
                           read(TESTS, step=step).to_pylist(),
                           read(CHAINS, step=step,
                                columns=["role", "stage", "output_tokens"]).to_pylist())
    metrics["schedule/stage"] = float(stage)
    if ctx.tracker is not None and ctx.mlflow_run_id:
        ctx.tracker.log_metrics(ctx.mlflow_run_id, metrics, step=step)
    rows = read(REWARDS, step=step).to_pylist()
    masked = int(metrics["sandbox/infra_masked_samples"])
    create_table_artifact(
        [{"problem": r["problem_id"], "sample": r["sample_idx"],
          "generator_reward": round3(r["generator_reward"]),
          "discriminator_reward": round3(r["discriminator_reward"]),
          "validity": round3(r["validity"]), "valid_tests": r["n_valid"],
          "baseline_passed": f"{r['n_baseline_passed']}/{r['n_baseline']}",
          "masked": "infra" if r["masked"] else ""} for r in rows],
        key=f"{artifact_key(ctx.run_id)}-step-{step}",
        description=f"Step {step}: stage {stage}, {role} update"
                    + (f"; {masked}/{len(rows)} samples masked (infra verdicts)"
                       if masked else ""))
    return metrics


@task(name="checkpoint-stage", cache_policy=NO_CACHE)
def checkpoint_stage(ctx: RunContext, step: int, stage: int, metrics: dict[str, float],
                     heldout: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Both adapters (+ optimizer state) to MLflow; register versions, move the aliases.
    ``heldout``: the stage's held-out evaluation, when the run has one; the checkpoint's
    score, hence the ``champion``, then comes from it (``checkpoint_score``)."""
    if ctx.tracker is None or not ctx.mlflow_run_id:
        return []
    ckpt_metrics = {"generator_reward": metrics.get("generator/reward", 0.0),
                    "test_validity": metrics.get("discriminator/validity", 0.0),
                    "discriminator_reward": metrics.get("discriminator/reward", 0.0)}
    if heldout and "pass_at_1" in heldout:  # no valid held-out test: validity counts 0
        ckpt_metrics |= {"heldout_pass_at_1": heldout["pass_at_1"],
                         "heldout_test_validity": heldout.get("test_validity", 0.0)}
    out = []
    tracking = ctx.cfg.tracking
    names = {"generator": tracking.generator_registry_name,
             "discriminator": tracking.discriminator_registry_name}
    bases = {"generator": ctx.cfg.model.generator,
             "discriminator": ctx.cfg.model.discriminator_base}
    # One score per stage checkpoint (0.7 code + 0.3 tests, held-out when evaluated),
    # the same for both roles' checkpoints by definition: logged once.
    ctx.tracker.log_metrics(ctx.mlflow_run_id, {"checkpoint/score": checkpoint_score(ckpt_metrics)},
                            step=step)
    folder = ctx.resume.folder(step)  # the role's adapter folder, as RoleState.save wrote it
    ckpts = {role: ctx.tracker.save_checkpoint(
        ctx.mlflow_run_id, role, step, stage, str(folder / role), ckpt_metrics,
        optimizer_state=ctx.roles[role].optimizer.state_dict(),
        extra={"run_id": ctx.run_id, "adapter_version": ctx.roles[role].version})
        for role in ROLES}
    config = config_to_dict(ctx.cfg)
    example = example_row(ctx.problems[0]) if ctx.problems else None
    for role, ckpt in ckpts.items():
        entry = {"role": role, "step": step, "stage": stage, "score": ckpt.score}
        if tracking.register_models:
            # A served version runs both roles on its own base model: the partner adapter
            # goes with it only when both roles share that base.
            partner = next((c for r, c in ckpts.items() if r != role
                            and bases[r] == bases[role]), None)
            version = ModelRegistry(ctx.tracker).register_checkpoint(
                ctx.mlflow_run_id, ckpt, names[role], bases[role], ctx.cfg.model.dtype,
                partner=partner, config=config, example=example)
            entry |= {"model": version.name, "version": version.version,
                      "aliases": list(version.aliases)}
        out.append(entry)
    return out


def close_step(ctx: RunContext, step: int, stage: int, role: str, last_of_stage: bool,
               item_s: dict[str, float] | None = None) -> tuple[dict[str, float], str]:
    """After a step's work and saved state: log it, checkpoint the stage when it ends (and
    evaluate on the held-out problems, its seconds put in ``item_s["heldout"]``), and write the
    manifest last (a kill before it redoes the step, never skips it). Returns the step's
    metrics and the manifest's URI."""
    metrics = log_step(ctx.quoted(), step, stage, role)
    ctx.store.write(STAGE_REPORTS, step, "report", compute_stage_report(ctx, step))
    log_completions(ctx, step)
    if last_of_stage:
        heldout = None
        ev = ctx.cfg.evaluation
        if ev.source and (ev.each_stage or stage == ctx.cfg.schedule.stages[-1]):
            # first: the stage's checkpoint is scored on it
            t = time.perf_counter()
            heldout = evaluate_heldout(ctx.quoted(), f"stage {stage}", step)
            if item_s is not None:
                item_s["heldout"] = time.perf_counter() - t
        checkpoint_stage(ctx.quoted(), step, stage, metrics, heldout)
        log_stage_report(ctx, step, stage)
    return metrics, ctx.store.complete_step(step)


def log_completions(ctx: RunContext, step: int, n: int = 4) -> None:
    """A few samples of the step (``pipeline.completions``) as the MLflow table
    ``completions/step_NNNNNN.json`` and the first one's full chain as a Prefect markdown
    artifact."""
    read = ctx.store.read_table
    by_id = {p.id: p for p in ctx.problems}
    rows = completions(read(CHAINS, step=step).to_pylist(), read(TESTS, step=step).to_pylist(),
                       read(EXECUTIONS, step=step).to_pylist(),
                       read(REWARDS, step=step).to_pylist(),
                       {pid: p.entry_point for pid, p in by_id.items()}, n)
    if not rows:
        return
    if ctx.tracker is not None and ctx.mlflow_run_id:
        ctx.tracker.log_table(ctx.mlflow_run_id, pd.DataFrame(rows),
                              f"completions/step_{step:06d}.json")
    first = rows[0]
    problem = by_id.get(first["problem_id"])
    create_markdown_artifact(chain_markdown(first, problem.description if problem else "", step),
                             key=f"{artifact_key(ctx.run_id)}-chain",
                             description=f"One full chain of step {step}")


def compute_stage_report(ctx: RunContext, step: int) -> list[dict[str, float]]:
    """What each chain stage's tests did in ``step`` (``pipeline.stagereport``)."""
    read = ctx.store.read_table
    return stage_report(read(TESTS, step=step).to_pylist(),
                        read(EXECUTIONS, step=step).to_pylist())


def step_stage_report(ctx: RunContext, step: int) -> list[dict[str, float]]:
    """The step's stored stage report (computed for steps written before it was stored)."""
    if ctx.store.has_part(STAGE_REPORTS, step, "report"):
        rows = ctx.store.read_table(STAGE_REPORTS, step=step).to_pylist()
        return [{k: r[k] for k in ("stage", *REPORT_FIELDS)} for r in rows]
    return compute_stage_report(ctx, step)


def run_stage_report(ctx: RunContext, steps: list[int]) -> list[dict[str, float]] | None:
    reports = [step_stage_report(ctx, s) for s in steps]
    return mean_report(reports) if reports else None


def log_stage_report(ctx: RunContext, step: int, stage: int) -> None:
    """At the end of training stage ``stage`` (its last step is ``step``, not yet complete):
    the chain stages' report, meaned over the training stage's steps, to MLflow
    (``stage_report/s<k>/<field>`` at ``step``) and as a Prefect table."""
    steps = [p.step for p in plan(ctx.cfg.schedule) if p.stage == stage and p.step <= step]
    report = run_stage_report(ctx, steps)
    if report is None:
        return
    if ctx.tracker is not None and ctx.mlflow_run_id:
        ctx.tracker.log_metrics(ctx.mlflow_run_id, report_metrics(report), step=step)
    create_table_artifact([{k: round3(v) if isinstance(v, float) else v for k, v in r.items()}
                           for r in report],
                          key=f"{artifact_key(ctx.run_id)}-stage-report-{stage}",
                          description=f"What each chain stage's tests did, mean over training "
                                      f"stage {stage}'s {len(steps)} steps")


def log_step_time(ctx: RunContext, step: int, total_s: float,
                  item_s: dict[str, float]) -> dict[str, float]:
    """Where the step's ``total_s`` went (``pipeline.timing``), logged as ``time/*``."""
    read = ctx.store.read_table
    breakdown = step_breakdown(total_s, item_s,
                               read(CHAINS, step=step, columns=["latency_s"]).to_pylist(),
                               read(UPDATES, step=step, columns=["duration_s"]).to_pylist())
    if ctx.tracker is not None and ctx.mlflow_run_id:
        ctx.tracker.log_metrics(ctx.mlflow_run_id, breakdown, step=step)
    return breakdown


def finish_run(ctx: RunContext) -> dict:
    """Close the MLflow run and say where everything is."""
    ctx.tracker.end_run(ctx.mlflow_run_id)
    cfg = ctx.cfg
    summary = {
        "run_id": ctx.run_id,
        "run_store": ctx.store.run_dir,
        "mlflow_tracking_uri": ctx.tracker.tracking_uri,
        "mlflow_run_id": ctx.mlflow_run_id,
        "registered_models": [cfg.tracking.generator_registry_name,
                              cfg.tracking.discriminator_registry_name]
        if cfg.tracking.register_models else [],
    }
    updates = ctx.store.read(UPDATES)
    summary["updates"] = len(updates)
    summary["skipped_updates"] = skipped_updates(updates.to_dict("records"),
                                                 ctx.store.read(REWARDS).to_dict("records"),
                                                 cfg.ppo.advantage == "group")

    def then_open(url: str, command: str | None) -> str:
        """The page, or the command that serves it and, on a line of its own, the page."""
        return url if command is None else f"{command}\n  open        : {url}"

    browse = then_open(*run_page(ctx.tracker.tracking_uri, ctx.tracker.experiment_id,
                                 ctx.mlflow_run_id))
    try:
        prefect_page = then_open(*flow_run_page(str(get_run_context().flow_run.id)))
    except Exception:  # outside a flow run (unit tests call this directly)
        prefect_page = "(not run as a Prefect flow)"
    print(stage_table(ctx.store.read(REWARDS)))
    if cfg.evaluation.source:
        print(heldout_table(ctx.store.read_json(HELDOUT_RECORD) or [],
                            cfg.evaluation.source))
    report = run_stage_report(ctx, ctx.store.complete_steps())
    if report is not None:  # the stages the discriminator tested (none: no table)
        report = [row for row in report if row["stage"] in cfg.chain.test_stages] or None
    if report is not None:
        print(format_report(report, "what each chain stage's tests did, mean over the run's "
                                    "steps\n(valid: new valid tests; repeated: copies of an "
                                    "earlier valid one; bugs caught: valid tests\nthe final code "
                                    "fails; first caught: samples its tests rejected first)"))
        share = new_share(report)
        if share is not None:
            print(f"stages after the first: {share:.0%} of their valid tests were new")
    print("Training finished.\n"
          f"  run store   : {summary['run_store']}\n"
          f"  mlflow      : {summary['mlflow_tracking_uri']} (run {ctx.mlflow_run_id})\n"
          f"  models      : {', '.join(summary['registered_models']) or '(not registered)'}"
          " (aliases: candidate, champion)\n"
          f"  updates     : {skipped_line(len(updates), summary['skipped_updates'])}\n"
          f"  step time   : {mean_breakdown(ctx.timings)}\n"
          f"  browse      : {browse}\n"
          f"  prefect     : {prefect_page}\n"
          f"  read tables : pandas.read_parquet('{ctx.store.run_dir}/table=rewards')")
    return summary
