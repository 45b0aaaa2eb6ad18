"""What each kind of work item computes: one function per kind, from the item's declared
inputs (``pipeline.parts.Inputs``, read by the runner) to rows per declared output part. None
of them touches the run store; the step catalogue (``pipeline.catalogue``) declares which parts
each reads and writes, and its runner (``WorkItem.run``) reads them, calls the function, checks
the result against the declarations and writes it. Pure of Prefect: ``tasks.step`` runs items
as Prefect tasks.

- ``rollout``: generator text for chain stage s, given the problem and the chain's stages
  before s (``configs.ChainConfig.stages``: all of 1..s-1 by default);
- ``baseline``: the problems' own tests, each sample's suite before the discriminator's;
- ``generate_tests``: discriminator tests for stage s, given the problem and the chain's stages
  up to s, parsed and deduplicated within the output and against the sample's tests of earlier
  stages;
- ``execute``: every kept test against the final code, the reference and its mutants;
- ``score``: per-sample generator and discriminator rewards;
- ``update``: one PPO update of the step's role on the trained stage's tokens.

Each takes a :class:`WorkContext` (what the run gives: models, config, samples, seeds), its
inputs and the step's number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from artifacts.store import RunStore
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
from pipeline.execution import Suite, build_suites, run_suites, sandbox_runner
from pipeline.parts import (
    EXECUTIONS,
    TESTS,
    Inputs,
    Outputs,
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

TEXT_COLUMNS = ["problem_id", "sample_idx", "output_text"]  # what a chains input is read for


class WorkContext(Protocol):
    """What a work function gets of its run (``lifecycle.context.RunContext`` provides it)."""

    cfg: TrainConfig
    sampler: Sampler     # samples both roles (models.policy.Policies, or the vLLM engine)
    roles: dict[str, Any]  # role -> models.rolestate.RoleState: what an update trains

    def samples(self, step: int) -> list[tuple[Problem, int]]: ...
    def mutants(self, problem: Problem) -> list[Mutant]: ...
    def seed(self, *parts: object) -> int: ...


class StepContext(WorkContext, Protocol):
    """What the runner needs of a run: the work functions' context and its run store."""

    store: RunStore


def read_rows(store: RunStore, step: int, part: Part,
              columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of one part (``pipeline.parts``) of ``step``."""
    return store.read_table(part[0], step=step, part=part[1], columns=columns).to_pylist()


# -- rollout and tests ----------------------------------------------------------------------
def chain_texts(inputs: Inputs, stages: Sequence[int]) -> dict[SampleKey, list[str]]:
    """Generator texts of ``stages`` per sample, in stage order."""
    return texts_by_sample([inputs.rows(chain_part("generator", stage), TEXT_COLUMNS)
                            for stage in stages])


def _sample(ctx: WorkContext, step: int, stage: int, role: str,
            texts: dict[SampleKey, list[str]], chain: Sequence[int]
            ) -> tuple[list[dict], list[str]]:
    rows, batch = sample_stage(ctx.sampler, role, ctx.samples(step), stage, texts,
                               sampling=ctx.cfg.sampling,
                               max_context_tokens=ctx.cfg.model.max_context_tokens,
                               seed=ctx.seed(step, stage, role), chain=chain)
    return rows, [g.text for g in batch.generations]


def rollout(ctx: WorkContext, inputs: Inputs, step: int, stage: int,
            chain: ChainConfig = ChainConfig()) -> Outputs:
    """Generator output for ``stage`` over the step's problems x samples, given its stages of
    the ``chain`` before ``stage``."""
    previous = chain_texts(inputs, chain.before(stage))
    rows, _ = _sample(ctx, step, stage, "generator", previous, chain.stages)
    return {chain_part("generator", stage): rows}


def baseline(ctx: WorkContext, step: int) -> Outputs:
    """The problems' own tests of the step's samples -> ``tests/part-baseline``."""
    return {suite_part(None): baseline_rows(ctx.samples(step))}


def generate_tests(ctx: WorkContext, inputs: Inputs, step: int, stage: int,
                   chain: ChainConfig = ChainConfig()) -> Outputs:
    """Discriminator tests for ``stage`` given the ``chain``'s stages up to it; accumulated
    per sample."""
    rows, texts = _sample(ctx, step, stage, "discriminator",
                          chain_texts(inputs, chain.upto(stage)), chain.stages)
    earlier = [r for s in chain.before(stage) for r in inputs.rows(suite_part(s))]
    tests = parsed_test_rows(ctx.samples(step), texts, stage, known_tests(earlier))
    return {chain_part("discriminator", stage): rows, suite_part(stage): tests}


# -- execution, rewards, update -------------------------------------------------------------
def load_suites(ctx: WorkContext, inputs: Inputs, step: int) -> list[Suite]:
    """Each sample's final code and kept tests of every declared tests part (the baseline's
    and each tested stage's)."""
    codes = {(r["problem_id"], r["sample_idx"]): r["output_text"]
             for r in inputs.rows(chain_part("generator", CODE_STAGE), TEXT_COLUMNS)}
    return build_suites(ctx.samples(step), codes, inputs.table_rows(TESTS),
                        peers=ctx.cfg.rewards.peer_tests)


def execute(ctx: WorkContext, inputs: Inputs, step: int) -> Outputs:
    """Every accumulated test vs final code, reference and mutants -> ``executions``."""
    run_jobs = sandbox_runner(ctx.cfg.sandbox)
    suites = load_suites(ctx, inputs, step)
    rows = run_suites(suites, {s.problem.id: ctx.mutants(s.problem) for s in suites}, run_jobs)
    return {executions_part(): rows}


def score(ctx: WorkContext, inputs: Inputs, step: int, training_stage: int) -> Outputs:
    """Per-sample generator and discriminator rewards -> ``rewards``."""
    samples = [(p.id, j) for p, j in ctx.samples(step)]
    outcomes = outcomes_from_rows(inputs.table_rows(TESTS), inputs.table_rows(EXECUTIONS),
                                  samples, training_stage)
    rows = reward_rows(outcomes, ctx.cfg.rewards, training_stage)
    if ctx.cfg.rewards.shuffle_seed is not None:  # a control run (configs: RewardConfig)
        rows = shuffled_rewards(rows, ctx.cfg.rewards.shuffle_seed, step)
    return {rewards_part(): rows}


def update(ctx: WorkContext, inputs: Inputs, step: int, role: str, stage: int) -> Outputs:
    """Update ``role``'s adapter on the trained stage's tokens -> ``updates/part-<role>``."""
    row = update_role(ctx.roles[role], inputs.rows(chain_part(role, stage)),
                      inputs.rows(rewards_part()), stage=stage,
                      sampling=ctx.cfg.sampling, ppo=ctx.cfg.ppo)
    return {update_part(role): [row]}
