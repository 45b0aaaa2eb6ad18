"""The training tasks' pure functions, without Prefect, models or a sandbox."""

from __future__ import annotations

import pytest
import torch
from fake_execution import run_in_process
from fake_execution import suite as _suite

from configs import RewardConfig, ScheduleConfig
from pipeline.chains import baseline_rows, parsed_test_rows
from pipeline.execution import NOT_RUN, JobPlan, execution_rows, plan_jobs, run_suites
from pipeline.schedule import plan, step_items
from pipeline.scoring import outcomes_from_rows, reward_rows, shuffled_rewards
from pipeline.update import build_batch
from problems import load_problems
from rewards import Mutant
from sandbox import Trusted


@pytest.fixture(scope="module")
def add():
    return next(p for p in load_problems("demo") if p.id == "add")


def test_schedule_is_n_plus_n_plus_k_per_stage() -> None:
    steps = plan(ScheduleConfig(2, 3, 3, (1, 4)))
    assert len(steps) == 16
    stage1 = [(s.role, s.phase) for s in steps if s.stage == 1]
    assert stage1 == [("discriminator", "discriminator")] * 2 + [("generator", "generator")] * 3 \
        + [("generator", "alternating"), ("discriminator", "alternating"),
           ("generator", "alternating")]
    assert [s.step for s in steps] == list(range(1, 17))
    assert {s.stage for s in steps[8:]} == {4}
    assert step_items([1, 2, 3], 2, 5) == [1, 2, 3]  # never more than there are


def test_tests_are_parsed_deduplicated_and_accumulated(add) -> None:
    seen: dict = {}
    samples = [(add, 0), (add, 1)]
    first = parsed_test_rows(samples, ["assert add(1, 1) == 2\nassert add(1,1)==2\nnot python (",
                                "```python\nassert add(0, 0) == 0\n```"], 1, seen)
    ok = [r for r in first if r["parse_status"] == "ok" and not r["is_duplicate"]]
    assert [(r["sample_idx"], r["snippet"]) for r in ok] == [
        (0, "assert add(1, 1) == 2"), (1, "assert add(0, 0) == 0")]
    assert all(r["drop_reason"] for r in first if r["parse_status"] == "dropped")
    second = parsed_test_rows(samples, ["assert add(1, 1) == 2\nassert add(2, 2) == 4", ""], 2,
                              seen)
    dup = [r for r in second if r["is_duplicate"]]
    assert len(dup) == 1 and dup[0]["duplicate_of"] == "s1.0"  # same test, earlier stage
    assert [r["test_id"] for r in baseline_rows([(add, 0)])] == [
        f"b.{i}" for i in range(len(add.baseline_tests))]


def test_execution_plan_deduplicates_shared_work(add) -> None:
    suites = [_suite(add, 0, "def add(a, b):\n    return a + b", ["assert add(1, 1) == 2"]),
              _suite(add, 1, "def add(a, b):\n    return a - b", ["assert add(1, 1) == 2"]),
              _suite(add, 2, None, ["assert add(2, 2) == 5"])]
    mutants = {"add": [Mutant("def add(a, b):\n    return a - b", "+ -> -", "arith")]}
    plan = plan_jobs(suites, mutants)
    kinds = [t[0] for t in plan.targets]
    # two candidates with code, one reference and one mutant run for the whole problem
    assert kinds == ["candidate", "candidate", "reference", "mutant"]
    assert len(plan.jobs[2][1]) == 3  # the reference runs each distinct test once
    assert len(plan.jobs[3][1]) == 3  # mutants face every test: what the baseline kills counts

    # The problem's own tests are the trusted ones (one pytest session); the
    # discriminator's each run alone, against every target.
    for _, tests in plan.jobs:
        assert [isinstance(t, Trusted) for t in tests] == [t in add.baseline_tests
                                                          for t in tests]
    assert any(isinstance(t, Trusted) for t in plan.jobs[2][1])

    rows = execution_rows(suites, plan, run_in_process(plan), mutants)
    by = {(r["sample_idx"], r["test_id"], r["target_id"]): r["status"] for r in rows}
    assert by[(0, "s1.0", "candidate")] == "passed"
    assert by[(1, "s1.0", "candidate")] == "failed"
    assert by[(2, "s1.0", "candidate")] == NOT_RUN  # no code: recorded, not executed
    assert by[(2, "s1.0", "reference")] == "failed"  # add(2, 2) == 5 is an invalid test
    assert by[(0, "s1.0", "m0")] == "failed"          # the valid test kills the mutant
    assert (0, "b.0", "m0") in by       # recorded: the progressive reward needs it
    assert {r["isolation"] for r in rows if r["status"] != NOT_RUN} == {"fake"}

    tests = [dict(t, problem_id="add", sample_idx=s.sample_idx, parse_status="ok",
                  is_duplicate=False) for s in suites for t in s.tests]
    outcomes = outcomes_from_rows(tests, rows, [("add", 0), ("add", 1), ("add", 2)], stage=1)
    assert outcomes[("add", 0)].code_ok and not outcomes[("add", 2)].code_ok
    cfg = RewardConfig(generator={"pass_rate": 1.0}, discriminator={"adversarial_validity": 1.0})
    rewards = reward_rows(outcomes, cfg, training_stage=1)
    gen = [r["generator_reward"] for r in rewards]
    assert gen == [1.0, 0.0, 0.0]       # correct code passes every valid test; no code gets 0
    assert rewards[2]["n_invalid"] == 1 and rewards[0]["n_valid"] == 1
    assert rewards[0]["n_mutants_killed"] == 1  # the discriminator's test; baseline ones earn
    baseline = [t for t in outcomes[("add", 0)].tests if t.origin == "baseline"]
    assert baseline and all(len(t.mutants_killed) == 1 for t in baseline)  # ... no credit
    assert not any(r["generator_group_skipped"] for r in rewards)  # rewards differ: signal
    assert list(rewards[0]["reward"]) == ["adversarial_validity", "pass_rate"]  # configured only


def test_equal_jobs_of_a_step_run_once_and_record_what_running_each_would(add) -> None:
    right, wrong = "def add(a, b):\n    return a + b", "def add(a, b):\n    return a * b"
    suites = [_suite(add, 0, right, ["assert add(2, 3) == 5"]),
              _suite(add, 1, right, ["assert add(2, 3) == 5"]),   # sample 0's job again
              _suite(add, 2, right, ["assert add(0, 5) == 5"]),   # same code, other tests
              _suite(add, 3, wrong, ["assert add(2, 3) == 5"])]   # same tests, other code
    swapped = "def add(a, b):\n    return b + a"
    mutants = {"add": [Mutant(swapped, "a+b -> b+a", "swap")] * 2}  # an equal pair
    plan = plan_jobs(suites, mutants)
    ran = []

    def run_jobs(jobs):
        ran.extend(jobs)
        return run_in_process(plan_of(jobs))

    def plan_of(jobs):  # run_in_process reads only the jobs and their targets' kinds
        return JobPlan(jobs=jobs, targets=[("candidate", "", "add", None)] * len(jobs))

    rows = run_suites(suites, mutants, run_jobs)
    # planned: 4 candidates, the reference, 2 mutants; ran: 3 candidates, the reference, 1 mutant
    assert len(plan.jobs) == 7 and len(ran) == 5
    assert len(set(map(repr, ran))) == len(ran)   # what ran is distinct
    assert rows == execution_rows(suites, plan, run_in_process(plan), mutants)  # each run
    by = {(r["sample_idx"], r["test_id"], r["target_id"]): r["status"] for r in rows}
    assert by[(1, "s1.0", "candidate")] == "passed" and by[(3, "s1.0", "candidate")] == "failed"
    assert by[(0, "s1.0", "m1")] == by[(0, "s1.0", "m0")] == "passed"


def test_update_batch_scores_the_trained_stage_tokens() -> None:
    chains = [{"problem_id": p, "sample_idx": j, "prompt_token_ids": [1, 2],
               "output_token_ids": list(range(n)), "output_logprobs": [-0.5] * n}
              for p, j, n in (("a", 0, 3), ("a", 1, 1), ("b", 0, 2))]
    rewards = [{"problem_id": p, "sample_idx": j, "generator_reward": r,
                "discriminator_reward": -r} for p, j, r in (("a", 0, 1.0), ("a", 1, 0.0),
                                                            ("b", 0, 0.5))]
    batch = build_batch(chains, rewards, "generator")
    assert batch.loss_mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert torch.equal(batch.group_ids, torch.tensor([0, 0, 1]))
    assert batch.scores.tolist() == [1.0, 0.0, 0.5]
    assert batch.old_logprobs[1].tolist() == [-0.5, 0.0, 0.0]
    assert build_batch(chains, rewards, "discriminator").scores.tolist() == [-1.0, 0.0, -0.5]
    with pytest.raises(ValueError, match="no generator rollouts"):
        build_batch(chains, [], "generator")


def test_chains_rows_share_out_the_whole_call_across_its_chunks(add) -> None:
    """A call of 4 prompts generated in 2 chunks of 2 (``sampling.batch_size``): the rows'
    ``latency_s`` add up to the call's time, whatever each chunk took (the step's
    ``time/generation_s`` sums them; each chunk's time over the call's count undercounted)."""
    from models.generation import Generation, GenerationBatch
    from models.prompts import Prompt
    from pipeline.chains import generation_rows
    from pipeline.timing import step_breakdown

    gens = [Generation(text="x", prompt_ids=[1], response_ids=[2], logprobs=[-0.1],
                       finished=True, seconds=s) for s in (3.0, 3.0, 5.0, 5.0)]
    batch = GenerationBatch(generations=gens, seconds=8.0, new_tokens=4,
                            chunk_seconds=[3.0, 5.0])
    samples = [(add, j) for j in range(4)]
    prompts = [Prompt(text="p", ids=[1])] * 4
    rows = generation_rows(samples, prompts, batch, stage=1, role="generator",
                           adapter_version="v", seed=0)
    assert sum(r["latency_s"] for r in rows) == pytest.approx(8.0)
    assert step_breakdown(10.0, {}, rows, [])["time/generation_s"] == pytest.approx(8.0)


def test_peer_tests_judge_the_generator_only(add) -> None:
    """``rewards.peer_tests``: a valid test written for sample 0 judges sample 1 too, whose
    code its own chain's tests did not catch; an invalid one counts against no one; the
    discriminator's rewards and mutant runs stay its own chain's."""
    from pipeline.execution import build_suites

    codes = {("add", 0): "```python\ndef add(a, b):\n    return a + b\n```",
             ("add", 1): "```python\ndef add(a, b):\n    return a + b if a < 1000 else 0\n```"}
    written = ["assert add(1000, 1) == 1001\nassert add(1, 1) == 3",  # valid (catches 1), invalid
               "assert add(1, 1) == 2"]                            # valid, passed by both
    samples = [(add, 0), (add, 1)]
    tests = parsed_test_rows(samples, written, 2, {}) + baseline_rows(samples)
    mutants = {"add": [Mutant("def add(a, b):\n    return a - b", "+ -> -", "arith")]}
    cfg = RewardConfig(generator={"pass_rate": 1.0}, discriminator={"progressive": 1.0})

    def score(peers: bool) -> tuple[list[dict], list[dict]]:
        suites = build_suites(samples, codes, tests, peers=peers)
        plan = plan_jobs(suites, mutants)
        rows = execution_rows(suites, plan, run_in_process(plan), mutants)
        return reward_rows(outcomes_from_rows(tests, rows, [("add", 0), ("add", 1)], 2), cfg,
                           2), rows

    alone, _ = score(False)
    pooled, rows = score(True)
    pass_rate = [[r["reward"]["pass_rate"] for r in run] for run in (alone, pooled)]
    assert pass_rate[0] == [1.0, 1.0]                           # sample 1's own tests miss its bug
    n_base = len(add.baseline_tests)
    assert pass_rate[1][1] == (n_base + 1) / (n_base + 2)       # the peer's valid test fails
    assert pass_rate[1][0] == 1.0                               # and one invalid never counts
    assert [(r["n_peer"], r["n_peer_passed"]) for r in pooled] == [(1, 1), (1, 0)]
    assert not pooled[1]["generator_group_skipped"] and alone[1]["generator_group_skipped"]
    for column in ("discriminator_reward", "validity", "n_valid", "n_mutants_killed"):
        assert [r[column] for r in pooled] == [r[column] for r in alone], column
    peer_rows = [r for r in rows if r["test_id"].startswith("p")]
    assert {(r["sample_idx"], r["test_id"]) for r in peer_rows} == {
        (0, "p1.s2.0"), (1, "p0.s2.0"), (1, "p0.s2.1")}
    assert {r["target_kind"] for r in peer_rows} == {"candidate", "reference"}  # no mutants


def test_shuffled_rewards_keep_each_problems_values_but_not_who_earned_them() -> None:
    """``rewards.shuffle_seed`` (the control run): per problem and role, the same reward values
    (so the same spread and skipped groups), drawn anew per step; masked rows, every other
    column and the input rows untouched."""
    rows = [{"problem_id": f"p{p}", "sample_idx": j, "masked": (p, j) == (0, 3),
             "generator_reward": None if (p, j) == (0, 3) else float(j),
             "discriminator_reward": None if (p, j) == (0, 3) else 10.0 + j,
             "all_pass": float(j), "generator_group_skipped": False}
            for p in range(20) for j in range(4)]
    before = [dict(r) for r in rows]
    out = shuffled_rewards(rows, seed=7, step=1)
    assert rows == before
    assert out == shuffled_rewards(rows, seed=7, step=1)  # a replay permutes the same way
    for role in ("generator_reward", "discriminator_reward"):
        for p in range(20):
            group = [i for i, r in enumerate(rows) if r["problem_id"] == f"p{p}"]
            assert sorted(str(out[i][role]) for i in group) == \
                sorted(str(rows[i][role]) for i in group)
    assert out[3]["generator_reward"] is None and out[3]["discriminator_reward"] is None
    for column in ("problem_id", "sample_idx", "masked", "all_pass", "generator_group_skipped"):
        assert [r[column] for r in out] == [r[column] for r in rows], column
    moved = sum(a["generator_reward"] != b["generator_reward"]
                for a, b in zip(out, rows, strict=True))
    assert moved > 20  # of 79 rows; a uniform permutation of 4 moves 3 on average
    # the roles are drawn apart, and another step or seed draws again
    assert any(r["discriminator_reward"] - 10.0 != r["generator_reward"] for r in out[4:])
    assert out != shuffled_rewards(rows, seed=7, step=2)
    assert out != shuffled_rewards(rows, seed=8, step=1)


def test_score_permutes_rewards_only_in_a_control_run(add) -> None:
    """``pipeline.stepwork.score`` returns reward_rows' rewards, permuted within the problem
    when ``rewards.shuffle_seed`` is set (the run's PPO reads that table)."""
    from types import SimpleNamespace

    import pyarrow as pa

    from pipeline.execution import build_suites
    from pipeline.parts import Inputs, executions_part, rewards_part, suite_part
    from pipeline.stepwork import score

    codes = {("add", j): f"```python\ndef add(a, b):\n    return a {op} b\n```"
             for j, op in enumerate("+-+-")}
    samples = [(add, j) for j in range(4)]
    stage_1 = parsed_test_rows(samples, ["assert add(1, 1) == 2"] * 4, 1, {})
    suites = build_suites(samples, codes, baseline_rows(samples) + stage_1, peers=False)
    plan = plan_jobs(suites, {})
    executions = execution_rows(suites, plan, run_in_process(plan), {})

    def rewards(shuffle_seed: int | None, step: int = 1) -> list[float]:
        cfg = RewardConfig(shuffle_seed=shuffle_seed)
        ctx = SimpleNamespace(cfg=SimpleNamespace(rewards=cfg), samples=lambda step: samples)
        inputs = Inputs({suite_part(None): pa.Table.from_pylist(baseline_rows(samples)),
                         suite_part(1): pa.Table.from_pylist(stage_1),
                         executions_part(): pa.Table.from_pylist(executions)})
        out = score(ctx, inputs, step, 1)
        assert list(out) == [rewards_part()] and inputs.unread() == []
        return [r["generator_reward"] for r in out[rewards_part()]]

    assert rewards(None) == [1.0, 0.0, 1.0, 0.0]  # all_pass: "-" fails add(1, 1) == 2
    drawn = [rewards(seed, step) for seed in range(3) for step in (1, 2)]
    assert all(sorted(d) == [0.0, 0.0, 1.0, 1.0] for d in drawn)
    assert any(d != [1.0, 0.0, 1.0, 0.0] for d in drawn)
    assert rewards(None, step=2) == [1.0, 0.0, 1.0, 0.0]  # no seed: no permutation
