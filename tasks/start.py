"""Where a run's first step starts from: the last complete step of a resumed run, trained
adapters named by ``--init-from``, or the warm start; and the held-out row before any PPO
step. The train flow calls :func:`start_point` once and then only runs steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefect import get_run_logger

from lifecycle.context import RunContext
from lifecycle.initfrom import init_adapters
from lifecycle.resume import resume_point
from pipeline.schedule import PlannedStep
from tasks.heldout import evaluate_heldout, recorded
from tasks.warmstart import warm_start


def start_point(ctx: RunContext, steps: Sequence[PlannedStep], init_from: str | None) -> int:
    """Put both roles where the run continues and return the last step already done (0: none).

    A run with complete steps (or a saved warm start) resumes from its own state and ignores
    ``init_from``. A new run starts from ``init_from``'s adapters when given, else from the
    warm start when the config enables it, else from fresh adapters; its state is saved as
    step 0. Under ``ppo.kl_reference: start`` the adapters a new run starts from become its KL
    reference. A new run with a held-out source is evaluated once before any PPO step."""
    log = get_run_logger()
    start = resume_point(ctx, steps)
    if start:
        log.info("run %s: resuming after step %d of %d", ctx.run_id, start, len(steps))
    else:
        log.info("run %s: starting, %d steps", ctx.run_id, len(steps))
    fresh = start == 0 and 0 not in ctx.resume.steps()
    if init_from and fresh:  # trained adapters instead of the warm start
        sources = init_adapters(ctx, init_from)
        ctx.tracker.set_tags(ctx.mlflow_run_id, {"init_from": init_from, **{
            f"init_from.{role}": where for role, where in sources.items()}})
        ctx.save_state(0)
    elif init_from:
        log.warning("--init-from %s ignored: run %s continues from its own state", init_from,
                    ctx.run_id)
    elif fresh and ctx.cfg.warm_start.enabled:
        warm_start(ctx.quoted())
        ctx.save_state(0)
    ctx.fix_reference(start)  # ppo.kl_reference: start: these adapters, or the saved ones
    if ctx.cfg.evaluation.source and start == 0 and not any(
            e["label"] == "before" for e in recorded(ctx)):
        evaluate_heldout(ctx.quoted(), "before", 0)  # the held-out row before any PPO step
    return start
