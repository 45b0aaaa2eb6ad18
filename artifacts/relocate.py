"""Point a copied or moved MLflow SQLite store at its artifacts' new folder.

MLflow's SQL store records artifact locations as absolute ``file://`` URIs (experiments, runs,
logged models, model versions). Copy ``mlflow.db`` and ``mlartifacts/`` to another folder or
machine and every registered version still points at the old folder. This rewrites exactly
those location columns, and only values under the old artifact root, to the new root:

    python -m artifacts.relocate --db /new/place/mlflow.db --artifacts /new/place/mlartifacts

The old root is read from the store (the experiment location that most recorded locations lie
under) unless ``--from`` names it. Nothing else in the store changes; the rewrite is one
transaction, and it refuses when the new folder does not exist or does not hold what the store
names. Parameters, tags and metrics are left alone.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlparse

# Every column where MLflow's SQL store keeps an artifact location.
LOCATION_COLUMNS = (("experiments", "artifact_location"), ("runs", "artifact_uri"),
                    ("logged_models", "artifact_location"), ("model_versions", "source"),
                    ("model_versions", "storage_location"))


def _path(value: str) -> str | None:
    """The local path of a ``file:`` URI or a bare absolute path; None for anything else."""
    if value.startswith("file:"):
        return unquote(urlparse(value).path)
    return value if value.startswith("/") else None


def _locations(db: sqlite3.Connection) -> list[tuple[str, str, str]]:
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    out = []
    for table, column in LOCATION_COLUMNS:
        if table in tables:
            out += [(table, column, v) for (v,) in db.execute(
                f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL")]
    return out


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def infer_old_root(locations: list[tuple[str, str, str]]) -> str:
    """The experiment location most other recorded locations lie under."""
    roots = {p for t, _, v in locations if t == "experiments" and (p := _path(v))}
    counts = Counter({r: sum(1 for _, _, v in locations if (p := _path(v)) and _under(p, r))
                      for r in roots})
    if not counts:
        raise ValueError("the store records no local artifact location to relocate")
    return counts.most_common(1)[0][0]


def relocate_store(db_path: str | Path, artifacts: str | Path,
                   old_root: str | None = None) -> dict[str, int]:
    """Rewrite locations under ``old_root`` (default: inferred) to ``artifacts``; returns the
    number of values rewritten per ``table.column``. Raises ``ValueError`` when the store or
    the new folder is wrong, before anything is written."""
    db_path, new_root = Path(db_path), Path(artifacts).resolve()
    if not db_path.is_file():
        raise ValueError(f"{db_path}: no such MLflow SQLite store")
    if not new_root.is_dir():
        raise ValueError(f"{new_root}: no such artifacts folder")
    with sqlite3.connect(db_path) as db:  # one transaction: committed on success only
        locations = _locations(db)
        old = (_path(old_root) or old_root) if old_root else infer_old_root(locations)
        old = old.rstrip("/")
        moved = [(t, c, v, new_root / Path(p).relative_to(old))
                 for t, c, v in locations if (p := _path(v)) and _under(p, old)]
        if not moved:
            raise ValueError(f"no artifact location in {db_path} lies under {old}")
        missing = sorted({str(n) for t, _, _, n in moved if t == "model_versions"
                          and not n.exists()})
        if missing:
            raise ValueError(f"{new_root} does not hold what the store names, e.g. "
                             f"{missing[0]} ({len(missing)} missing); is it the artifacts "
                             f"folder copied with {db_path.name}?")
        counts: Counter[str] = Counter()
        for table, column, value, new in moved:
            new_value = new.as_uri() if value.startswith("file:") else str(new)
            db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?",
                       (new_value, value))
            counts[f"{table}.{column}"] += 1
    return dict(counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m artifacts.relocate", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="the copied mlflow.db")
    parser.add_argument("--artifacts", required=True, help="the copied artifacts folder")
    parser.add_argument("--from", dest="old_root", default=None,
                        help="the artifact root the store was written with (default: inferred)")
    args = parser.parse_args(argv)
    try:
        counts = relocate_store(args.db, args.artifacts, args.old_root)
    except ValueError as exc:
        print(f"relocate: {exc}", file=sys.stderr)
        return 2
    total = sum(counts.values())
    print(f"rewrote {total} artifact locations to {Path(args.artifacts).resolve()}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


if __name__ == "__main__":
    from configs.environment import apply

    apply()  # the Makefile's environment, as every entry point sets it
    sys.exit(main())
