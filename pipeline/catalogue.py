"""The step catalogue: one declaration of a training step's work, in order. Each kind of work
item is a type that says what it reads, what it writes and which function it runs; nothing
else dispatches on kinds.

A step regenerates the whole chain and learns from it::

    rollout-1, ..., rollout-5, baseline, tests-1, ..., tests-5, execute, rewards, update

``rollout-s`` is the generator writing stage s (it reads stages < s); ``baseline`` records the
problems' own tests; ``tests-s`` is the discriminator writing tests for stage s (it reads the
generator's stages <= s and the tests of earlier stages, to deduplicate); ``execute`` runs every
kept test against the final code, the reference and its mutants; ``rewards`` scores the
samples; ``update`` is one PPO update of the step's role. A run's chain
(``configs.ChainConfig``) may hold fewer stages and no discriminator: its items are then the
rollouts of its stages, ``baseline``, the tests of its stages when the discriminator writes
them, and the rest. The train flow runs ``work_items(cfg.chain)`` in order; replay reruns a
*kind* of item (``--stage tests`` is every ``tests-s``) from the inputs the catalogue names;
recovery redoes the first item whose outputs are missing and everything after it. All three
run items through ``WorkItem.run`` (as Prefect tasks: ``tasks.step``), so they cannot drift
apart.

``WorkItem.run`` is the one runner: it reads the item's declared inputs from the run store,
calls the item's function (``work``: one function of ``pipeline.stepwork``) with them and what
the run gives (models, config, samples, seeds; never the store), checks that the function read
every declared input and returned rows for exactly the declared outputs, and writes those.
What an item declares is therefore what it reads and writes, and a new kind of item is one
type here (with its place in ``ITEM_TYPES``) plus one function there.

    >>> [i.name for i in work_items()][:3], [i.name for i in work_items()][-3:]
    (['rollout-1', 'rollout-2', 'rollout-3'], ['execute', 'rewards', 'update'])
    >>> [i.name for i in work_items(ChainConfig(stages=(5,), discriminator=False))]
    ['rollout-5', 'baseline', 'execute', 'rewards', 'update']
    >>> kind_inputs("execute", "generator")
    [('chains', 'generator-5'), ('tests', 'baseline'), ('tests', 'stage-1'), \
('tests', 'stage-2'), ('tests', 'stage-3'), ('tests', 'stage-4'), ('tests', 'stage-5')]
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from configs.learning import ChainConfig
from configs.names import CODE_STAGE
from pipeline.parts import (
    Inputs,
    Outputs,
    Part,
    chain_part,
    executions_part,
    rewards_part,
    suite_part,
    suite_parts,
    update_part,
)
from pipeline.schedule import PlannedStep

if TYPE_CHECKING:
    from artifacts.store import Pointer, RunStore
    from pipeline.stepwork import StepContext, WorkContext


def _work() -> ModuleType:
    """``pipeline.stepwork``, imported when an item first runs: what the items read and write
    is declared here without torch, so ``flows.replay --help`` and its usage errors answer at
    once (the work itself needs torch and the models)."""
    from pipeline import stepwork

    return stepwork


class MissingInputError(FileNotFoundError):
    """A declared input of a work item is not in the run store: the item that writes it has
    not run for this step."""


class DeclarationError(RuntimeError):
    """A work function and its item's declarations disagree: it returned other parts than the
    declared outputs, or left a declared input unread."""


class _WithoutStore:
    """``ctx`` less its run store: what a work function gets, so that it sees only the inputs
    the runner read for it."""

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx

    def __getattr__(self, name: str) -> Any:
        if name == "store":
            raise AttributeError("a work function reads its declared inputs, not the run "
                                 "store (pipeline.catalogue)")
        return getattr(self._ctx, name)


def _parts_text(parts: list[Part]) -> str:
    return ", ".join(f"{t}/{p}" for t, p in parts) or "none"


@dataclass(frozen=True)
class WorkItem:
    """One unit of a step's work. Subclasses are the kinds: each declares the parts it reads
    (``inputs``) and writes (``outputs``) and the function it runs on them (``work``); the
    runner (``run``) is theirs in common. ``role`` below is the role the step updates;
    ``trained_stage`` the chain stage its update trains on."""

    kind: ClassVar[str]
    task: ClassVar[str]         # the Prefect task's name
    retries: ClassVar[int] = 0  # safe to retry only when re-running cannot change the result
    samples: ClassVar[bool] = False  # draws from a sampler (the vLLM engine, where configured)
    judges: ClassVar[bool] = False   # runs code in the sandbox

    @property
    def name(self) -> str:
        return self.kind

    def run_name(self, planned: PlannedStep) -> str:
        """The Prefect task run's name."""
        return f"{self.kind}-step{planned.step}"

    @classmethod
    def of_chain(cls, chain: ChainConfig) -> list[WorkItem]:
        """This kind's items in a step of a run whose chain is ``chain``, in step order."""
        return [cls()]

    def model_role(self, role: str) -> str | None:
        """The role whose adapter this item samples or updates (None: no model)."""
        return None

    def outputs(self, role: str) -> list[Part]:
        raise NotImplementedError

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        raise NotImplementedError

    def work(self, ctx: WorkContext, planned: PlannedStep, inputs: Inputs) -> Outputs:
        """The item's function: rows per declared output, from the declared inputs."""
        raise NotImplementedError

    def run(self, ctx: StepContext, planned: PlannedStep) -> list[Pointer]:
        """Read the declared inputs from ``ctx.store``, run :meth:`work` on them, check what it
        read and returned against the declarations, and write the declared outputs (in
        declaration order); returns the parts written."""
        step = planned.step
        inputs = self.read_inputs(ctx.store, step, planned.role, planned.stage)
        declared = self.outputs(planned.role)
        rows = self.work(_WithoutStore(ctx), planned, inputs)
        wrong = []
        if set(rows) != set(declared):
            wrong.append(f"returned {_parts_text(list(rows))} where the item declares the "
                         f"outputs {_parts_text(declared)}")
        if inputs.unread():
            wrong.append(f"never read its declared input(s) {_parts_text(inputs.unread())}")
        if wrong:
            raise DeclarationError(f"work item {self.name} of step {step}: its function "
                                   + " and ".join(wrong) + "; make the item's declarations "
                                   "(pipeline.catalogue) and its function agree")
        return [ctx.store.write(table, step, part, rows[(table, part)])
                for table, part in declared]

    def read_inputs(self, store: RunStore, step: int, role: str,
                    trained_stage: int) -> Inputs:
        """The declared inputs of this item at ``step``, each part as it is in ``store``
        (``MissingInputError`` naming every absent one)."""
        parts = self.inputs(role, trained_stage)
        missing = [p for p in parts if not store.has_part(p[0], step, p[1])]
        if missing:
            where = ", ".join(store.part_uri(t, step, p) for t, p in missing)
            raise MissingInputError(f"work item {self.name} of step {step} reads {where}, "
                                    "which is not there: run the items that write it first")
        return Inputs({p: store.read_table(p[0], step=step, part=p[1]) for p in parts})


@dataclass(frozen=True)
class StageItem(WorkItem):
    """An item of one chain stage of a run whose chain is ``chain``."""

    stage: int
    chain: ChainConfig = ChainConfig()

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.stage}"

    def run_name(self, planned: PlannedStep) -> str:
        return f"{self.kind}-step{planned.step}-stage{self.stage}"


@dataclass(frozen=True)
class Rollout(StageItem):
    """The generator writes chain stage ``stage``, given the stages before it."""

    kind: ClassVar[str] = "rollout"
    task: ClassVar[str] = "rollout"
    samples: ClassVar[bool] = True

    @classmethod
    def of_chain(cls, chain: ChainConfig) -> list[WorkItem]:
        return [cls(s, chain) for s in chain.stages]

    def model_role(self, role: str) -> str:
        return "generator"

    def outputs(self, role: str) -> list[Part]:
        return [chain_part("generator", self.stage)]

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        return [chain_part("generator", t) for t in self.chain.before(self.stage)]

    def work(self, ctx: WorkContext, planned: PlannedStep, inputs: Inputs) -> Outputs:
        return _work().rollout(ctx, inputs, planned.step, self.stage, self.chain)


@dataclass(frozen=True)
class Baseline(WorkItem):
    """The problems' own tests, each sample's suite before the discriminator adds to it."""

    kind: ClassVar[str] = "baseline"
    task: ClassVar[str] = "baseline-tests"

    def outputs(self, role: str) -> list[Part]:
        return [suite_part(None)]

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        return []

    def work(self, ctx: WorkContext, planned: PlannedStep, inputs: Inputs) -> Outputs:
        return _work().baseline(ctx, planned.step)


@dataclass(frozen=True)
class Tests(StageItem):
    """The discriminator writes tests for chain stage ``stage``."""

    kind: ClassVar[str] = "tests"
    task: ClassVar[str] = "generate-tests"
    samples: ClassVar[bool] = True

    @classmethod
    def of_chain(cls, chain: ChainConfig) -> list[WorkItem]:
        return [cls(s, chain) for s in chain.test_stages]

    def model_role(self, role: str) -> str:
        return "discriminator"

    def outputs(self, role: str) -> list[Part]:
        return [chain_part("discriminator", self.stage), suite_part(self.stage)]

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        return [chain_part("generator", t) for t in self.chain.upto(self.stage)] + \
            [suite_part(t) for t in self.chain.before(self.stage)]

    def work(self, ctx: WorkContext, planned: PlannedStep, inputs: Inputs) -> Outputs:
        return _work().generate_tests(ctx, inputs, planned.step, self.stage, self.chain)


@dataclass(frozen=True)
class SuiteItem(WorkItem):
    """An item that reads every sample's whole suite in a run whose chain is ``chain``."""

    chain: ChainConfig = ChainConfig()

    @classmethod
    def of_chain(cls, chain: ChainConfig) -> list[WorkItem]:
        return [cls(chain)]


@dataclass(frozen=True)
class Execute(SuiteItem):
    """Every kept test against the final code, the reference and its mutants."""

    kind: ClassVar[str] = "execute"
    task: ClassVar[str] = "execute"
    judges: ClassVar[bool] = True
    # A dead sandbox worker is infrastructure, and re-running the same jobs is safe (the part
    # is replaced atomically). Failing tests are results, never exceptions.
    retries: ClassVar[int] = 1

    def outputs(self, role: str) -> list[Part]:
        return [executions_part()]

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        return [chain_part("generator", CODE_STAGE), *suite_parts(self.chain.test_stages)]

    def work(self, ctx: WorkContext, planned: PlannedStep, inputs: Inputs) -> Outputs:
        return _work().execute(ctx, inputs, planned.step)


@dataclass(frozen=True)
class Rewards(SuiteItem):
    """Per-sample rewards of both roles from the step's executions."""

    kind: ClassVar[str] = "rewards"
    task: ClassVar[str] = "rewards"

    def run_name(self, planned: PlannedStep) -> str:
        return f"rewards-step{planned.step}-stage{planned.stage}"

    def outputs(self, role: str) -> list[Part]:
        return [rewards_part()]

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        return [*suite_parts(self.chain.test_stages), executions_part()]

    def work(self, ctx: WorkContext, planned: PlannedStep, inputs: Inputs) -> Outputs:
        return _work().score(ctx, inputs, planned.step, planned.stage)


@dataclass(frozen=True)
class Update(WorkItem):
    """One PPO update of the step's role on the trained stage's tokens (never retried: an
    update is not idempotent)."""

    kind: ClassVar[str] = "update"
    task: ClassVar[str] = "ppo-update"

    def run_name(self, planned: PlannedStep) -> str:
        return f"ppo-update-step{planned.step}-stage{planned.stage}-{planned.role}"

    def model_role(self, role: str) -> str:
        return role

    def outputs(self, role: str) -> list[Part]:
        return [update_part(role)]

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        return [chain_part(role, trained_stage), rewards_part()]

    def work(self, ctx: WorkContext, planned: PlannedStep, inputs: Inputs) -> Outputs:
        return _work().update(ctx, inputs, planned.step, planned.role, planned.stage)


ITEM_TYPES: tuple[type[WorkItem], ...] = (Rollout, Baseline, Tests, Execute, Rewards, Update)
"""The kinds of work item, in step order: a new kind is a type above, its place here, and its
function (``pipeline.stepwork``)."""
KINDS = tuple(t.kind for t in ITEM_TYPES)
"""Kinds of work item, in step order: what ``flows.replay --stage`` names."""


def work_items(chain: ChainConfig | None = None) -> list[WorkItem]:
    """A step's work in the order the train flow runs it: the generator's stages, the
    problems' own tests, then the discriminator's tests of each stage, then execution, rewards
    and the update (``chain``: the run's ``cfg.chain``; default the full chain).

    The generator's stage k reads only its own stages before k, and the discriminator's tests
    of stage k read the generator's stages up to k, so this order gives every item the inputs
    the interleaved one would (same prompts, same seeds, same rows). Sampling one role's
    stages together lets an engine that holds one adapter at a time (``sampling.engine=vllm``
    with merged weights) switch roles twice per step instead of ten times."""
    chain = chain or ChainConfig()
    return [item for kind in ITEM_TYPES for item in kind.of_chain(chain)]


def items_of(kind: str, chain: ChainConfig | None = None) -> list[WorkItem]:
    """The items of one kind, in step order (``ValueError`` for an unknown kind)."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r}: expected one of {', '.join(KINDS)}")
    return [i for i in work_items(chain) if i.kind == kind]


def kind_outputs(kind: str, role: str, chain: ChainConfig | None = None) -> list[Part]:
    return [p for i in items_of(kind, chain) for p in i.outputs(role)]


def kind_inputs(kind: str, role: str, trained_stage: int = CODE_STAGE,
                chain: ChainConfig | None = None) -> list[Part]:
    """What the items of ``kind`` read that none of them writes, in first-use order."""
    return inputs_of(items_of(kind, chain), role, trained_stage)


def inputs_of(items: list[WorkItem], role: str, trained_stage: int) -> list[Part]:
    """What ``items`` (run in order) read that no earlier item of them writes."""
    made: set[Part] = set()
    needed: list[Part] = []
    for item in items:
        needed += [p for p in item.inputs(role, trained_stage) if p not in made]
        made.update(item.outputs(role))
    return list(dict.fromkeys(needed))


def step_parts(role: str, chain: ChainConfig | None = None) -> list[Part]:
    """Every part a complete step has (``role``: the role the step updates)."""
    return [p for i in work_items(chain) for p in i.outputs(role)]
