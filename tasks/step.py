"""One work item of the step catalogue (``pipeline.catalogue``) run as its Prefect task.

The train flow, a replay and a recovery all run items through :func:`run_item`, so what a
step does is written once: the catalogue says which items, in which order, reading and
writing which parts; this says which task does each.
"""

from __future__ import annotations

from pipeline.catalogue import WorkItem
from pipeline.schedule import PlannedStep
from tasks.execution import execute
from tasks.rollout import generate_tests, rollout
from tasks.runtime import RunContext
from tasks.scoring import score
from tasks.update import ppo_update_task


def run_item(ctx: RunContext, planned: PlannedStep, item: WorkItem) -> None:
    """Run ``item`` of step ``planned`` on ``ctx.store``."""
    step = planned.step
    if item.kind == "rollout":
        rollout(ctx, step, item.stage)
    elif item.kind == "tests":
        generate_tests(ctx, step, item.stage)
    elif item.kind == "execute":
        execute(ctx, step)
    elif item.kind == "rewards":
        score(ctx, step, planned.stage)
    elif item.kind == "update":
        ppo_update_task(ctx, step, planned.role, planned.stage)
    else:
        raise ValueError(f"{item.name}: not a work item of the step catalogue")
