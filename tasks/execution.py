"""Execution of one step's accumulated test suites as a Prefect task (the pure planning and
recording: ``pipeline.execution``)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from artifacts.store import Pointer
from pipeline.catalogue import CODE_STAGE, TESTS, chain_part, executions_part
from pipeline.execution import RunJobs, Suite, build_suites, run_suites, sandbox_runner
from tasks.runtime import RunContext, read_rows, write_rows


def load_suites(ctx: RunContext, step: int) -> list[Suite]:
    """Each sample's final code and kept tests of every stage, read from the run store."""
    codes = {(r["problem_id"], r["sample_idx"]): r["output_text"]
             for r in read_rows(ctx.store, step, chain_part("generator", CODE_STAGE),
                                ["problem_id", "sample_idx", "output_text"])}
    tests = ctx.store.read_table(TESTS, step=step).to_pylist()  # every stage's, and baseline
    return build_suites(ctx.samples(step), codes, tests)


def run_execution(ctx: RunContext, step: int, run_jobs: RunJobs) -> list[dict]:
    suites = load_suites(ctx, step)
    return run_suites(suites, {s.problem.id: ctx.mutants(s.problem) for s in suites}, run_jobs)


# Retried: a dead sandbox worker is infrastructure, and re-running the same jobs is safe
# (the part is replaced atomically). Failing tests are results, never exceptions.
@task(name="execute", task_run_name="execute-step{step}", cache_policy=NO_CACHE, retries=1,
      retry_delay_seconds=1)
def execute(ctx: RunContext, step: int) -> Pointer:
    """Every accumulated test vs final code, reference and mutants -> ``executions/part-all``."""
    rows = run_execution(ctx, step, sandbox_runner(ctx.cfg.sandbox))
    return write_rows(ctx.store, step, executions_part(), rows)
