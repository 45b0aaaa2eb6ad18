"""Parquet schemas and the run-scoped artifact store; MLflow tracking lives in
``artifacts.tracking`` (imported on demand: with ``serving.registry``, the only modules that
import mlflow)."""

import os

# Here, because a package's __init__ runs before any of its modules: MLflow reads these when it
# is imported. The machines this runs on are offline: no telemetry, no bars in task logs.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

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
