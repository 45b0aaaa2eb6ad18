"""A writer killed (SIGKILL) mid-write leaves no readable partial file and the previous state.

Each case runs the real ``RunStore.write``/``complete_step`` in a subprocess that kills itself
at a chosen point: half-way through writing the temp file, or just before the rename.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_artifacts_store import assert_rows_equal, sample_rows

from artifacts import RunStore

REPO = Path(__file__).resolve().parent.parent

KILLER = textwrap.dedent("""
    import os, signal, sys
    sys.path[:0] = [{repo!r}, {tests!r}]
    import artifacts.fsutil as st
    from artifacts import RunStore
    from test_artifacts_store import sample_rows

    mode, op = sys.argv[1], sys.argv[2]
    st._CHUNK = 4096  # several write() calls per file, so "mid-write" is really mid-file
    die = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
    if mode == "mid-write":
        real_open = open

        class HalfThenDie:
            def __init__(self, f): self.f = f
            def __enter__(self): return self
            def __exit__(self, *exc): self.f.close()
            def write(self, data):
                self.f.write(data[: len(data) // 2]); self.f.flush(); die()
            def __getattr__(self, name): return getattr(self.f, name)

        st.open = lambda *a, **k: HalfThenDie(real_open(*a, **k))
    else:  # before-rename: the temp file is complete and fsynced, the rename never happens
        st.os.replace = die
    store = RunStore({root!r}, "run-1")
    if op == "write":
        store.write("chains", 1, sys.argv[3], sample_rows("chains", 400, seed=9))
    else:
        store.complete_step(1)
    print("not killed")
""")


def run_killed(root: Path, mode: str, op: str, part: str = "generator") -> None:
    code = KILLER.format(repo=str(REPO), tests=str(REPO / "tests"), root=str(root))
    proc = subprocess.run([sys.executable, "-c", code, mode, op, part], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr


@pytest.fixture()
def prepared(tmp_path):
    """Step 0 complete; step 1 holds version A of the generator part (incomplete)."""
    root = tmp_path / "runs"
    store = RunStore(str(root), "run-1")
    store.complete_step(0, [store.write("chains", 0, "generator", sample_rows("chains", 3))])
    rows_a = sample_rows("chains", 5, seed=1)
    ptr_a = store.write("chains", 1, "generator", rows_a)
    return store, root, rows_a, ptr_a


@pytest.mark.parametrize("mode", ["mid-write", "before-rename"])
def test_killed_overwrite_keeps_previous_file(prepared, mode):
    store, root, rows_a, ptr_a = prepared
    final = root / "run_id=run-1" / ptr_a.relpath
    before = final.read_bytes()
    run_killed(root, mode, "write")
    assert final.read_bytes() == before  # the previous version, untouched
    assert_rows_equal("chains", rows_a, store.read("chains", step=1))
    (tmp,) = store.stray_temp_files()  # the dead writer's temp file, hidden
    if mode == "mid-write":  # really partial: not a Parquet file at all
        assert 0 < Path(tmp).stat().st_size < 4096
        with pytest.raises(pa.ArrowInvalid):
            pq.read_table(tmp)
    # Readers that know nothing of this module skip it too (dot-prefixed name).
    assert len(pd.read_parquet(root / "run_id=run-1" / "table=chains")) == 3 + 5
    store.verify_step(0)
    assert store.incomplete_steps() == [1]
    assert len(store.remove_stray_temp_files()) == 1 and store.stray_temp_files() == []


def test_killed_first_write_leaves_no_part(prepared):
    store, root, _, _ = prepared
    run_killed(root, "mid-write", "write", part="discriminator")
    assert store.list_parts("chains", 1) == ["generator"]
    assert not list((root / "run_id=run-1" / "table=chains" / "step=000001").glob("part-d*"))


def test_killed_manifest_write_leaves_step_incomplete(prepared):
    store, root, rows_a, _ = prepared
    run_killed(root, "before-rename", "complete")
    assert not store.is_complete(1) and store.incomplete_steps() == [1]
    assert store.last_complete_step() == 0
    assert_rows_equal("chains", rows_a, store.read("chains", step=1))
    store.complete_step(1)  # the re-run finishes the job
    assert store.last_complete_step() == 1
