"""The PPO update of one role as a Prefect task (the update itself: ``pipeline.update``)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from artifacts.store import Pointer
from pipeline.catalogue import chain_part, rewards_part, update_part
from pipeline.update import update_role
from tasks.runtime import RunContext, read_rows, write_rows


# never retried: an update is not idempotent
@task(name="ppo-update", task_run_name="ppo-update-step{step}-stage{stage}-{role}",
      cache_policy=NO_CACHE)
def ppo_update_task(ctx: RunContext, step: int, role: str, stage: int) -> Pointer:
    """Update ``role``'s adapter on the trained stage's tokens -> ``updates/part-<role>``."""
    row = update_role(ctx.roles[role], read_rows(ctx.store, step, chain_part(role, stage)),
                      read_rows(ctx.store, step, rewards_part()), stage=stage,
                      sampling=ctx.cfg.sampling, ppo=ctx.cfg.ppo)
    return write_rows(ctx.store, step, update_part(role), [row])
