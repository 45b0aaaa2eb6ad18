"""Replayed parts against recorded ones: every column equal but wall-clock timings."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

TIMING_COLUMNS = {"chains": {"latency_s"}, "executions": {"duration_s"},
                  "updates": {"duration_s"}}  # wall-clock: never reproducible, never compared


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def compare_tables(table: str, recorded: pa.Table, replayed: pa.Table) -> str | None:
    """None when both agree on every column but the timings, else the first difference.

    >>> t = pa.table({"stage": [1], "status": ["passed"], "duration_s": [0.1]})
    >>> compare_tables("executions", t, t.set_column(2, "duration_s", pa.array([9.0])))
    >>> compare_tables("executions", t, t.set_column(1, "status", pa.array(["failed"])))
    "row 0, column 'status': recorded 'passed', replayed 'failed'"
    """
    if recorded.num_rows != replayed.num_rows:
        return f"{recorded.num_rows} rows recorded, {replayed.num_rows} replayed"
    skip = TIMING_COLUMNS.get(table, set()) | {"run_id", "step"}
    for col in [c for c in recorded.column_names if c not in skip]:
        a, b = recorded.column(col).to_pylist(), replayed.column(col).to_pylist()
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if not _same(x, y):
                return f"row {i}, column {col!r}: recorded {_short(x)}, replayed {_short(y)}"
    return None
