"""Process-owned temporary folders (``sandbox.owned``): the sandbox's judge folder is left
behind by a process that ends without ``atexit`` (an ``os._exit``, a kill), and the
next process to make one removes it; a live process's folder is never touched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sandbox.jail import JUDGE_PREFIX
from sandbox.owned import owned_tempdir, remove_orphans

REPO = Path(__file__).resolve().parent.parent

MAKE_JUDGE_AND_DIE = (
    "import os; from sandbox.jail import judge_files; "
    "_, tests = judge_files(); print(os.path.dirname(tests), flush=True); os._exit(0)")


def judge_folder(tmp: Path) -> Path:
    out = subprocess.run([sys.executable, "-c", MAKE_JUDGE_AND_DIE], cwd=REPO, check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)})
    return Path(out.stdout.strip())


def test_a_judge_folder_left_by_an_os_exit_goes_with_the_next_process(tmp_path):
    first = judge_folder(tmp_path)
    assert first.name.startswith(JUDGE_PREFIX) and (first / "tests").is_dir()  # left behind
    second = judge_folder(tmp_path)
    assert not first.exists() and second.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == [second.name]


def test_only_gone_processes_folders_of_the_scheme_are_removed(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead = tmp_path / f"x-{gone}-abc"
    (dead / "deep").mkdir(parents=True)
    (dead / "deep" / "f").write_text("data")
    live = tmp_path / f"x-{os.getppid()}-def"  # our parent: alive
    other = tmp_path / "x-notapid-ghi"          # not a pid: not this scheme
    other_prefix = tmp_path / f"y-{gone}-jkl"   # another prefix
    for folder in (live, other, other_prefix):
        folder.mkdir()

    assert remove_orphans("x-", tmp_path) == [dead]
    mine = owned_tempdir("x-", tmp_path)
    assert mine.name.startswith(f"x-{os.getpid()}-") and mine.is_dir()
    assert not dead.exists() and live.is_dir() and other.is_dir() and other_prefix.is_dir()
    assert owned_tempdir("x-", tmp_path) != mine and mine.is_dir()  # ours stay
