"""The training schedule as data: which role trains at which stage on which step.

Pure functions, no Prefect: the train flow iterates :func:`plan` and each step's work is a
function of (step, stage, role) and the run store, so a resumed run skips exactly the steps
whose manifests are complete.

    >>> [(s.step, s.stage, s.role, s.phase) for s in plan(ScheduleConfig(1, 1, 2, (1,)))]
    [(1, 1, 'discriminator', 'discriminator'), (2, 1, 'generator', 'generator'), \
(3, 1, 'generator', 'alternating'), (4, 1, 'discriminator', 'alternating')]
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from configs.schema import ScheduleConfig

ROLES = ("generator", "discriminator")
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


def derive_seed(base: int, *parts: object) -> int:
    """A stable 31-bit seed for one (step, stage, role, ...) from the run's base seed.

    >>> derive_seed(0, 3, 1, "generator") == derive_seed(0, 3, 1, "generator")
    True
    """
    blob = "/".join(str(p) for p in (base, *parts)).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big") & 0x7FFFFFFF
