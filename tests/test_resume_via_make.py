"""A stopped run is continued through make as through Python, and never silently."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from artifacts.store import RunStore
from configs import config_to_dict, load_config
from flows.train import kept, name_stopped_runs
from lifecycle.context import CONFIG_FILE
from lifecycle.resume import stopped_runs
from pipeline.schedule import plan

REPO = Path(__file__).resolve().parent.parent


def run_make(*args: str) -> str:
    """``make`` in the repository as a user's shell runs it: not as a sub-make of the ``make
    test`` that runs this suite, whose MAKELEVEL and MAKEFLAGS would make it print "Entering
    directory" lines and inherit the outer make's variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(["make", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          check=True).stdout


def make_dry(*args: str) -> str:
    """What ``make run`` would run (``-n``), with the set-up already done (``-o``)."""
    return run_make("-n", "-o", "setup", "run", *args)


def test_make_run_passes_run_id_to_the_training_command():
    assert make_dry("RUN_ID=tiny-20261207-101500").strip().endswith(
        "-m flows.train --config configs/tiny.yaml --run-id 'tiny-20261207-101500'")
    assert "--run-id" not in make_dry()


def test_make_run_tells_the_run_how_to_be_continued_through_make():
    shown = run_make("-s", "-o", "setup", "run", "PY=sh -c 'echo $$RESUME_COMMAND' --",
                     "CONFIG=configs/minimal.yaml")
    assert shown.strip() == "make run CONFIG=configs/minimal.yaml"


def stopped_run(root: Path, cfg, run_id: str, steps: int) -> RunStore:
    """A run of ``cfg`` whose first ``steps`` steps are complete."""
    store = RunStore(str(root), run_id)
    store.write_json(CONFIG_FILE, config_to_dict(cfg))
    for step in range(1, steps + 1):
        store.complete_step(step)  # the manifest alone marks a step complete
    return store


@pytest.fixture
def cfg(tmp_path):
    return load_config("configs/tiny.yaml", [f"artifacts.root={tmp_path / 'runs'}"])


def test_a_new_run_names_the_stopped_run_of_its_config_and_how_to_continue_it(
        tmp_path, cfg, capsys, monkeypatch):
    total = len(plan(cfg.schedule))
    stopped_run(tmp_path / "runs", cfg, "tiny-1", 3)
    stopped_run(tmp_path / "runs", cfg, "tiny-2", total)  # finished: not named
    other = load_config("configs/tiny.yaml", [f"artifacts.root={tmp_path / 'runs'}",
                                              "ppo.learning_rate=1e-3"])
    stopped_run(tmp_path / "runs", other, "tiny-3", 1)  # another config: not this one's
    assert stopped_runs(cfg) == [("tiny-1", 3, total)]
    monkeypatch.setenv("RESUME_COMMAND", "make run")
    name_stopped_runs(cfg)
    assert capsys.readouterr().out.strip() == (
        f"note: starting a new run; run tiny-1 stopped after step 3 of {total}, and "
        "`make run RUN_ID=tiny-1` continues it")


def test_a_run_with_no_stopped_run_beside_it_says_nothing(tmp_path, cfg, capsys):
    name_stopped_runs(cfg)
    assert capsys.readouterr().out == ""


def test_the_stop_line_names_the_command_that_continues_the_run(tmp_path, cfg, monkeypatch):
    stopped_run(tmp_path / "runs", cfg, "tiny-1", 2)
    monkeypatch.delenv("RESUME_COMMAND", raising=False)
    assert kept(str(tmp_path / "runs"), "tiny-1").endswith(
        "the same command with --run-id tiny-1 continues after step 2")
    monkeypatch.setenv("RESUME_COMMAND", "make smollm2")
    assert kept(str(tmp_path / "runs"), "tiny-1").endswith(
        "`make smollm2 RUN_ID=tiny-1` continues after step 2")
