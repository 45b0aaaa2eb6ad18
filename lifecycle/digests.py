"""Content hashes that key the caches of derived results (warm start, held-out before)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any


def files_digest(paths: list[Path], root: Path | None = None) -> str:
    """One hash of files' names (relative to ``root``) and contents."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path.relative_to(root) if root else path).encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@functools.cache
def _folder_digest(folder: Path, listing: tuple[tuple[str, int, int], ...]) -> str:
    return files_digest([folder / name for name, _, _ in listing], folder)


def folder_digest(folder: Path) -> str:
    """:func:`files_digest` of every file under ``folder``, computed once per process while
    no file's size or modification time changes: both caches' keys (warm start, held-out
    before) hash the base model, which takes seconds for a real model's weights."""
    listing = []
    for path in folder.rglob("*"):
        if path.is_file():
            stat = path.stat()
            listing.append((str(path.relative_to(folder)), stat.st_size, stat.st_mtime_ns))
    return _folder_digest(folder, tuple(sorted(listing)))


def base_digests(cfg: Any) -> dict[str, str]:
    """Each base model named by the config: its files' digest (a folder) or its name (an id)."""
    out = {}
    for name in dict.fromkeys((cfg.model.generator, cfg.model.discriminator_base or "")):
        base = Path(name)
        out[name] = folder_digest(base) if name and base.is_dir() else name
    return out
