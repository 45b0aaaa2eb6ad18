"""The same seed gives the same run on a quiet and on a busy machine.

Two real training runs (``python -m flows.train``, each its own process, so each has its own
``PYTHONHASHSEED`` and set/dict orders of strings may differ), the second with two busy loops on
the machine's cores, must sample the same texts, score the same rewards, leave the same
adapters and evaluate the same held-out figures. What keeps them equal: one torch thread
(``model.cpu_threads``), a seed per sample (``sampling.seed``), sandbox results aligned to their
jobs whatever order they finish in, and no wall-clock value in any decision (the sandbox's
time limit is the exception: a test that times out on a loaded machine only is not judged the
same; the tiny model's tests run in milliseconds against a 1 s limit).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from procs import kill_group, log_tail, start

from artifacts import RunStore

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
EPHEMERAL_SERVER_STARTUP_S = 300  # a temporary Prefect server on a loaded machine: see
RUN_DEADLINE_S = 600              # test_train_flow.py; a run here takes ~1 min idle


def _overrides(tiny_model_dir: Path, tmp: Path) -> list[str]:
    # Shrunk for wall-clock time: a shorter warm start (250 steps: with fewer, every sample
    # scored 0, every update was skipped, and the runs matched trivially), one training stage
    # of 1 + 1 + 1 steps, 4 problems x 4 samples, 2 held-out problems. The rest is tiny.yaml.
    return [f"model.generator={tiny_model_dir}", f"artifacts.root={tmp / 'runs'}",
            f"tracking.tracking_uri=sqlite:///{tmp / 'mlflow.db'}",
            "tracking.register_models=false", "evaluation.limit=2",
            "warm_start.steps=250", "warm_start.limit=60", "schedule.stages=[5]",
            "schedule.n_discriminator_steps=1", "schedule.n_generator_steps=1",
            "schedule.k_alternating=1", "schedule.problems_per_step=4"]


def _run(tiny_model_dir: Path, tmp: Path, name: str, busy: bool) -> RunStore:
    env = {**os.environ, "PREFECT_HOME": str(tmp / f"prefect-{name}"),
           "PYTHONPATH": str(REPO),
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": str(EPHEMERAL_SERVER_STARTUP_S)}
    env.pop("PYTHONHASHSEED", None)  # each run its own string hashes
    cmd = [sys.executable, "-m", "flows.train", "--config", str(REPO / "configs/tiny.yaml"),
           "--run-id", name]
    for item in _overrides(tiny_model_dir, tmp):
        cmd += ["--set", item]
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 2)] if busy else []
    log = tmp / f"{name}.log"
    # one warm-start cache (.cache/warmstart under tmp): fitted by the quiet run, reused by the
    # busy one, so the comparison is of what follows it (sampling, sandbox, rewards, PPO)
    proc = start(cmd, env, tmp, log)
    try:
        proc.wait(timeout=RUN_DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"run {name} still runs after {RUN_DEADLINE_S}s\n{log_tail(log)}")
    finally:
        kill_group(proc)
        for loop in loops:
            loop.kill()
            loop.wait()
    assert proc.returncode == 0, log_tail(log)
    return RunStore(str(tmp / "runs"), name)


def _record(store: RunStore) -> dict:
    keys = ["step", "role", "stage", "problem_id", "sample_idx"]
    chains = store.read("chains").sort_values(keys)
    rewards = store.read("rewards").sort_values(["step", "problem_id", "sample_idx"])
    updates = store.read("updates").sort_values(["step", "update_idx"])
    return {"texts": list(zip(chains[keys].itertuples(index=False), chains["output_text"],
                              chains["seed"], strict=True)),
            "rewards": rewards[["generator_reward", "discriminator_reward"]].values.tolist(),
            "adapters": list(updates["adapter_version_after"]),
            "loss": updates["loss"].tolist(),
            "heldout": store.read_json("heldout.json")}


@pytest.mark.timeout(2 * RUN_DEADLINE_S + 120)
def test_the_same_seed_gives_the_same_run_quiet_and_busy(tiny_model_dir, tmp_path):
    quiet = _record(_run(tiny_model_dir, tmp_path, "quiet", busy=False))
    # the held-out evaluation before training is cached too (.cache/heldout): removed, so the
    # busy run computes its own and the comparison covers it
    cached = tmp_path / ".cache" / "heldout"
    assert len(list(cached.glob("*.json"))) == 1
    shutil.rmtree(cached)
    busy = _record(_run(tiny_model_dir, tmp_path, "busy", busy=True))
    for key in quiet:
        assert quiet[key] == busy[key], key
    # the comparison covers PPO: some update changed its adapter
    updates = RunStore(str(tmp_path / "runs"), "quiet").read("updates")
    assert (updates["adapter_version_before"] != updates["adapter_version_after"]).any(), \
        "no update changed an adapter: the runs would match trivially"
