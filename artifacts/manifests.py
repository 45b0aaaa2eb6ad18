"""Step manifests: what makes a step complete, and how a damaged one is told apart.

A manifest lists every part file of a step with its table, rows, sha256 and size; it is
written last, so a step with one had been completed. This module names the files of the
layout (``part_relpath``, ``manifest_relpath``), validates a parsed manifest and each of its
file entries, and defines the errors a reader raises: ``ManifestCorrupt`` for a manifest that
exists but does not read, parse or validate (never "incomplete").
"""

from __future__ import annotations

import json
import operator
import re
from typing import Any

from artifacts.convert import ArtifactError

MANIFEST_FORMAT = "artifacts.manifest/1"
PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")  # no "/" or "=" (hive keys)


class CorruptArtifactError(ArtifactError):
    """A stored file is unreadable, truncated, or differs from its manifest (names the file)."""


class StepCompleteError(ArtifactError):
    """The step already has a manifest; its files are frozen."""


class ManifestCorrupt(CorruptArtifactError):
    """A step's manifest exists but cannot be read, is not JSON, or does not validate (format,
    keys, types, run id, step, file entries). The manifest is written last, so the step had been
    completed: it is never to be read as incomplete (and redone). ``uri`` names the file,
    ``reason`` says what is wrong."""

    def __init__(self, uri: str, step: int, reason: str) -> None:
        super().__init__(f"{uri}: corrupt manifest of step {step} ({reason})")
        self.uri, self.step, self.reason = uri, step, reason

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across Prefect task boundaries
        return (type(self), (self.uri, self.step, self.reason))


def part_relpath(table: str, step: int, part: str) -> str:
    """A part file's path below the run folder, as manifests list it.

    >>> part_relpath("chains", 3, "generator-1")
    'table=chains/step=000003/part-generator-1.parquet'
    """
    return f"table={table}/step={step:06d}/part-{part}.parquet"


def manifest_relpath(step: int) -> str:
    return f"_manifests/step={step:06d}.json"


_MANIFEST_KEYS = {"format": str, "run_id": str, "step": int, "files": list}
_ENTRY_KEYS = {"path": str, "table": str, "rows": int, "sha256": str, "bytes": int}


def entry_problem(entry: Any, step: int) -> str | None:
    """What is wrong with one file entry of a step's manifest, or None."""
    if not isinstance(entry, dict):
        return f"a file entry is {type(entry).__name__}, not an object"
    for key, kind in _ENTRY_KEYS.items():
        value = entry.get(key)
        if key not in entry:
            return f"a file entry has no {key!r}"
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"file entry {entry.get('path')!r}: {key!r} is {type(value).__name__}"
    if not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
        return f"file entry {entry['path']!r}: 'sha256' is not 64 hex digits"
    m = re.fullmatch(r"table=([^/]+)/step=(\d{6})/part-([^/]+)\.parquet", entry["path"])
    if not m or m.group(1) != entry["table"] or int(m.group(2)) != step \
            or not PART_RE.match(m.group(3)):
        return (f"file entry {entry['path']!r}: not a part of table {entry['table']!r} "
                f"in step {step}")
    if entry["rows"] < 0 or entry["bytes"] < 0:
        return f"file entry {entry['path']!r}: negative rows or bytes"
    return None


def manifest_problem(data: Any, run_id: str, step: int) -> str | None:
    """What is wrong with a parsed manifest of ``run_id``'s ``step``, or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    missing = [k for k in _MANIFEST_KEYS if k not in data]
    if missing:
        return f"missing key(s) {', '.join(map(repr, missing))}"
    if data["format"] != MANIFEST_FORMAT:
        return f"format {data['format']!r}, expected {MANIFEST_FORMAT!r}"
    for key, kind in _MANIFEST_KEYS.items():
        if not isinstance(data[key], kind) or isinstance(data[key], bool):
            return f"{key!r} is {type(data[key]).__name__}, expected {kind.__name__}"
    if data["run_id"] != run_id:
        return f"it is for run {data['run_id']!r}, not {run_id!r}"
    if data["step"] != step:
        return f"it is for step {data['step']}, not {step}"
    paths = set()
    for entry in data["files"]:
        problem = entry_problem(entry, step)
        if problem:
            return problem
        if entry["path"] in paths:
            return f"file entry {entry['path']!r} listed twice"
        paths.add(entry["path"])
    return None


def check_step(step: int) -> int:
    try:
        value = operator.index(step)  # ints and numpy integers, not floats or bools
    except TypeError:
        value = -1
    if isinstance(step, bool) or not 0 <= value < 1_000_000:
        raise ValueError(f"step={step!r}: expected an integer in [0, 999999]")
    return value


def parse_manifest(raw: bytes, uri: str, run_id: str, step: int) -> dict[str, Any]:
    """A manifest file's bytes, parsed and validated; ``ManifestCorrupt`` naming ``uri``."""
    try:
        data = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ManifestCorrupt(uri, step, f"not valid JSON ({len(raw)} bytes): {exc}") from None
    problem = manifest_problem(data, run_id, step)
    if problem:
        raise ManifestCorrupt(uri, step, problem)
    return data


def salvage_entries(text: str, step: int) -> list[dict[str, Any]]:
    """The file entries still whole in a (corrupt) manifest's text: every ``{...}`` object that
    is a valid entry for ``step`` (a truncated manifest keeps those before the cut)."""
    out = []
    for m in re.finditer(r"\{[^{}]*\}", text):
        try:
            entry = json.loads(m.group(0))
        except ValueError:
            continue
        if entry_problem(entry, step) is None:
            out.append(entry)
    return out
