"""Turn what a task produced (DataFrame, list of dicts, Arrow table) into an Arrow table of one
declared schema, or raise a ``SchemaError`` naming the table, column and first bad row.

Nothing is inferred: every column is converted to the declared type, so a column of all-null
values or an empty batch cannot change a type from one step to the next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from artifacts.schemas import PARTITION_FIELDS, Gathered, TableSchema

Data = pd.DataFrame | pa.Table | Sequence[Mapping[str, Any]]


class ArtifactError(Exception):
    """Base class of the store's errors."""


class SchemaError(ArtifactError, ValueError):
    """Data does not match its table's declared schema (the message names the column)."""


def _columns(schema: TableSchema, data: Data) -> dict[str, Any]:
    """Column name -> values (Series, ChunkedArray or list), whatever the input container."""
    if isinstance(data, pd.DataFrame):
        return {str(c): data[c] for c in data.columns}
    if isinstance(data, pa.Table):
        return {name: data.column(name) for name in data.column_names}
    if isinstance(data, Mapping) or isinstance(data, str | bytes):
        raise SchemaError(f"{schema.name}: expected a DataFrame, an Arrow table or a list of "
                          f"row dicts, got {type(data).__name__}")
    rows = list(data)
    expected = set(schema.names)
    keys = set(rows[0]) if rows else expected
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise SchemaError(f"{schema.name}: row {i} is a {type(row).__name__}, not a dict")
        if set(row) != keys:
            diff = sorted(set(row) ^ keys)
            raise SchemaError(f"{schema.name}: row {i} has different columns than row 0 "
                              f"(column {diff[0]!r})")
    return {k: [row[k] for row in rows] for k in keys}


def _check_partition(schema: TableSchema, name: str, values: Any, expected: Any) -> None:
    """``run_id``/``step`` columns are optional; when given they must match the path."""
    arr = values if isinstance(values, pa.ChunkedArray) else pa.array(values, from_pandas=True)
    uniq = pc.unique(arr).to_pylist()
    if any(v != expected for v in uniq):
        bad = next(v for v in uniq if v != expected)
        raise SchemaError(f"{schema.name}: column {name!r} holds {bad!r} but this part belongs "
                          f"to {name}={expected!r}")


def to_arrow(schema: TableSchema, data: Data, *, run_id: str, step: int) -> pa.Table:
    """Validate and convert ``data`` to ``schema.arrow``; partition columns are checked, dropped."""
    cols = _columns(schema, data)
    for pfield, expected in zip(PARTITION_FIELDS, (run_id, step), strict=True):
        if pfield.name in cols:
            _check_partition(schema, pfield.name, cols.pop(pfield.name), expected)
    missing = [n for n in schema.names if n not in cols]
    if missing:
        raise SchemaError(f"{schema.name} (schema v{schema.version}): missing column "
                          f"{missing[0]!r}" + (f" (and {len(missing) - 1} more: "
                                               f"{', '.join(missing[1:])})" if missing[1:] else ""))
    extra = sorted(set(cols) - set(schema.names))
    if extra:
        raise SchemaError(f"{schema.name} (schema v{schema.version}): unexpected column "
                          f"{extra[0]!r}; add it to artifacts/schemas.py and bump the version")
    arrays = []
    for fld in schema.fields:
        values = cols[fld.name]
        try:
            if isinstance(values, pa.ChunkedArray):
                arr = values.cast(fld.type)  # safe cast: overflow/truncation raise
            else:
                arr = pa.array(values, type=fld.type, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError,
                ValueError, OverflowError) as exc:
            raise SchemaError(f"{schema.name}: column {fld.name!r} cannot be stored as "
                              f"{fld.type}: {exc}") from None
        if not fld.nullable and arr.null_count:
            first = pc.index(pc.is_null(arr), True).as_py()
            raise SchemaError(f"{schema.name}: column {fld.name!r} is null in row {first} "
                              "but the schema does not allow nulls")
        arrays.append(arr)
    table = pa.Table.from_arrays(arrays, schema=schema.arrow)
    errors = schema.row_errors(table)
    if errors:
        raise SchemaError(f"{schema.name}: {errors[0]}")
    return table


def check_file_schema(schema: TableSchema, got: pa.Schema, where: str) -> dict[str, Any]:
    """Refuse a file written with an unreadable schema version or other column types.

    Returns the columns an older (readable) version lacks, with their fill values
    (``TableSchema.upgrades``); ``{}`` for a file of the current version.
    """
    meta = got.metadata or {}
    version = meta.get(b"artifacts.schema_version", b"?").decode()
    fill = schema.columns_added_since(int(version)) if version.isdigit() else None
    if fill is None:
        raise SchemaError(f"{where}: written with {schema.name} schema v{version}, this reader "
                          f"expects v{schema.version}")
    for fld in schema.fields:
        if fld.name in fill and got.get_field_index(fld.name) < 0:
            continue
        idx = got.get_field_index(fld.name)
        if idx < 0:
            raise SchemaError(f"{where}: column {fld.name!r} is missing")
        if not got.field(idx).type.equals(fld.type):
            raise SchemaError(f"{where}: column {fld.name!r} is {got.field(idx).type}, schema "
                              f"{schema.name} v{schema.version} says {fld.type}")
    return fill


def add_filled_columns(schema: TableSchema, table: pa.Table, fill: dict[str, Any]) -> pa.Table:
    """``table`` (an older version's file) with each missing column of ``fill`` added: a
    ``Gathered`` fill built from the file's own columns, any other value repeated."""
    for name, value in fill.items():
        if table.schema.get_field_index(name) < 0:
            fld = schema.arrow.field(name)
            column = (value.array(table, fld.type) if isinstance(value, Gathered)
                      else pa.array([value] * table.num_rows, fld.type))
            table = table.append_column(fld, column)
    return table
