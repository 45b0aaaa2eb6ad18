"""Parquet schemas and the run-scoped artifact store; MLflow helpers live in
``artifacts.tracking`` (imported on demand: it is the only module that imports mlflow)."""

from artifacts.convert import ArtifactError, SchemaError
from artifacts.fsutil import resolve_root
from artifacts.schemas import SCHEMAS, TableSchema, get_schema
from artifacts.store import (
    CorruptArtifactError,
    Pointer,
    RunStore,
    StepCompleteError,
    list_runs,
)

__all__ = [
    "ArtifactError", "CorruptArtifactError", "Pointer", "RunStore", "SCHEMAS", "SchemaError",
    "StepCompleteError", "TableSchema", "get_schema", "list_runs", "resolve_root",
]
