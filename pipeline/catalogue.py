"""The step catalogue: one declaration of a training step's work, in order, with the run-store
parts each item reads and writes.

A step regenerates the whole chain and learns from it::

    rollout-1, tests-1, rollout-2, tests-2, ..., rollout-5, tests-5, execute, rewards, update

``rollout-s`` is the generator writing stage s (it reads stages < s); ``tests-s`` is the
discriminator writing tests for stage s (it reads the generator's stages <= s and the tests of
earlier stages, to deduplicate); ``execute`` runs every kept test against the final code, the
reference and its mutants; ``rewards`` scores the samples; ``update`` is one PPO update of the
step's role. The train flow runs ``work_items()`` in order; replay reruns a *kind* of item
(``--stage tests`` is every ``tests-s``) from the inputs the catalogue names; recovery redoes
the first item whose outputs are missing and everything after it. All three derive from this
module, so they cannot drift apart.

    >>> [i.name for i in work_items()][:3], [i.name for i in work_items()][-3:]
    (['rollout-1', 'tests-1', 'rollout-2'], ['execute', 'rewards', 'update'])
    >>> kind_inputs("execute", "generator")
    [('chains', 'generator-5'), ('tests', 'baseline'), ('tests', 'stage-1'), \
('tests', 'stage-2'), ('tests', 'stage-3'), ('tests', 'stage-4'), ('tests', 'stage-5')]
"""

from __future__ import annotations

from dataclasses import dataclass

from configs.names import CODE_STAGE, ROLES, STAGES

__all__ = ["CHAINS", "CODE_STAGE", "EXECUTIONS", "KINDS", "REWARDS", "ROLES", "STAGES",
           "STAGE_REPORTS", "TESTS",
           "UPDATES", "Part", "WorkItem", "chain_part", "executions_part", "inputs_of",
           "items_of", "kind_inputs", "kind_outputs", "rewards_part", "step_parts",
           "suite_part", "suite_parts", "update_part", "work_items"]

Part = tuple[str, str]  # (table, part): one Parquet file of a step
# The run store's tables (their schemas: ``artifacts.schemas``).
CHAINS, TESTS, EXECUTIONS = "chains", "tests", "executions"
REWARDS, UPDATES = "rewards", "updates"
STAGE_REPORTS = "stage_reports"  # written by the step's close (reporting), not a work item
KINDS = ("rollout", "tests", "execute", "rewards", "update")
"""Kinds of work item, in step order: what ``flows.replay --stage`` names."""


def chain_part(role: str, stage: int) -> Part:
    """The chains part of ``role``'s text for chain stage ``stage``."""
    return (CHAINS, f"{role}-{stage}")


def suite_part(stage: int | None) -> Part:
    """The tests part of chain stage ``stage`` (None: the problems' own baseline tests)."""
    return (TESTS, "baseline" if stage is None else f"stage-{stage}")


def suite_parts() -> list[Part]:
    """Every tests part of a step: baseline first, then the stages."""
    return [suite_part(None)] + [suite_part(s) for s in STAGES]


def executions_part() -> Part:
    return (EXECUTIONS, "all")


def rewards_part() -> Part:
    return (REWARDS, "all")


def update_part(role: str) -> Part:
    return (UPDATES, role)


@dataclass(frozen=True)
class WorkItem:
    """One unit of a step's work: a kind and, for rollout and tests, its chain stage."""

    kind: str
    stage: int | None = None

    @property
    def name(self) -> str:
        return self.kind if self.stage is None else f"{self.kind}-{self.stage}"

    def model_role(self, role: str) -> str | None:
        """The role whose adapter this item samples or updates (``role``: the step's)."""
        return {"rollout": "generator", "tests": "discriminator", "update": role}.get(self.kind)

    def outputs(self, role: str) -> list[Part]:
        """The parts this item writes; ``role`` is the role the step updates."""
        s = self.stage
        if self.kind == "rollout":
            return [chain_part("generator", s)]
        if self.kind == "tests":
            return [chain_part("discriminator", s), suite_part(s)] + \
                ([suite_part(None)] if s == STAGES[0] else [])
        return {"execute": [executions_part()], "rewards": [rewards_part()],
                "update": [update_part(role)]}[self.kind]

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        """The parts this item reads (``trained_stage``: the stage the update trains on)."""
        s = self.stage
        if self.kind == "rollout":
            return [chain_part("generator", t) for t in STAGES if t < s]
        if self.kind == "tests":
            return [chain_part("generator", t) for t in STAGES if t <= s] + \
                [suite_part(t) for t in STAGES if t < s]
        return {"execute": [chain_part("generator", CODE_STAGE), *suite_parts()],
                "rewards": [*suite_parts(), executions_part()],
                "update": [chain_part(role, trained_stage), rewards_part()]}[self.kind]


def work_items() -> list[WorkItem]:
    """A step's work in the order the train flow runs it."""
    items: list[WorkItem] = []
    for s in STAGES:
        items += [WorkItem("rollout", s), WorkItem("tests", s)]
    return items + [WorkItem("execute"), WorkItem("rewards"), WorkItem("update")]


def items_of(kind: str) -> list[WorkItem]:
    """The items of one kind, in step order (``ValueError`` for an unknown kind)."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r}: expected one of {', '.join(KINDS)}")
    return [i for i in work_items() if i.kind == kind]


def kind_outputs(kind: str, role: str) -> list[Part]:
    return [p for i in items_of(kind) for p in i.outputs(role)]


def kind_inputs(kind: str, role: str, trained_stage: int = CODE_STAGE) -> list[Part]:
    """What the items of ``kind`` read that none of them writes, in first-use order."""
    return inputs_of(items_of(kind), role, trained_stage)


def inputs_of(items: list[WorkItem], role: str, trained_stage: int) -> list[Part]:
    """What ``items`` (run in order) read that no earlier item of them writes."""
    made: set[Part] = set()
    needed: list[Part] = []
    for item in items:
        needed += [p for p in item.inputs(role, trained_stage) if p not in made]
        made.update(item.outputs(role))
    return list(dict.fromkeys(needed))


def step_parts(role: str) -> list[Part]:
    """Every part a complete step has (``role``: the role the step updates)."""
    return [p for i in work_items() for p in i.outputs(role)]
