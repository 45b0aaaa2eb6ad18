"""One work item of the step catalogue (``pipeline.catalogue``) run as its Prefect task.

The train flow, a replay and a recovery all run items through :func:`run_item`, and so
through the catalogue's one runner (``WorkItem.run``: the item's declared inputs read, its
function called on them, its declared outputs checked and written). The item's type says what
it reads, writes and runs, and its task name, run name and retries; this module only makes
that a Prefect task run.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from artifacts.store import Pointer
from lifecycle.context import RunContext
from pipeline.catalogue import WorkItem
from pipeline.schedule import PlannedStep


# The context holds models and a store: process-local, never cached or shipped (NO_CACHE).
@task(cache_policy=NO_CACHE)
def _item_task(ctx: RunContext, planned: PlannedStep, item: WorkItem) -> list[Pointer]:
    return item.run(ctx, planned)


def run_item(ctx: RunContext, planned: PlannedStep, item: WorkItem) -> list[Pointer]:
    """Run ``item`` of step ``planned`` on ``ctx.store`` as a Prefect task; returns the parts
    written."""
    return _item_task.with_options(
        name=item.task, task_run_name=item.run_name(planned), retries=item.retries,
        retry_delay_seconds=1 if item.retries else 0)(ctx.quoted(), planned, item)
