"""What a run checks before it starts and says when it ends: a config whose updates can never
carry signal is refused at start (by the CLI before Prefect starts, and by the flow); the run's
summary says how many updates were skipped and why."""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from procs import descendants

from configs import ConfigError, SamplingConfig, TrainConfig, load_config
from configs.schema import check_learnable, learnability

REPO = Path(__file__).resolve().parent.parent
MINIMAL = str(REPO / "configs/minimal.yaml")


# -- configs that cannot learn ------------------------------------------------------------------

def errors_of(*sets: str) -> list[str]:
    return learnability(load_config(MINIMAL, list(sets)))[0]


def warnings_of(*sets: str) -> list[str]:
    return learnability(load_config(MINIMAL, list(sets)))[1]


@pytest.mark.parametrize("path", ["configs/tiny.yaml", "configs/minimal.yaml",
                                  "configs/qwen2.5-coder-1.5b.yaml"])
def test_the_shipped_configs_can_learn(path):
    assert learnability(load_config(REPO / path)) == ([], [])


def test_one_sample_per_problem_with_group_advantages_is_refused_naming_both():
    (error,) = errors_of("sampling.samples_per_problem=1")
    assert error.startswith("sampling.samples_per_problem=1 with ppo.advantage='group':")
    assert "every update would be skipped" in error
    with pytest.raises(ConfigError, match=re.escape(
            "configs/minimal.yaml: sampling.samples_per_problem=1 with ppo.advantage='group'")):
        check_learnable(load_config(MINIMAL, ["sampling.samples_per_problem=1"]), MINIMAL)


def test_one_sample_per_problem_is_fine_with_gae():  # a value head is the baseline
    assert errors_of("sampling.samples_per_problem=1", "ppo.advantage=gae") == []


def test_constant_rewards_of_a_trained_role_are_refused():
    (error,) = errors_of("rewards.generator={pass_rate: 0}")
    assert error.startswith("rewards.generator.pass_rate=0.0: every generator reward")
    (error,) = errors_of("rewards.discriminator={mutation_kill: 1}",
                         "rewards.mutants_per_problem=0")
    assert "rewards.discriminator.mutation_kill with rewards.mutants_per_problem=0" in error
    # a role the schedule never trains may have any rewards
    assert errors_of("rewards.generator={pass_rate: 0}", "schedule.n_generator_steps=0",
                     "schedule.k_alternating=0") == []
    assert errors_of("rewards.discriminator={mutation_kill: 1}", "rewards.mutants_per_problem=0",
                     "schedule.n_discriminator_steps=0", "schedule.k_alternating=1") == []


def test_a_learning_rate_of_zero_is_a_control_and_only_warns():
    assert errors_of("ppo.learning_rate=0") == []
    (warning,) = warnings_of("ppo.learning_rate=0")
    assert warning.startswith("ppo.learning_rate=0.0: a control run")
    assert check_learnable(load_config(MINIMAL, ["ppo.learning_rate=0"])) == [warning]


def test_each_role_can_have_its_own_learning_rate_and_its_own_control():
    cfg = load_config(MINIMAL, ["ppo.learning_rate=1e-4",
                                "ppo.discriminator_learning_rate=3e-4"])
    assert (cfg.ppo.learning_rate_for("generator"),
            cfg.ppo.learning_rate_for("discriminator")) == (1e-4, 3e-4)
    (warning,) = warnings_of("ppo.learning_rate=1e-4", "ppo.discriminator_learning_rate=0")
    assert warning.startswith("ppo.discriminator_learning_rate=0.0: a control run "
                              "(discriminator)")
    assert warnings_of("ppo.learning_rate=0", "ppo.discriminator_learning_rate=0") == [
        "ppo.learning_rate=0.0: a control run (generator); updates are computed and recorded "
        "but the adapters never change",
        "ppo.discriminator_learning_rate=0.0: a control run (discriminator); updates are "
        "computed and recorded but the adapters never change"]


def test_a_schedule_of_no_steps_is_a_dry_run_and_only_warns():
    sets = ("schedule.n_discriminator_steps=0", "schedule.n_generator_steps=0",
            "schedule.k_alternating=0")
    assert errors_of(*sets) == []
    (warning,) = warnings_of(*sets)
    assert "schedule.k_alternating=0: the schedule plans no step" in warning


def test_inference_configs_are_not_checked():  # one sample per problem is right there
    assert TrainConfig(sampling=SamplingConfig(samples_per_problem=1)).sampling


def test_the_cli_refuses_before_prefect_starts_with_exit_2(capsys, monkeypatch):
    from flows.train import main

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    before = descendants(os.getpid())
    assert main(["--config", MINIMAL, "--set", "sampling.samples_per_problem=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {MINIMAL}: sampling.samples_per_problem=1 with "
                          "ppo.advantage='group'"), err
    assert "Traceback" not in err
    assert "PREFECT_API_URL" not in os.environ                       # no server was started
    assert descendants(os.getpid()).keys() <= before.keys()


def test_a_missing_model_folder_is_refused_before_prefect_starts(capsys, monkeypatch, tmp_path):
    from flows.train import main

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    gone = tmp_path / "fitted"
    assert main(["--config", MINIMAL, "--set", f"model.generator={gone}",
                 "--set", "model.tiny=false"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: model.generator={gone}: the model folder does not exist"), err
    assert not gone.exists() and "PREFECT_API_URL" not in os.environ


def test_the_flow_refuses_too_when_called_without_the_cli():  # a deployment's run
    from flows.train import train

    with pytest.raises(ConfigError, match="sampling.samples_per_problem=1"):
        train.fn(config=MINIMAL, overrides=["sampling.samples_per_problem=1"])


# -- skipped updates in the summary -------------------------------------------------------------

def _update(step, role, n_sequences, n_tokens):
    return {"step": step, "role": role, "n_sequences": n_sequences, "n_tokens": n_tokens}


def _reward(step, problem, masked=False, gen_skipped=False, disc_skipped=False):
    return {"step": step, "problem_id": problem, "masked": masked,
            "generator_group_skipped": gen_skipped, "discriminator_group_skipped": disc_skipped}


def test_skipped_updates_are_counted_by_reason():
    from pipeline.metrics import (
        SKIP_MASKED,
        SKIP_NO_SPREAD,
        SKIP_NO_TOKENS,
        SKIP_SINGLETONS,
        skipped_updates,
    )

    updates = [_update(1, "generator", 2, 0), _update(2, "discriminator", 4, 0),
               _update(3, "generator", 0, 0), _update(4, "generator", 4, 0),
               _update(5, "generator", 4, 37)]
    rewards = ([_reward(1, "a", gen_skipped=True), _reward(1, "b", gen_skipped=True)]
               + [_reward(2, p, disc_skipped=True) for p in "aabb"]
               + [_reward(3, p, masked=True) for p in "aabb"]
               + [_reward(4, "a"), _reward(4, "a"), _reward(4, "b"), _reward(4, "b")]
               + [_reward(5, p) for p in "aabb"])
    assert skipped_updates(updates, rewards) == {
        SKIP_SINGLETONS: 1, SKIP_NO_SPREAD: 1, SKIP_MASKED: 1, SKIP_NO_TOKENS: 1}
    # a masked sample leaves its group: one live sample per problem is a group of one
    rewards_4 = [_reward(1, "a"), _reward(1, "a", masked=True), _reward(1, "b"),
                 _reward(1, "b", masked=True)]
    assert skipped_updates([_update(1, "generator", 2, 0)], rewards_4) == {SKIP_SINGLETONS: 1}
    # GAE skips no group: an update without tokens had none to train on
    assert skipped_updates([_update(1, "generator", 2, 0)], rewards_4,
                           group_relative=False) == {SKIP_NO_TOKENS: 1}


def test_finish_run_says_how_many_updates_were_skipped_and_why(capsys, monkeypatch):
    import tasks.reporting as runtime
    from pipeline.metrics import SKIP_NO_SPREAD

    class Store:
        run_dir = "runs/run_id=x"

        def complete_steps(self):
            return []  # no stage report without steps

        def read(self, table):
            if table == "updates":
                return pd.DataFrame([_update(1, "generator", 4, 0),
                                     _update(2, "discriminator", 4, 12)])
            return pd.DataFrame([_reward(s, p, gen_skipped=True, disc_skipped=False)
                                 for s in (1, 2) for p in "aabb"])

    monkeypatch.setattr(runtime, "stage_table", lambda rewards: "(table)")
    ctx = SimpleNamespace(run_id="x", store=Store(), cfg=TrainConfig(), mlflow_run_id="m",
                          timings=[],
                          tracker=SimpleNamespace(end_run=lambda run: None, experiment_id="0",
                                                  tracking_uri="sqlite:///m.db"))
    summary = runtime.finish_run(ctx)
    assert summary["updates"] == 2 and summary["skipped_updates"] == {SKIP_NO_SPREAD: 1}
    out = capsys.readouterr().out
    assert (f"  updates     : 1 of 2 skipped, no optimizer step (1: {SKIP_NO_SPREAD})\n"
            in out), out

    Store.read = lambda self, table: (pd.DataFrame([_update(1, "generator", 4, 0)])
                                      if table == "updates" else
                                      pd.DataFrame([_reward(1, "a", gen_skipped=True)]))
    runtime.finish_run(ctx)
    out = capsys.readouterr().out
    assert "1 of 1 skipped" in out and "no update carried signal" in out, out


# -- the console -------------------------------------------------------------------------------

def test_the_console_drops_task_state_lines_and_api_only_records_but_keeps_the_rest():
    import logging

    from tasks.progress import API_ONLY, _ConsoleFilter

    def record(name, msg, level=logging.INFO, **extra):
        rec = logging.LogRecord(name, level, __file__, 1, msg, None, None)
        rec.__dict__.update(extra)
        return rec

    keep = _ConsoleFilter().filter
    assert not keep(record("prefect.task_runs", "Finished in state Completed()"))
    assert not keep(record("prefect.flow_runs", "step 1/4 ...", **API_ONLY))
    assert keep(record("prefect.task_runs", "warm start generator: step 25/100, loss 1.2"))
    assert keep(record("prefect.task_runs", "Finished in state Failed('boom')", logging.ERROR))
    assert keep(record("prefect.flow_runs", "Finished in state Completed()"))
