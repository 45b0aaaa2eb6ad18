"""The vLLM sampler's merged-weights folder: one per process, named by its pid, and the folders
of processes that are gone (a ``kill -9`` skips the sampler's ``close``) removed by the next
one, so they do not pile up in ``/dev/shm``. Needs no vLLM."""

from __future__ import annotations

import os
import subprocess
import sys

from models.engine.sampler import WEIGHTS_PREFIX, weights_dir


def test_a_new_folder_removes_those_of_gone_processes_only(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = tmp_path / f"{WEIGHTS_PREFIX}{gone.stdout.strip()}-abc123"
    (dead / "nested").mkdir(parents=True)
    (dead / "nested" / "w.safetensors").write_bytes(b"x" * 10)
    live = tmp_path / f"{WEIGHTS_PREFIX}{os.getppid()}-def456"   # our parent: alive
    live.mkdir()
    other = tmp_path / f"{WEIGHTS_PREFIX}notapid"                # not this scheme: left alone
    other.mkdir()

    mine = weights_dir(tmp_path)

    assert mine.name.startswith(f"{WEIGHTS_PREFIX}{os.getpid()}-") and mine.is_dir()
    assert not dead.exists() and live.is_dir() and other.is_dir()
    assert weights_dir(tmp_path) != mine and mine.is_dir()  # a second one keeps the first
