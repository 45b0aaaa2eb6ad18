"""The training schedule as data: which role trains at which stage on which step.

The train flow iterates :func:`plan`; each step's work (``pipeline.catalogue``) is a function
of (step, stage, role) and the run store, so a resumed run skips exactly the steps whose
manifests are complete.

    >>> [(s.step, s.stage, s.role, s.phase) for s in plan(ScheduleConfig(1, 1, 2, (1,)))]
    [(1, 1, 'discriminator', 'discriminator'), (2, 1, 'generator', 'generator'), \
(3, 1, 'generator', 'alternating'), (4, 1, 'discriminator', 'alternating')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from configs.names import ROLES
from configs.schema import ScheduleConfig

T = TypeVar("T")


@dataclass(frozen=True)
class PlannedStep:
    step: int
    """Global step number, from 1, across all stages."""
    stage: int
    """Training stage 1..5: the stage whose tokens the update trains on."""
    role: str
    """The role whose adapter is updated; the other one is frozen."""
    phase: str
    """``discriminator`` (first N), ``generator`` (next N) or ``alternating`` (last K)."""


def plan(schedule: ScheduleConfig) -> list[PlannedStep]:
    """For each stage: N discriminator steps, N generator steps, K alternating (generator first)."""
    out: list[PlannedStep] = []
    for stage in schedule.stages:
        roles = ([("discriminator", "discriminator")] * schedule.n_discriminator_steps
                 + [("generator", "generator")] * schedule.n_generator_steps
                 + [(ROLES[k % 2], "alternating") for k in range(schedule.k_alternating)])
        for role, phase in roles:
            out.append(PlannedStep(len(out) + 1, stage, role, phase))
    return out


def ends_stage(steps: Sequence[PlannedStep], index: int) -> bool:
    """``steps[index]`` is the last step of its training stage (its checkpoint is logged).

    >>> steps = plan(ScheduleConfig(1, 1, 0, (1, 2)))
    >>> [ends_stage(steps, i) for i in range(len(steps))]
    [False, True, False, True]
    """
    return index + 1 == len(steps) or steps[index + 1].stage != steps[index].stage


def step_items(items: Sequence[T], step: int, k: int) -> list[T]:
    """The ``k`` items of ``step`` (1-based), cycling through ``items`` in order.

    >>> step_items("abcde", 1, 2), step_items("abcde", 3, 2)
    (['a', 'b'], ['e', 'a'])
    """
    if not items:
        raise ValueError("step_items: no items to draw from")
    k = min(k, len(items))
    start = (step - 1) * k
    return [items[(start + i) % len(items)] for i in range(k)]
