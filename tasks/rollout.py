"""Rollout and test generation for one chain stage of one step, as Prefect tasks.

- ``rollout(stage)``: generator text for stage s, given the problem and stages 1..s-1
  -> ``chains/part-generator-<s>``;
- ``generate_tests(stage)``: discriminator tests for stage s, given the problem and stages 1..s
  -> ``chains/part-discriminator-<s>`` and ``tests/part-stage-<s>`` (stage 1 also writes
  ``tests/part-baseline`` with the problems' own tests). Tests are parsed and deduplicated
  within the output and against the tests of earlier stages of the same sample.

Each reads the chain so far from the run store, samples all problems x samples in one batched
call (``pipeline.chains.sample_stage``) and writes the rows; the parts are
``pipeline.catalogue``'s.
"""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from artifacts.store import Pointer, RunStore
from pipeline.catalogue import STAGES, chain_part, suite_part
from pipeline.chains import (
    SampleKey,
    baseline_rows,
    known_tests,
    parsed_test_rows,
    sample_stage,
    texts_by_sample,
)
from tasks.runtime import RunContext, read_rows, write_rows


def chain_texts(store: RunStore, step: int, upto: int) -> dict[SampleKey, list[str]]:
    """Generator texts of stages 1..upto per sample, in stage order."""
    by_stage = []
    for stage in range(1, upto + 1):
        rows = read_rows(store, step, chain_part("generator", stage),
                         ["problem_id", "sample_idx", "output_text"])
        if not rows:
            raise FileNotFoundError(f"{store.run_dir}: step {step} has no generator text for "
                                    f"stage {stage}; run its rollout first")
        by_stage.append(rows)
    return texts_by_sample(by_stage)


def _sample(ctx: RunContext, step: int, stage: int, role: str,
            texts: dict[SampleKey, list[str]]) -> tuple[list[dict], list[str]]:
    return sample_stage(ctx.policies, role, ctx.samples(step), stage, texts,
                        sampling=ctx.cfg.sampling,
                        max_context_tokens=ctx.cfg.model.max_context_tokens,
                        seed=ctx.seed(step, stage, role))


@task(name="rollout", task_run_name="rollout-step{step}-stage{stage}", cache_policy=NO_CACHE)
def rollout(ctx: RunContext, step: int, stage: int) -> Pointer:
    """Generator output for ``stage`` over the step's problems x samples."""
    previous = chain_texts(ctx.store, step, stage - 1) if stage > 1 else {}
    rows, _ = _sample(ctx, step, stage, "generator", previous)
    return write_rows(ctx.store, step, chain_part("generator", stage), rows)


@task(name="generate-tests", task_run_name="tests-step{step}-stage{stage}",
      cache_policy=NO_CACHE)
def generate_tests(ctx: RunContext, step: int, stage: int) -> list[Pointer]:
    """Discriminator tests for ``stage`` given the chain so far; accumulated per sample."""
    rows, texts = _sample(ctx, step, stage, "discriminator", chain_texts(ctx.store, step, stage))
    pointers = [write_rows(ctx.store, step, chain_part("discriminator", stage), rows)]
    earlier = [r for s in STAGES if s < stage for r in read_rows(ctx.store, step, suite_part(s))]
    samples = ctx.samples(step)
    tests = parsed_test_rows(samples, texts, stage, known_tests(earlier))
    pointers.append(write_rows(ctx.store, step, suite_part(stage), tests))
    if stage == STAGES[0]:
        pointers.append(write_rows(ctx.store, step, suite_part(None), baseline_rows(samples)))
    return pointers
