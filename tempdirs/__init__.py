"""Temporary folders owned by a process: named by its pid, removed by the next one when it is gone.

The judge's folders, the vLLM engine's weight pushes and inference downloads all use them, so
they live here, at the bottom of the import graph (this package imports nothing of the
project), where no layer has to import another for them.

A process removes its own folders when it exits normally (``atexit``, a ``close``), but a
``kill -9``, an ``os._exit`` (how forked children and a run stopped past its grace end) or a
crash skips that, and such folders would pile up in ``/tmp`` or ``/dev/shm``. So each folder is
named ``<prefix><pid>-<random>`` and making one first removes those of the same prefix whose
process is gone. Only this naming scheme is touched, and never a live process's folder (a reused pid
keeps a dead process's folder until that pid is gone too: a leak delayed, never a folder
removed under its owner).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def owned_tempdir(prefix: str, root: str | Path | None = None) -> Path:
    """A new folder ``<root>/<prefix><pid>-*`` for this process, after removing the folders of
    gone processes (:func:`remove_orphans`). ``root`` defaults to the temporary folder."""
    root = Path(tempfile.gettempdir() if root is None else root)
    remove_orphans(prefix, root)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))


def remove_orphans(prefix: str, root: str | Path | None = None) -> list[Path]:
    """Remove the folders ``<root>/<prefix><pid>-*`` whose process is gone; return them."""
    removed = []
    for old in Path(tempfile.gettempdir() if root is None else root).glob(f"{prefix}*-*"):
        pid = old.name.removeprefix(prefix).split("-", 1)[0]
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
            removed.append(old)
    return removed


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's counts: not ours to judge)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
