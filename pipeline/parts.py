"""The parts of a step in the run store: one Parquet file each, named ``(table, part)``.

The tables' schemas are ``artifacts.schemas``'; which work item reads and writes which part is
the step catalogue's (``pipeline.catalogue``).
"""

from __future__ import annotations

from collections.abc import Sequence

from configs.names import STAGES

Part = tuple[str, str]  # (table, part): one Parquet file of a step
# The run store's tables (their schemas: ``artifacts.schemas``).
CHAINS, TESTS, EXECUTIONS = "chains", "tests", "executions"
REWARDS, UPDATES = "rewards", "updates"
STAGE_REPORTS = "stage_reports"  # written by the step's close (reporting), not a work item


def chain_part(role: str, stage: int) -> Part:
    """The chains part of ``role``'s text for chain stage ``stage``."""
    return (CHAINS, f"{role}-{stage}")


def suite_part(stage: int | None) -> Part:
    """The tests part of chain stage ``stage`` (None: the problems' own baseline tests)."""
    return (TESTS, "baseline" if stage is None else f"stage-{stage}")


def suite_parts(stages: Sequence[int] = STAGES) -> list[Part]:
    """Every tests part of a step whose discriminator tests ``stages``: baseline first, then
    the stages."""
    return [suite_part(None)] + [suite_part(s) for s in stages]


def executions_part() -> Part:
    return (EXECUTIONS, "all")


def rewards_part() -> Part:
    return (REWARDS, "all")


def update_part(role: str) -> Part:
    return (UPDATES, role)
