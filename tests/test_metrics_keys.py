"""The step's metric keys as a user reads them in MLflow: PPO statistics per role, rates named
as rates, response lengths per role and stage, reward spread."""

from __future__ import annotations

import pytest

from artifacts.schemas import UPDATES
from pipeline.metrics import step_metrics


def _reward(g, d):
    return {"generator_reward": g, "discriminator_reward": d, "n_passed_valid": 1, "n_valid": 2,
            "n_baseline_passed": 1, "n_baseline": 1, "validity": 1.0, "bug_catch": 0.5,
            "n_mutants_killed": 1, "n_mutants": 4, "generator_group_skipped": False,
            "discriminator_group_skipped": True, "masked": False}


def test_ppo_statistics_are_keyed_by_the_role_updated_and_rates_say_so():
    update = {"role": "discriminator", "loss": 0.5, "policy_loss": 0.4, "value_loss": None,
              "approx_kl": 0.01, "clip_fraction": 0.2, "entropy": 1.5, "grad_norm": 2.0,
              "learning_rate": 1e-4, "n_tokens": 30, "duration_s": 1.25, "kl_ref": 0.03,
              "ratio": 1.01, "dead_sample_fraction": None, "optimizer_steps": 2}
    chains = [{"role": "generator", "stage": 5, "output_tokens": n} for n in (10, 20)] + \
        [{"role": "discriminator", "stage": 1, "output_tokens": 7}]
    m = step_metrics([_reward(0.2, 1.0), _reward(0.6, 0.0)], [], [update], [], chains)
    assert m["ppo/discriminator/clip_fraction"] == 0.2
    assert m["ppo/discriminator/learning_rate"] == 1e-4
    assert m["ppo/discriminator/n_tokens"] == 30.0
    assert "ppo/discriminator/value_loss" not in m           # null: not a GAE update
    assert m["ppo/discriminator/kl_ref"] == 0.03 and m["ppo/discriminator/ratio"] == 1.01
    assert m["ppo/discriminator/optimizer_steps"] == 2.0
    assert "ppo/discriminator/dead_sample_fraction" not in m  # null: not measured
    assert m["ppo/discriminator/seconds"] == 1.25
    assert "ppo/loss" not in m and "ppo/approx_kl" not in m
    assert not any(k.startswith("ppo/generator/") for k in m)
    assert not any(k.count("/") == 1 and k.startswith("ppo/") for k in m)  # never mixed
    assert m["generator/reward"] == pytest.approx(0.4)
    assert m["generator/reward_std"] == pytest.approx(0.2)  # population std of 0.2 and 0.6
    assert m["discriminator/mutant_kill_rate"] == 0.25
    assert m["discriminator/valid_tests_per_sample"] == 2.0
    assert m["rewards/discriminator_groups_skipped_fraction"] == 1.0
    assert m["rewards/generator_groups_skipped_fraction"] == 0.0
    assert m["discriminator/reward"] == pytest.approx(0.5)
    assert m["discriminator/reward_std"] == pytest.approx(0.5)
    for old in ("discriminator/mutants_killed", "discriminator/valid_tests",
                "rewards/generator_groups_skipped", "rewards/discriminator_groups_skipped"):
        assert old not in m
    assert m["length/generator/stage5_tokens"] == 15.0
    assert m["length/discriminator/stage1_tokens"] == 7.0


def test_each_role_has_its_own_update_series():
    rows = [{"role": role, "loss": loss, "policy_loss": loss, "value_loss": None,
             "approx_kl": 0.0, "clip_fraction": 0.0, "entropy": 1.0, "grad_norm": 1.0,
             "learning_rate": 3e-4, "n_tokens": 5, "duration_s": 0.1}   # a v1 row: no extras
            for role, loss in (("generator", 1.0), ("discriminator", 2.0))]
    m = step_metrics([], [], rows, [])
    assert (m["ppo/generator/loss"], m["ppo/discriminator/loss"]) == (1.0, 2.0)
    assert not any(k.endswith(("/kl_ref", "/ratio")) for k in m)


def test_updates_schema_v3_reads_v1_and_v2_files_with_null_extras():
    assert UPDATES.version == 3
    v3 = {"logprob_mismatch": None, "logprob_mismatch_share": None}
    assert UPDATES.columns_added_since(2) == v3
    fill = UPDATES.columns_added_since(1)
    assert fill == {"kl_ref": None, "ratio": None, "dead_sample_fraction": None,
                    "optimizer_steps": None, "explained_variance": None, **v3}
    assert all(UPDATES.arrow.field(c).nullable for c in fill)


def test_update_stats_declare_the_updates_columns_and_the_ppo_metrics():
    """``UpdateStats`` is the one declaration: ``update_role``'s row is exactly the updates
    table's columns, and the metrics are its fields (less ``n_sequences``) plus ``seconds``."""
    from dataclasses import fields
    from types import SimpleNamespace

    from artifacts.updatestats import UpdateStats
    from configs import TrainConfig
    from pipeline.update import update_role

    stats = {f.name for f in fields(UpdateStats)}
    assert stats <= set(UPDATES.names)
    assert set(UPDATES.names) - stats == {"stage", "role", "update_idx", "duration_s",
                                          "adapter_version_before", "adapter_version_after"}
    chains = [{"problem_id": "p", "sample_idx": 0, "prompt_token_ids": [1],
               "output_token_ids": [5], "output_logprobs": [-0.1]}]
    rewards = [{"problem_id": "p", "sample_idx": 0, "generator_reward": None,
                "discriminator_reward": None, "masked": True}]  # no step: no model needed
    state = SimpleNamespace(role="generator", version="v1", learning_rate=1e-4)
    cfg = TrainConfig()
    row = update_role(state, chains, rewards, stage=1, sampling=cfg.sampling, ppo=cfg.ppo)
    assert set(row) == set(UPDATES.names)
    m = step_metrics([], [], [row], [])
    assert {k.split("/")[-1] for k in m if k.startswith("ppo/")} == (
        stats - {"n_sequences", "policy_loss", "value_loss", "kl_ref", "ratio",
                 "dead_sample_fraction", "explained_variance", "logprob_mismatch",
                 "logprob_mismatch_share"}) | {"seconds"}  # nulls unlogged


def test_rejected_beyond_baseline_counts_what_only_the_discriminators_tests_found():
    """Of the samples the problem's own tests accept, the share a valid discriminator test
    (its own chain's or, with ``rewards.peer_tests``, a peer's) rejects."""
    def row(base_passed, passed_valid, peer=(0, 0)):
        return {**_reward(0.5, 0.5), "n_baseline": 3, "n_baseline_passed": base_passed,
                "n_valid": 2, "n_passed_valid": passed_valid, "n_peer": peer[0],
                "n_peer_passed": peer[1]}

    rows = [row(3, 1), row(3, 2), row(3, 2, peer=(1, 0)), row(3, 2, peer=(1, 1)),
            row(2, 0)]  # the last: the baseline already rejects it, so it is not counted
    m = step_metrics(rows, [], [], [])
    assert m["generator/rejected_beyond_baseline"] == pytest.approx(2 / 4)
    no_baseline_pass = step_metrics([row(0, 0)], [], [], [])
    assert no_baseline_pass["generator/rejected_beyond_baseline"] == 0.0
