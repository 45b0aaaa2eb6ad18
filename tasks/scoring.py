"""Rewards of one step as a Prefect task (the scoring itself: ``pipeline.scoring``)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from artifacts.store import Pointer
from pipeline.catalogue import EXECUTIONS, TESTS, rewards_part
from pipeline.scoring import outcomes_from_rows, reward_rows
from tasks.runtime import RunContext, write_rows


@task(name="rewards", task_run_name="rewards-step{step}-stage{training_stage}",
      cache_policy=NO_CACHE)
def score(ctx: RunContext, step: int, training_stage: int) -> Pointer:
    """Per-sample generator and discriminator rewards -> ``rewards/part-all``."""
    tests = ctx.store.read_table(TESTS, step=step).to_pylist()
    executions = ctx.store.read_table(EXECUTIONS, step=step).to_pylist()
    samples = [(p.id, j) for p, j in ctx.samples(step)]
    outcomes = outcomes_from_rows(tests, executions, samples)
    return write_rows(ctx.store, step, rewards_part(),
                      reward_rows(outcomes, ctx.cfg.rewards, training_stage))
