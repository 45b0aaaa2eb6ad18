"""Replayed parts against recorded ones: every column equal but wall-clock timings (and the
memory addresses inside pytest's messages)."""

from __future__ import annotations

import math
import re
from typing import Any

import pyarrow as pa

TIMING_COLUMNS = {"chains": {"latency_s"}, "executions": {"duration_s"},
                  "updates": {"duration_s"}}  # wall-clock: never reproducible, never compared
# pytest's failure messages show objects as ``<function add at 0x7f27...>``: the address
# differs from process to process, so these columns are compared with addresses blanked.
ADDRESS_COLUMNS = {"executions": {"message"}}
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def _blank_addresses(value: Any) -> Any:
    """``value`` with every memory address (``0x`` and 6+ hex digits) as ``0x?``.

    >>> _blank_addresses("where -1 = <function add at 0x7f279e70d3a0>(1, 2)")
    'where -1 = <function add at 0x?>(1, 2)'
    """
    return _ADDRESS.sub("0x?", value) if isinstance(value, str) else value


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
        if col in ADDRESS_COLUMNS.get(table, ()):
            a, b = [_blank_addresses(x) for x in a], [_blank_addresses(y) for y in b]
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if not _same(x, y):
                return f"row {i}, column {col!r}: recorded {_short(x)}, replayed {_short(y)}"
    return None
