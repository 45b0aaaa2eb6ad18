"""The parts of a step in the run store: one Parquet file each, named ``(table, part)``, and
what a work item's function gets and gives: its declared inputs (:class:`Inputs`) and rows per
declared output (:data:`Outputs`).

The tables' schemas are ``artifacts.schemas``'; which work item reads and writes which part is
the step catalogue's (``pipeline.catalogue``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from configs.names import STAGES

if TYPE_CHECKING:
    import pyarrow as pa

Part = tuple[str, str]  # (table, part): one Parquet file of a step
Outputs = dict[Part, Any]  # a work function's result: rows (a list of dicts) per output part
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


class UndeclaredPartError(KeyError):
    """A work function asked for a part its catalogue entry does not declare as an input."""

    def __str__(self) -> str:  # KeyError's own str() would quote the whole message
        return str(self.args[0])


class Inputs:
    """A work item's declared inputs, read from the run store by the runner: one Arrow table
    per part, in declaration order. A function sees nothing else of the store, so what it reads
    is what its entry declares; asking for another part raises :class:`UndeclaredPartError`,
    and :meth:`unread` names the declared parts it never asked for (the runner refuses those
    too).

    >>> import pyarrow as pa
    >>> inputs = Inputs({suite_part(None): pa.table({"x": [1]}),
    ...                  suite_part(1): pa.table({"x": [2, 3]})})
    >>> inputs.unread()
    [('tests', 'baseline'), ('tests', 'stage-1')]
    >>> inputs.table_rows(TESTS)
    [{'x': 1}, {'x': 2}, {'x': 3}]
    >>> inputs.unread()
    []
    """

    def __init__(self, tables: dict[Part, pa.Table]) -> None:
        self._tables = dict(tables)
        self._read: set[Part] = set()

    def __getitem__(self, part: Part) -> pa.Table:
        if part not in self._tables:
            declared = ", ".join(f"{t}/{p}" for t, p in self._tables) or "none"
            raise UndeclaredPartError(f"{part[0]}/{part[1]} is not a declared input (declared: "
                                      f"{declared}); declare it in the item's inputs "
                                      "(pipeline.catalogue)")
        self._read.add(part)
        return self._tables[part]

    def rows(self, part: Part, columns: list[str] | None = None) -> list[dict[str, Any]]:
        """The rows of ``part`` (only ``columns``, when given)."""
        table = self[part]
        return (table.select(columns) if columns else table).to_pylist()

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        """The rows of every declared part of ``table``, in declaration order."""
        return [r for part in self._tables if part[0] == table for r in self.rows(part)]

    def unread(self) -> list[Part]:
        """The declared parts not read so far, in declaration order."""
        return [p for p in self._tables if p not in self._read]
