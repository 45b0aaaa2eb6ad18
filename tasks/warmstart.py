"""The supervised warm start as a Prefect task (the maths: ``pipeline.warmstart``)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from pipeline.warmstart import fit_roles
from tasks.runtime import RunContext


@task(name="warm-start", task_run_name="warm-start", cache_policy=NO_CACHE)
def warm_start(ctx: RunContext) -> dict[str, float]:
    """Fit both adapters; returns first/last loss per role (logged as ``warm_start/*``)."""
    stats = fit_roles(ctx.policies, ctx.problems, ctx.cfg.warm_start,
                      ctx.cfg.model.max_context_tokens, lambda role: ctx.seed("warm-start", role))
    if ctx.tracker is not None and ctx.mlflow_run_id:
        ctx.tracker.log_metrics(ctx.mlflow_run_id, stats, step=0)
    return stats
