"""What each kind of work item does to a step: read its inputs from the run store, compute,
write its outputs. Pure of Prefect: ``tasks.step`` runs these as Prefect tasks, and the step
catalogue (``pipeline.catalogue``) says which one each item runs and which parts it touches.

- ``rollout``: generator text for chain stage s, given the problem and the chain's stages
  before s (``configs.ChainConfig.stages``: all of 1..s-1 by default);
- ``baseline``: the problems' own tests, each sample's suite before the discriminator's;
- ``generate_tests``: discriminator tests for stage s, given the problem and the chain's stages
  up to s, parsed and deduplicated within the output and against the sample's tests of earlier
  stages;
- ``execute``: every kept test against the final code, the reference and its mutants;
- ``score``: per-sample generator and discriminator rewards;
- ``update``: one PPO update of the step's role on the trained stage's tokens.

Each takes a :class:`StepContext` (``tasks.runtime.RunContext`` is one) and the step's number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from artifacts.store import Pointer, RunStore
from configs.learning import ChainConfig
from configs.names import CODE_STAGE
from configs.schema import TrainConfig
from pipeline.chains import (
    SampleKey,
    Sampler,
    baseline_rows,
    known_tests,
    parsed_test_rows,
    sample_stage,
    texts_by_sample,
)
from pipeline.execution import RunJobs, Suite, build_suites, run_suites, sandbox_runner
from pipeline.parts import (
    EXECUTIONS,
    TESTS,
    Part,
    chain_part,
    executions_part,
    rewards_part,
    suite_part,
    update_part,
)
from pipeline.scoring import outcomes_from_rows, reward_rows, shuffled_rewards
from pipeline.update import update_role
from problems import Problem
from rewards.mutants import Mutant


class StepContext(Protocol):
    """What a work item needs of its run (``tasks.runtime.RunContext`` provides it)."""

    cfg: TrainConfig
    store: RunStore
    sampler: Sampler     # samples both roles (models.policy.Policies, or the vLLM engine)
    roles: dict[str, Any]  # role -> models.rolestate.RoleState: what an update trains

    def samples(self, step: int) -> list[tuple[Problem, int]]: ...
    def mutants(self, problem: Problem) -> list[Mutant]: ...
    def seed(self, *parts: object) -> int: ...


def read_rows(store: RunStore, step: int, part: Part,
              columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of one part (``pipeline.parts``) of ``step``."""
    return store.read_table(part[0], step=step, part=part[1], columns=columns).to_pylist()


def write_rows(store: RunStore, step: int, part: Part, rows: Any) -> Pointer:
    """Write one part of ``step``; returns its pointer."""
    return store.write(part[0], step, part[1], rows)


# -- rollout and tests ----------------------------------------------------------------------
def chain_texts(store: RunStore, step: int, stages: Sequence[int]) -> dict[SampleKey, list[str]]:
    """Generator texts of ``stages`` per sample, in stage order."""
    by_stage = []
    for stage in stages:
        rows = read_rows(store, step, chain_part("generator", stage),
                         ["problem_id", "sample_idx", "output_text"])
        if not rows:
            raise FileNotFoundError(f"{store.run_dir}: step {step} has no generator text for "
                                    f"stage {stage}; run its rollout first")
        by_stage.append(rows)
    return texts_by_sample(by_stage)


def _sample(ctx: StepContext, step: int, stage: int, role: str,
            texts: dict[SampleKey, list[str]], chain: Sequence[int]
            ) -> tuple[list[dict], list[str]]:
    rows, batch = sample_stage(ctx.sampler, role, ctx.samples(step), stage, texts,
                               sampling=ctx.cfg.sampling,
                               max_context_tokens=ctx.cfg.model.max_context_tokens,
                               seed=ctx.seed(step, stage, role), chain=chain)
    return rows, [g.text for g in batch.generations]


def rollout(ctx: StepContext, step: int, stage: int,
            chain: ChainConfig = ChainConfig()) -> list[Pointer]:
    """Generator output for ``stage`` over the step's problems x samples, given its stages of
    the ``chain`` before ``stage``."""
    earlier = chain.before(stage)
    previous = chain_texts(ctx.store, step, earlier) if earlier else {}
    rows, _ = _sample(ctx, step, stage, "generator", previous, chain.stages)
    return [write_rows(ctx.store, step, chain_part("generator", stage), rows)]


def baseline(ctx: StepContext, step: int) -> list[Pointer]:
    """The problems' own tests of the step's samples -> ``tests/part-baseline``."""
    return [write_rows(ctx.store, step, suite_part(None), baseline_rows(ctx.samples(step)))]


def generate_tests(ctx: StepContext, step: int, stage: int,
                   chain: ChainConfig = ChainConfig()) -> list[Pointer]:
    """Discriminator tests for ``stage`` given the ``chain``'s stages up to it; accumulated
    per sample."""
    rows, texts = _sample(ctx, step, stage, "discriminator",
                          chain_texts(ctx.store, step, chain.upto(stage)), chain.stages)
    pointers = [write_rows(ctx.store, step, chain_part("discriminator", stage), rows)]
    earlier = [r for s in chain.before(stage) for r in read_rows(ctx.store, step, suite_part(s))]
    tests = parsed_test_rows(ctx.samples(step), texts, stage, known_tests(earlier))
    pointers.append(write_rows(ctx.store, step, suite_part(stage), tests))
    return pointers


# -- execution, rewards, update -------------------------------------------------------------
def load_suites(ctx: StepContext, step: int) -> list[Suite]:
    """Each sample's final code and kept tests of every stage, read from the run store."""
    codes = {(r["problem_id"], r["sample_idx"]): r["output_text"]
             for r in read_rows(ctx.store, step, chain_part("generator", CODE_STAGE),
                                ["problem_id", "sample_idx", "output_text"])}
    tests = ctx.store.read_table(TESTS, step=step).to_pylist()  # every stage's, and baseline
    return build_suites(ctx.samples(step), codes, tests, peers=ctx.cfg.rewards.peer_tests)


def step_executions(ctx: StepContext, step: int, run_jobs: RunJobs) -> list[dict]:
    suites = load_suites(ctx, step)
    return run_suites(suites, {s.problem.id: ctx.mutants(s.problem) for s in suites}, run_jobs)


def execute(ctx: StepContext, step: int) -> list[Pointer]:
    """Every accumulated test vs final code, reference and mutants -> ``executions``."""
    rows = step_executions(ctx, step, sandbox_runner(ctx.cfg.sandbox))
    return [write_rows(ctx.store, step, executions_part(), rows)]


def score(ctx: StepContext, step: int, training_stage: int) -> list[Pointer]:
    """Per-sample generator and discriminator rewards -> ``rewards``."""
    tests = ctx.store.read_table(TESTS, step=step).to_pylist()
    executions = ctx.store.read_table(EXECUTIONS, step=step).to_pylist()
    samples = [(p.id, j) for p, j in ctx.samples(step)]
    outcomes = outcomes_from_rows(tests, executions, samples, training_stage)
    rows = reward_rows(outcomes, ctx.cfg.rewards, training_stage)
    if ctx.cfg.rewards.shuffle_seed is not None:  # a control run (configs: RewardConfig)
        rows = shuffled_rewards(rows, ctx.cfg.rewards.shuffle_seed, step)
    return [write_rows(ctx.store, step, rewards_part(), rows)]


def update(ctx: StepContext, step: int, role: str, stage: int) -> list[Pointer]:
    """Update ``role``'s adapter on the trained stage's tokens -> ``updates/part-<role>``."""
    row = update_role(ctx.roles[role], read_rows(ctx.store, step, chain_part(role, stage)),
                      read_rows(ctx.store, step, rewards_part()), stage=stage,
                      sampling=ctx.cfg.sampling, ppo=ctx.cfg.ppo)
    return [write_rows(ctx.store, step, update_part(role), [row])]
