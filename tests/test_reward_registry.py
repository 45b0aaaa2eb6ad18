"""A reward is one decorated function: registered, it is a config's choice, its raw value is a
key of the rewards table's ``reward`` map and its weighted sum is what PPO learns from; no
schema changes. Rewards files written one column per reward still read, into the same map."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from artifacts import RunStore
from artifacts.schemas import META_TABLE, META_VERSION, REWARDS
from configs import ConfigError, load_config
from models.ppo import group_advantages
from pipeline.scoring import reward_rows
from pipeline.update import build_batch
from rewards import SampleOutcome, TestVerdict, functions, reward

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def registry(monkeypatch):
    """The reward registry as it is, restored after the test (its rewards stay its own)."""
    monkeypatch.setattr(functions, "REGISTRY", dict(functions.REGISTRY))
    return functions.REGISTRY


def _verdict(passed: bool, origin: str = "baseline", key: str = "t") -> TestVerdict:
    return TestVerdict(key, origin, 0 if origin == "baseline" else 5, False, True,
                       "passed" if passed else "failed")


def _outcomes() -> dict[tuple[str, int], SampleOutcome]:
    """Two problems, three samples each: passing 3, 2 and 0 of three tests, or 1, 1 and 0."""
    def sample(n_passed: int) -> SampleOutcome:
        return SampleOutcome(True, tuple(_verdict(i < n_passed, key=f"t{i}") for i in range(3)),
                             stage=5)

    return {("p", 0): sample(3), ("p", 1): sample(2), ("p", 2): sample(0),
            ("q", 0): sample(1), ("q", 1): sample(1), ("q", 2): sample(0)}


def test_a_new_reward_is_one_decorated_function_scored_stored_and_used(registry, tmp_path):
    with pytest.raises(ConfigError, match="rewards.generator.failed_share=2.0: unknown reward"):
        load_config(None, ["rewards.generator={failed_share: 2.0, pass_rate: 1.0}"])

    @reward("generator")
    def failed_share(outcome: SampleOutcome, cfg) -> float:
        """The share of the tests that judge the code which it fails."""
        tests = outcome.generator_tests
        return sum(not t.passed for t in tests) / len(tests)

    cfg = load_config(None, ["rewards.generator={failed_share: 2.0, pass_rate: 1.0}"]).rewards
    outcomes = _outcomes()
    rows = reward_rows(outcomes, cfg, training_stage=5)
    store = RunStore(str(tmp_path / "runs"), "r")
    store.write("rewards", 1, "all", rows)
    stored = store.read_table("rewards", step=1).to_pylist()

    for row, outcome in zip(stored, outcomes.values(), strict=True):
        failed = failed_share(outcome, cfg)
        passed = functions.pass_rate(outcome, cfg)
        assert row["reward"] == [("failed_share", failed), ("pass_rate", passed),
                                 ("progressive", 0.0)]     # every weighted reward, by name
        assert row["generator_reward"] == 2.0 * failed + 1.0 * passed
    # PPO's scores are those totals: weighted 2.0, the new term makes the sample that fails
    # every test lead its group, the one pass_rate alone ranks last
    chains = [{"problem_id": p, "sample_idx": i, "prompt_token_ids": [1, 2],
               "output_token_ids": [3], "output_logprobs": [-0.5]} for p, i in outcomes]
    batch = build_batch(chains, stored, "generator")
    assert torch.equal(batch.scores, torch.tensor([r["generator_reward"] for r in stored]))
    advantages, live = group_advantages(batch.scores, batch.group_ids)
    assert bool(live.all()) and int(advantages[:3].argmax()) == 2


def test_a_reward_of_one_role_is_refused_in_the_other(registry):
    @reward("discriminator")
    def writes_tests(outcome: SampleOutcome, cfg) -> float:
        return float(bool(outcome.discriminator_tests))

    assert load_config(None, ["rewards.discriminator={writes_tests: 1.0}"])
    with pytest.raises(ConfigError, match="writes_tests=1.0: a discriminator reward"):
        load_config(None, ["rewards.generator={writes_tests: 1.0}"])


# -- rewards files of older schema versions -----------------------------------------------------
PER_REWARD = ("pass_rate", "shifted_pass_rate", "adversarial_validity", "valid_invalid_bugcatch",
              "mutation_kill", "baseline_pass_rate", "progressive", "all_pass",
              "baseline_all_pass")
"""The columns a rewards file stored one reward in each, in their order there."""
ADDED_AFTER_V1 = ("masked", "n_infra_tests", "n_peer", "n_peer_passed", "baseline_pass_rate",
                  "progressive", "all_pass", "baseline_all_pass")


def _old_file(path: Path, rows: list[dict], version: int) -> None:
    """``rows`` written as a rewards file of ``version``: one float column per reward where
    the current table has the ``reward`` map, and before version 2 none of ADDED_AFTER_V1."""
    fields = []
    for f in REWARDS.fields:
        fields += [pa.field(n, pa.float64()) for n in PER_REWARD] if f.name == "reward" else [f]
    if version == 1:
        fields = [f for f in fields if f.name not in ADDED_AFTER_V1]
    schema = pa.schema(fields, metadata={META_TABLE: b"rewards",
                                         META_VERSION: str(version).encode()})
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _v6_rows() -> list[dict]:
    """Rows as a version-6 file holds them: the configured rewards' columns set (sums of
    float64 that no decimal literal writes exactly), the others null; a masked row all null."""
    base = {"stage": 5, "problem_id": "p", "validity": 0.1 + 0.2, "bug_catch": 0.0,
            "n_tests": 3, "n_valid": 1, "n_invalid": 0, "n_duplicates": 0, "n_passed_valid": 1,
            "n_baseline": 2, "n_baseline_passed": 1, "n_mutants": 6, "n_mutants_killed": 2,
            "generator_group_skipped": False, "discriminator_group_skipped": True,
            "n_infra_tests": 0, "n_peer": 0, "n_peer_passed": 0, "masked": False,
            **dict.fromkeys(PER_REWARD)}
    scored = [{**base, "sample_idx": i, "all_pass": float(i % 2), "progressive": i / 3 + 0.1,
               "generator_reward": float(i % 2), "discriminator_reward": i / 3 + 0.1}
              for i in range(3)]
    masked = {**base, "sample_idx": 3, "masked": True, "n_infra_tests": 1,
              "generator_reward": None, "discriminator_reward": None, "validity": None,
              "bug_catch": None}
    return [*scored, masked]


def test_an_older_rewards_file_reads_into_the_new_shape_with_the_same_values(tmp_path):
    old = _v6_rows()
    store = RunStore(str(tmp_path / "runs"), "old")
    ptr = store.write("rewards", 1, "all", [
        {**{k: v for k, v in r.items() if k not in PER_REWARD}, "reward": None} for r in old])
    path = tmp_path / "runs" / "run_id=old" / ptr.relpath
    _old_file(path, old, version=6)

    got = store.read_table("rewards", step=1)
    assert got.column_names == REWARDS.full.names
    rows = got.to_pylist()
    assert [r["reward"] for r in rows] == [
        [("all_pass", 0.0), ("progressive", 0.1)],
        [("all_pass", 1.0), ("progressive", 1 / 3 + 0.1)],
        [("all_pass", 0.0), ("progressive", 2 / 3 + 0.1)],
        None]                                             # masked: no reward at all
    for new, was in zip(rows, old, strict=True):
        assert {k: new[k] for k in was if k not in PER_REWARD} == {
            k: v for k, v in was.items() if k not in PER_REWARD}

    # written again in the new shape, the same rows read back identical
    again = RunStore(str(tmp_path / "runs"), "again")
    again.write("rewards", 1, "all", got.drop_columns(["run_id", "step"]))
    assert again.read_table("rewards", step=1).drop_columns(["run_id"]).equals(
        got.drop_columns(["run_id"]))

    # a version-1 file (no masking, no peers, four reward columns) reads too
    v1 = [{k: v for k, v in r.items() if k not in ADDED_AFTER_V1} | {"pass_rate": 0.5}
          for r in old[:3]]
    _old_file(path, v1, version=1)
    rows = store.read_table("rewards", step=1).to_pylist()
    assert [r["reward"] for r in rows] == [[("pass_rate", 0.5)]] * 3
    assert [(r["masked"], r["n_infra_tests"], r["n_peer"]) for r in rows] == [(False, 0, None)] * 3


@pytest.mark.slow
def test_a_new_reward_trains_a_tiny_step(registry, prefect_harness, tiny_model_dir, tmp_path,
                                         monkeypatch):
    from flows.train import train
    from pipeline.scoring import outcomes_from_rows

    @reward("generator")
    def judged_by(outcome: SampleOutcome, cfg) -> float:
        """How many tests judge the code, over ten."""
        return len(outcome.generator_tests) / 10

    monkeypatch.chdir(tmp_path)
    run_id = "new-reward"
    train(config=str(REPO / "configs/minimal.yaml"), run_id=run_id, overrides=[
        f"model.generator={tiny_model_dir}", f"artifacts.root={tmp_path / 'runs'}",
        f"tracking.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
        "chain.stages=[5]", "chain.discriminator=false", "schedule.stages=[5]",
        "schedule.n_discriminator_steps=0", "schedule.n_generator_steps=1",
        "schedule.k_alternating=0", "sampling.max_new_tokens=12", "problems.limit=2",
        "rewards.mutants_per_problem=1", "rewards.generator={judged_by: 0.5, all_pass: 1.0}"])
    store = RunStore(str(tmp_path / "runs"), run_id)
    assert store.complete_steps() == [1]
    rewards = store.read_table("rewards", step=1).to_pylist()
    tests = store.read_table("tests", step=1).to_pylist()
    executions = store.read_table("executions", step=1).to_pylist()
    keys = [(r["problem_id"], r["sample_idx"]) for r in rewards]
    outcomes = outcomes_from_rows(tests, executions, keys, stage=5)
    assert rewards and not any(r["masked"] for r in rewards)
    for row, key in zip(rewards, keys, strict=True):
        value = dict(row["reward"])
        assert value["judged_by"] == judged_by(outcomes[key], None) > 0
        assert row["generator_reward"] == 0.5 * value["judged_by"] + value["all_pass"]
    assert [u["role"] for u in store.read_table("updates", step=1).to_pylist()] == ["generator"]
