"""The run-scoped Parquet artifact store.

Layout (hive-style, so ``pyarrow.dataset`` and ``pandas.read_parquet`` read it with filters)::

    <root>/run_id=<id>/table=<name>/step=<NNNNNN>/part-<part>.parquet
    <root>/run_id=<id>/_manifests/step=<NNNNNN>.json      # written last: the step is complete

* One file per run/table/step/part, written whole to a hidden temp file in the same folder and
  renamed over the final name (``os.replace`` locally, ``move`` elsewhere). A writer killed at
  any point leaves either the previous file or the new one, never a partial one; leftover
  ``.part-*.tmp-*`` files are invisible to readers and to ``pyarrow.dataset`` (dot prefix).
* ``complete_step`` writes the step's manifest (every file with rows and sha256) last, then the
  step is frozen: further writes to it raise. Readers verify files of complete steps against the
  manifest; ``incomplete_steps()`` finds steps a crash left behind. A manifest that exists but
  does not read, parse or validate is corruption, not absence: every reader of the step's state
  raises ``ManifestCorrupt`` naming the file (``corrupt_manifests()`` lists them all).
* ``root`` is a local folder or any URI pyarrow opens (``file://``, ``s3://``, ``gs://``, ...)
  or fsspec does (``memory://``, ...).

    store = RunStore("runs", run_id="r1")
    ptr = store.write("chains", step=3, part="generator-stage1", data=frame)
    store.complete_step(3, [ptr, ...])
    df = store.read("chains", step=3, filters=[("stage", "=", 1)])

Opening the data without this module: ``pd.read_parquet("<root>/run_id=r1/table=chains",
filters=[("step", "=", 3)])`` (files of incomplete steps are included there).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from artifacts.convert import (
    ArtifactError,
    Data,
    SchemaError,
    add_filled_columns,
    check_file_schema,
    to_arrow,
)
from artifacts.fsutil import atomic_write, resolve_root, sha256_bytes
from artifacts.manifests import (  # noqa: F401 - re-exported: callers import them from here
    MANIFEST_FORMAT,
    PART_RE,
    CorruptArtifactError,
    ManifestCorrupt,
    StepCompleteError,
    check_step,
    entry_problem,
    manifest_problem,
    manifest_relpath,
    parse_manifest,
    part_relpath,
    salvage_entries,
)
from artifacts.schemas import get_schema
from artifacts.steps import StepUpkeep


@dataclass(frozen=True)
class Pointer:
    """What a task returns instead of data: where the file is and what it holds."""

    root: str
    run_id: str
    table: str
    step: int
    part: str
    rows: int
    sha256: str
    nbytes: int
    schema_version: int

    @property
    def relpath(self) -> str:
        """Path below the run folder (as listed in manifests)."""
        return part_relpath(self.table, self.step, self.part)

    @property
    def path(self) -> str:
        return RunStore(self.root, self.run_id).uri_of(self.relpath)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Pointer:
        return cls(**d)


class RunStore(StepUpkeep):
    """Parquet artifacts of one run; cheap to construct and to pickle (Prefect tasks)."""

    def __init__(self, root: str, run_id: str) -> None:
        if not run_id or not PART_RE.match(run_id):
            raise ValueError(f"run_id={run_id!r}: use letters, digits, '_', '.', '-'")
        root = str(root)
        # Local roots become absolute so pointers stay valid in a task with another cwd.
        self.root = root if "://" in root else os.path.abspath(os.path.expanduser(root))
        self.run_id = run_id
        self._fs: pafs.FileSystem | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"root": self.root, "run_id": self.run_id, "_fs": None}

    def __repr__(self) -> str:
        return f"RunStore({self.root!r}, run_id={self.run_id!r})"

    # -- paths ---------------------------------------------------------------------------------
    @property
    def fs(self) -> pafs.FileSystem:
        if self._fs is None:
            self._fs, self._base = resolve_root(self.root)
        return self._fs

    @property
    def run_dir(self) -> str:
        self.fs  # noqa: B018 - resolves self._base
        return f"{self._base.rstrip('/')}/run_id={self.run_id}"

    def _uri(self, path: str) -> str:
        """A user-facing name for an fs path (errors name files the way the user wrote root)."""
        return self.uri_of(path[len(self.run_dir):].lstrip("/"))

    def _manifest_path(self, step: int) -> str:
        return f"{self.run_dir}/{manifest_relpath(step)}"

    def manifest_uri(self, step: int) -> str:
        """Where the step's manifest is (or would be), as the user wrote the root."""
        return self._uri(self._manifest_path(step))

    def part_relpath(self, table: str, step: int, part: str) -> str:
        """A part file's path below the run folder, as manifests list it."""
        return part_relpath(table, step, part)

    def uri_of(self, relpath: str) -> str:
        """A path below the run folder as a URI, the way the user wrote the root."""
        return f"{self.root.rstrip('/')}/run_id={self.run_id}/{relpath}"

    def part_uri(self, table: str, step: int, part: str) -> str:
        """Where a part file is (or would be), as the user wrote the root."""
        return self.uri_of(part_relpath(table, step, part))

    def has_part(self, table: str, step: int, part: str) -> bool:
        path = f"{self.run_dir}/{part_relpath(table, step, part)}"
        return self.fs.get_file_info(path).type == pafs.FileType.File

    # -- low-level I/O -------------------------------------------------------------------------
    def _write_atomic(self, path: str, data: bytes) -> None:
        atomic_write(self.fs, path, data)

    def _read_bytes(self, path: str) -> bytes:
        try:
            with self.fs.open_input_stream(path) as f:
                return f.read()
        except (FileNotFoundError, OSError) as exc:
            raise CorruptArtifactError(f"{self._uri(path)}: cannot read ({exc})") from None

    def _listing(self) -> list[pafs.FileInfo]:
        if self.fs.get_file_info(self.run_dir).type != pafs.FileType.Directory:
            return []
        return self.fs.get_file_info(pafs.FileSelector(self.run_dir, recursive=True))

    # -- writing -------------------------------------------------------------------------------
    def write(self, table: str, step: int, part: str, data: Data) -> Pointer:
        """Validate ``data`` against ``table``'s schema and write it as one file.

        ``run_id``/``step`` columns may be given (they must match) or left out. Re-writing a part
        of an incomplete step replaces it atomically (a retried task); a complete step raises
        ``StepCompleteError``. A ``SchemaError`` leaves everything on disk as it was.
        """
        schema = get_schema(table)
        step = check_step(step)
        if not PART_RE.match(part):
            raise ValueError(f"part={part!r}: use letters, digits, '_', '.', '-' (e.g. stage-3)")
        if self.is_complete(step):
            raise StepCompleteError(f"{self._uri(self._manifest_path(step))}: step {step} is "
                                    "complete; write to a new step or run")
        arrow = to_arrow(schema, data, run_id=self.run_id, step=step)
        sink = pa.BufferOutputStream()
        pq.write_table(arrow, sink, compression="zstd")
        blob = sink.getvalue().to_pybytes()
        ptr = Pointer(self.root, self.run_id, table, step, part, arrow.num_rows,
                      sha256_bytes(blob), len(blob), schema.version)
        self._write_atomic(f"{self.run_dir}/{ptr.relpath}", blob)
        return ptr

    def complete_step(self, step: int, pointers: Iterable[Pointer] | None = None) -> str:
        """Verify the step's files and write its manifest last; returns the manifest's URI.

        With ``pointers`` the manifest lists exactly those (each re-hashed on disk) and any other
        file in the step is an error; without, it lists every file present.
        """
        step = check_step(step)
        present = {p: None for p in self._part_paths(step)}
        if pointers is None:
            entries = [self._entry_from_disk(path) for path in present]
        else:
            entries = []
            for ptr in pointers:
                if (ptr.run_id, ptr.step) != (self.run_id, step):
                    raise ArtifactError(f"{ptr.path}: pointer is for run {ptr.run_id} step "
                                        f"{ptr.step}, not {self.run_id} step {step}")
                path = f"{self.run_dir}/{ptr.relpath}"
                entry = self._entry_from_disk(path)
                if entry["sha256"] != ptr.sha256:
                    raise CorruptArtifactError(f"{ptr.path}: content changed since it was written "
                                               "(sha256 differs from the pointer)")
                entries.append(entry)
                present.pop(path, None)
            if present:
                raise ArtifactError(f"step {step}: {self._uri(next(iter(present)))} is not in "
                                    "the pointers given to complete_step")
        manifest = {"format": MANIFEST_FORMAT, "run_id": self.run_id, "step": step,
                    "completed_at": time.time(),
                    "files": sorted(entries, key=lambda e: e["path"])}
        path = self._manifest_path(step)
        self._write_atomic(path, json.dumps(manifest, indent=1).encode())
        return self._uri(path)

    def _entry_from_disk(self, path: str) -> dict[str, Any]:
        blob = self._read_bytes(path)
        rel = path[len(self.run_dir) + 1:]
        table = rel.split("/", 1)[0].removeprefix("table=")
        rows = self._parse(blob, path, table).num_rows
        return {"path": rel, "table": table, "rows": rows, "sha256": sha256_bytes(blob),
                "bytes": len(blob)}

    # -- run documents -------------------------------------------------------------------------
    def write_json(self, name: str, data: Any) -> str:
        """A small JSON document of the run, ``_run/<name>`` (its config, replay reports), written
        atomically and replaced on the next write; not part of any step. Returns its URI."""
        if not PART_RE.match(name):
            raise ValueError(f"name={name!r}: use letters, digits, '_', '.', '-'")
        path = f"{self.run_dir}/_run/{name}"
        self._write_atomic(path, json.dumps(data, indent=1, sort_keys=True).encode())
        return self._uri(path)

    def read_json(self, name: str) -> Any | None:
        """The document written by ``write_json``, or None when there is none."""
        path = f"{self.run_dir}/_run/{name}"
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        try:
            return json.loads(self._read_bytes(path))
        except ValueError:
            raise CorruptArtifactError(f"{self._uri(path)}: not valid JSON") from None

    # -- state of steps ------------------------------------------------------------------------
    def manifest(self, step: int) -> dict[str, Any] | None:
        """The step's manifest, or None when there is none (the step is incomplete).

        A manifest file that exists but cannot be read, is not JSON or does not validate
        (``format``, ``run_id``, ``step``, ``files`` and each file entry) raises
        ``ManifestCorrupt`` naming the file and what is wrong: the step had been completed."""
        step = check_step(step)
        path = self._manifest_path(step)
        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return None
        uri = self._uri(path)
        if info.type != pafs.FileType.File:
            raise ManifestCorrupt(uri, step, "not a file")
        try:
            with self.fs.open_input_stream(path) as f:
                raw = f.read()
        except OSError as exc:
            raise ManifestCorrupt(uri, step, f"cannot be read: {exc}") from None
        return parse_manifest(raw, uri, self.run_id, step)

    def is_complete(self, step: int) -> bool:
        return self.manifest(step) is not None

    def list_steps(self) -> list[int]:
        """Every step with a data file or a manifest."""
        steps = set()
        for info in self._listing():
            for piece in info.path[len(self.run_dir):].split("/"):
                m = re.fullmatch(r"step=(\d+)(\.json)?", piece)
                if m:
                    steps.add(int(m.group(1)))
        return sorted(steps)

    def complete_steps(self) -> list[int]:
        return [s for s in self.list_steps() if self.is_complete(s)]

    def incomplete_steps(self) -> list[int]:
        """Steps with files but no manifest: what a crashed or running flow left. A step whose
        manifest is corrupt is not incomplete: this (and ``complete_steps``) raises
        ``ManifestCorrupt`` naming it."""
        return [s for s in self.list_steps() if not self.is_complete(s)]

    def last_complete_step(self) -> int | None:
        done = self.complete_steps()
        return done[-1] if done else None

    # -- reading -------------------------------------------------------------------------------
    def _part_paths(self, step: int, table: str | None = None) -> list[str]:
        tables = [table] if table else [i.base_name.removeprefix("table=")
                                        for i in self._dirs(self.run_dir, "table=")]
        out = []
        for t in tables:
            folder = f"{self.run_dir}/table={t}/step={step:06d}"
            if self.fs.get_file_info(folder).type != pafs.FileType.Directory:
                continue
            out += sorted(i.path for i in self.fs.get_file_info(pafs.FileSelector(folder))
                          if i.base_name.startswith("part-") and i.base_name.endswith(".parquet"))
        return out

    def _dirs(self, folder: str, prefix: str) -> list[pafs.FileInfo]:
        if self.fs.get_file_info(folder).type != pafs.FileType.Directory:
            return []
        return [i for i in self.fs.get_file_info(pafs.FileSelector(folder))
                if i.type == pafs.FileType.Directory and i.base_name.startswith(prefix)]

    def list_parts(self, table: str, step: int) -> list[str]:
        get_schema(table)
        return [p.rsplit("/", 1)[1][len("part-"):-len(".parquet")]
                for p in self._part_paths(check_step(step), table)]

    def _verified_bytes(self, path: str, entry: dict[str, Any] | None) -> bytes:
        if entry is not None and self.fs.get_file_info(path).type != pafs.FileType.File:
            raise CorruptArtifactError(f"{self._uri(path)}: listed in the step's manifest but "
                                       "missing")
        blob = self._read_bytes(path)
        if entry is not None and sha256_bytes(blob) != entry["sha256"]:
            raise CorruptArtifactError(f"{self._uri(path)}: content differs from the manifest "
                                       f"(sha256, {len(blob)} bytes vs {entry['bytes']})")
        return blob

    def _parse(self, blob: bytes, path: str, table: str) -> pa.Table:
        schema = get_schema(table)
        try:
            arrow = pq.read_table(pa.BufferReader(blob))
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptArtifactError(f"{self._uri(path)}: not a readable Parquet file "
                                       f"({exc})") from None
        fill = check_file_schema(schema, arrow.schema, self._uri(path))
        arrow = add_filled_columns(schema, arrow, fill)  # an older version's file: upgraded
        return arrow.select(schema.names).cast(schema.arrow)

    def read_table(self, table: str, step: int | None = None, part: str | None = None,
                   filters: Any = None, columns: list[str] | None = None,
                   include_incomplete: bool | None = None) -> pa.Table:
        """Rows of ``table`` as Arrow, with ``run_id`` and ``step`` columns added.

        ``step=None`` reads every complete step (``include_incomplete=True`` adds the others); a
        given step is read whether complete or not (tasks read their own step's inputs).
        Files of complete steps are checked against the manifest's sha256. ``filters`` takes
        the pyarrow/pandas DNF form (``[("stage", "=", 1)]``) or an Arrow expression.
        """
        schema = get_schema(table)
        if step is None:
            steps = self.list_steps() if include_incomplete else self.complete_steps()
        else:
            steps = [check_step(step)]
        pieces = []
        for s in steps:
            manifest = self.manifest(s)
            if manifest is not None:  # a complete step: exactly what the manifest lists
                entries = {f"{self.run_dir}/{e['path']}": e for e in manifest["files"]
                           if e["table"] == table}
            else:
                entries = {p: None for p in self._part_paths(s, table)}
            for path, entry in entries.items():
                if part is not None and not path.endswith(f"/part-{part}.parquet"):
                    continue
                arrow = self._parse(self._verified_bytes(path, entry), path, table)
                pieces.append(self._with_partition(arrow, s))
        out = pa.concat_tables(pieces) if pieces else schema.full.empty_table()
        if filters is not None:
            expr = filters if isinstance(filters, pc.Expression) else \
                pq.filters_to_expression(filters)
            try:
                out = out.filter(expr)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise SchemaError(f"{table}: bad filter {filters!r}: {exc}") from None
        return out.select(columns) if columns else out

    def read(self, table: str, step: int | None = None, part: str | None = None,
             filters: Any = None, columns: list[str] | None = None,
             include_incomplete: bool | None = None) -> pd.DataFrame:
        """``read_table`` as pandas. With pandas 3 strings come back as the ``str`` dtype and
        list columns as numpy arrays per row; the frame can be written back unchanged."""
        return self.read_table(table, step, part, filters, columns,
                               include_incomplete).to_pandas()

    def read_pointer(self, ptr: Pointer) -> pd.DataFrame:
        """The rows of exactly the file a task returned, checked against the pointer's hash."""
        if (ptr.root, ptr.run_id) != (self.root, self.run_id):
            return RunStore(ptr.root, ptr.run_id).read_pointer(ptr)
        path = f"{self.run_dir}/{ptr.relpath}"
        blob = self._verified_bytes(path, {"sha256": ptr.sha256, "bytes": ptr.nbytes})
        return self._with_partition(self._parse(blob, path, ptr.table), ptr.step).to_pandas()

    def _with_partition(self, arrow: pa.Table, step: int) -> pa.Table:
        """Add back the columns the hive path holds (typed as in ``schema.full``)."""
        n = arrow.num_rows
        arrow = arrow.add_column(0, "step", pa.array([step] * n, pa.int64()))
        arrow = arrow.add_column(0, "run_id", pa.array([self.run_id] * n, pa.string()))
        return arrow.replace_schema_metadata(None)


def list_runs(root: str) -> list[str]:
    """Run ids stored under ``root``."""
    fs, base = resolve_root(root)
    if fs.get_file_info(base).type != pafs.FileType.Directory:
        return []
    return sorted(i.base_name.removeprefix("run_id=")
                  for i in fs.get_file_info(pafs.FileSelector(base))
                  if i.type == pafs.FileType.Directory and i.base_name.startswith("run_id="))
