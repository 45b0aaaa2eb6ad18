"""Content hashes that key the caches of derived results (warm start, held-out before)."""

from __future__ import annotations

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


def base_digests(cfg: Any) -> dict[str, str]:
    """Each base model named by the config: its files' digest (a folder) or its name (an id)."""
    out = {}
    for name in dict.fromkeys((cfg.model.generator, cfg.model.discriminator_base or "")):
        base = Path(name)
        out[name] = (files_digest([p for p in base.rglob("*") if p.is_file()], base)
                     if name and base.is_dir() else name)
    return out
