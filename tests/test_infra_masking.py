"""``infra`` verdicts (the sandbox failed, not the code) are never scored: the sample is masked.

Fake sandbox results only: no sandbox, model or Prefect.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import torch
from fake_execution import LIMITS, FakeResult, LegacyResult, run_in_process, suite

from artifacts import RunStore
from artifacts.schemas import get_schema
from configs import RewardConfig
from models.ppo import group_advantages
from pipeline.execution import NO_LIMITS, NOT_RUN, execution_rows, plan_jobs
from pipeline.metrics import step_metrics
from pipeline.scoring import outcomes_from_rows, reward_rows
from pipeline.update import build_batch
from problems import load_problems
from rewards import (
    INFRA,
    REGISTRY,
    Mutant,
    SampleOutcome,
    TestVerdict,
    compute_rewards,
)

CFG = RewardConfig(generator={"pass_rate": 1.0},
                   discriminator={"adversarial_validity": 1.0, "mutation_kill": 0.5})
RIGHT = "def add(a, b):\n    return a + b"
WRONG = "def add(a, b):\n    return a - b"
GOOD, BAD = "assert add(1, 1) == 2", "assert add(2, 2) == 5"  # valid / invalid test


@pytest.fixture(scope="module")
def add():
    return next(p for p in load_problems("demo") if p.id == "add")


def _run(add, suites, infra: dict[tuple[str, int | None], set[str]], result=FakeResult):
    """Execute for real (in-process), with an INFRA verdict for the snippets of
    ``infra[(kind, sample)]``; returns executions rows, tests rows and the rewards rows."""
    mutants = {"add": [Mutant(WRONG, "+ -> -", "arith")]}
    plan = plan_jobs(suites, mutants)
    results = run_in_process(plan, infra, result)
    rows = execution_rows(suites, plan, results, mutants)
    tests = [dict(t, problem_id="add", sample_idx=s.sample_idx, parse_status="ok",
                  is_duplicate=False) for s in suites for t in s.tests]
    keys = [("add", s.sample_idx) for s in suites]
    outcomes = outcomes_from_rows(tests, rows, keys, stage=1)
    return rows, outcomes, reward_rows(outcomes, CFG, training_stage=1)


def test_infra_on_the_candidate_masks_the_sample_and_never_scores_it(add):
    suites = [suite(add, 0, RIGHT, [GOOD]), suite(add, 1, WRONG, [GOOD]),
              suite(add, 2, RIGHT, [GOOD, BAD])]
    rows, outcomes, rewards = _run(add, suites, {("candidate", 2): {GOOD}})
    assert [r["status"] for r in rows if r["sample_idx"] == 2 and r["test_id"] == "s1.0"
            and r["target_kind"] == "candidate"] == [INFRA]   # recorded as the sandbox said
    by = {r["sample_idx"]: r for r in rewards}
    assert outcomes[("add", 2)].masked and not outcomes[("add", 0)].masked
    masked = by[2]
    assert masked["masked"] and masked["n_infra_tests"] == 1
    # Not a pass (1) and not a fail (0): no reward value at all, for either role.
    for col in ("generator_reward", "discriminator_reward", "reward", "validity", "bug_catch"):
        assert masked[col] is None, col
    assert masked["n_invalid"] == 1 and masked["n_valid"] == 1  # known verdicts still counted
    assert (by[0]["generator_reward"], by[1]["generator_reward"]) == (1.0, 0.0)
    assert not by[0]["masked"] and by[0]["n_infra_tests"] == 0

    # The update never sees it: out of the batch, hence out of the group's advantages.
    chains = [{"problem_id": "add", "sample_idx": j, "prompt_token_ids": [1],
               "output_token_ids": [5, 6], "output_logprobs": [-0.1, -0.2]} for j in range(3)]
    for role, col in (("generator", "generator_reward"),
                      ("discriminator", "discriminator_reward")):
        batch = build_batch(chains, rewards, role)
        assert batch.scores.tolist() == pytest.approx([by[0][col], by[1][col]]), role
        assert batch.loss_mask.shape[0] == 2
    adv, live = group_advantages(build_batch(chains, rewards, "generator").scores,
                                 torch.tensor([0, 0]))
    assert live.all() and adv[0] > 0 > adv[1]   # the two scored samples, as if alone


def test_infra_on_an_invalid_test_is_read_by_no_reward_and_masks_nothing(add):
    suites = [suite(add, 0, RIGHT, [GOOD, BAD]), suite(add, 1, WRONG, [GOOD])]
    _, outcomes, rewards = _run(add, suites, {("candidate", 0): {BAD}, ("mutant", None): {BAD}})
    assert not outcomes[("add", 0)].masked
    assert rewards[0]["generator_reward"] == 1.0 and rewards[0]["n_invalid"] == 1


def test_infra_reference_verdict_is_neither_valid_nor_invalid(add):
    suites = [suite(add, 0, RIGHT, [GOOD, BAD]), suite(add, 1, WRONG, [GOOD, BAD])]
    _, outcomes, rewards = _run(add, suites, {("reference", None): {BAD}})
    for key in (("add", 0), ("add", 1)):
        bad = next(t for t in outcomes[key].tests if t.origin == "discriminator"
                   and t.valid is not True)
        assert bad.valid is None and bad.unknown     # unknown, not invalid
        assert bad not in outcomes[key].discriminator_tests
        assert outcomes[key].masked                  # validity unknown: cannot be scored
    assert all(r["n_invalid"] == 0 and r["n_valid"] == 1 and r["masked"] for r in rewards)
    assert all(r["generator_reward"] is None and r["discriminator_reward"] is None
               for r in rewards)
    assert all(r["generator_group_skipped"] for r in rewards)  # nothing scored in the group

    # Every rollout masked: nothing to update on, which is not an error.
    chains = [{"problem_id": "add", "sample_idx": j, "prompt_token_ids": [1],
               "output_token_ids": [5], "output_logprobs": [-0.1]} for j in range(2)]
    assert build_batch(chains, rewards, "discriminator") is None
    with pytest.raises(ValueError, match="no generator rollouts"):
        build_batch(chains, [], "generator")


def test_infra_on_a_mutant_leaves_kill_credit_unknown_and_masks(add):
    suites = [suite(add, 0, RIGHT, [GOOD]), suite(add, 1, WRONG, [GOOD])]
    _, outcomes, rewards = _run(add, suites, {("mutant", None): {GOOD}})
    good = next(t for t in outcomes[("add", 0)].tests if t.origin == "discriminator")
    assert good.mutants_killed == (None,) and not good.killed(0)
    assert all(r["masked"] and r["n_mutants_killed"] == 0 for r in rewards)


def test_reward_functions_refuse_a_masked_outcome():
    infra = TestVerdict("t", "discriminator", 1, False, True, INFRA)
    out = SampleOutcome(True, (infra,), n_mutants=0)
    assert out.masked and out.infra_tests == (infra,)
    for r in REGISTRY.values():
        with pytest.raises(ValueError, match="masked"):
            r.fn(out, CFG)
    r = compute_rewards(out, CFG)
    assert r.masked and r.generator is None and r.discriminator is None
    assert all(v is None for k, v in r.components.items() if k.startswith("reward/"))
    # Unmasked outcomes are scored exactly as before.
    ok = compute_rewards(SampleOutcome(True, (TestVerdict("t", "discriminator", 1, False, True,
                                                          "failed"),)), CFG)
    assert not ok.masked and ok.generator == 0.0 and ok.components["masked"] == 0.0


def test_step_metrics_count_masked_samples_and_infra_verdicts(add):
    suites = [suite(add, 0, RIGHT, [GOOD]), suite(add, 1, WRONG, [GOOD]),
              suite(add, 2, RIGHT, [GOOD]), suite(add, 3, WRONG, [GOOD])]
    rows, _, rewards = _run(add, suites, {("candidate", 2): {GOOD, add.baseline_tests[0]}})
    m = step_metrics(rewards, rows, [], [])
    assert m["sandbox/infra_masked_samples"] == 1.0
    assert m["sandbox/infra_masked_fraction"] == 0.25
    assert m["sandbox/infra_verdicts"] == 2.0
    # Reward means are over the three scored samples (1, 0, 0); the masked one is not a 0.
    assert m["generator/reward"] == pytest.approx(1 / 3)
    clean = step_metrics([dict(r, masked=False) for r in rewards[:2]], rows, [], [])
    assert clean["sandbox/infra_masked_samples"] == 0.0


def test_limits_land_in_the_executions_rows_and_the_store(add, tmp_path):
    suites = [suite(add, 0, RIGHT, [GOOD]), suite(add, 1, None, [GOOD])]
    rows, _, rewards = _run(add, suites, {})
    ran = [r for r in rows if r["status"] != NOT_RUN]
    assert ran and all(json.loads(r["limits"]) == LIMITS for r in ran)
    assert ran[0]["limits"] == '{"memory_mb":256,"nofile":64,"timeout_s":2.0}'  # compact
    assert all(r["limits"] == NO_LIMITS for r in rows if r["status"] == NOT_RUN)
    legacy, _, _ = _run(add, suites, {}, result=LegacyResult)  # no ``limits`` attribute yet
    assert {r["limits"] for r in legacy} == {NO_LIMITS}

    store = RunStore(str(tmp_path), run_id="r")
    store.write("executions", 1, "all", rows)
    store.write("rewards", 1, "all", rewards)
    back = store.read_table("executions", step=1).to_pylist()
    assert [r["limits"] for r in back] == [r["limits"] for r in rows]


@pytest.mark.parametrize("table,version,fill", [
    ("executions", 1, {"limits": None, "executor": None, "node": None}),
    ("rewards", 1, {"masked": False, "n_infra_tests": 0}),
    ("rewards", 4, {"n_peer": None, "n_peer_passed": None})])
def test_parts_of_the_previous_schema_version_still_read(add, tmp_path, table, version, fill):
    """A run recorded before v2 (no limits, no mask), or before peer tests (v5), still
    resumes, replays and reports."""
    rows, _, rewards = _run(add, [suite(add, 0, RIGHT, [GOOD])], {})
    store = RunStore(str(tmp_path), run_id="r")
    ptr = store.write(table, 1, "all", rows if table == "executions" else rewards)
    path = tmp_path / "run_id=r" / ptr.relpath
    old = pq.read_table(path).drop_columns(list(fill))
    pq.write_table(old.replace_schema_metadata({"artifacts.table": table,
                                                "artifacts.schema_version": str(version)}),
                   path)
    back = store.read_table(table, step=1)
    assert back.schema.names[2:] == get_schema(table).names
    for col, value in fill.items():
        assert back.column(col).to_pylist() == [value] * back.num_rows
    pq.write_table(old.replace_schema_metadata({"artifacts.schema_version": "0"}), path)
    with pytest.raises(Exception, match=f"written with {table} schema v0"):
        store.read_table(table, step=1)


def test_an_update_whose_samples_are_all_masked_changes_nothing():
    from types import SimpleNamespace

    from configs import TrainConfig
    from pipeline.update import update_role

    chains = [{"problem_id": "add", "sample_idx": 0, "prompt_token_ids": [1],
               "output_token_ids": [5], "output_logprobs": [-0.1]}]
    rewards = [{"problem_id": "add", "sample_idx": 0, "generator_reward": None,
                "discriminator_reward": None, "masked": True}]
    # no model is touched: a role state with only a version and a learning rate suffices
    state = SimpleNamespace(role="generator", version="v1", learning_rate=1e-4)
    cfg = TrainConfig()
    row = update_role(state, chains, rewards, stage=1, sampling=cfg.sampling, ppo=cfg.ppo)
    assert row["n_sequences"] == 0 and row["n_tokens"] == 0
    assert row["adapter_version_before"] == row["adapter_version_after"] == "v1"


def test_an_update_at_learning_rate_zero_computes_no_pass():
    """An lr-0 role (the learning benchmark's control) cannot move, so no forward or backward
    pass is run: a role state without any model suffices, and the row says no step."""
    from dataclasses import replace
    from types import SimpleNamespace

    from configs import TrainConfig
    from pipeline.update import update_role

    chains = [{"problem_id": "add", "sample_idx": i, "prompt_token_ids": [1],
               "output_token_ids": [5, 6], "output_logprobs": [-0.1, -0.2]} for i in range(2)]
    rewards = [{"problem_id": "add", "sample_idx": i, "generator_reward": float(i),
                "discriminator_reward": 0.5, "masked": False} for i in range(2)]
    state = SimpleNamespace(role="generator", version="v1", learning_rate=0.0)
    cfg = TrainConfig()
    row = update_role(state, chains, rewards, stage=1, sampling=cfg.sampling,
                      ppo=replace(cfg.ppo, learning_rate=0.0))
    assert row["n_sequences"] == 2 and row["n_tokens"] == 0 and row["learning_rate"] == 0.0
    assert row["adapter_version_before"] == row["adapter_version_after"] == "v1"
    with pytest.raises(AttributeError, match="policies"):  # any other rate uses the model
        update_role(state, chains, rewards, stage=1, sampling=cfg.sampling, ppo=cfg.ppo)
