"""A run's chain is a setting (``chain.stages``, ``chain.discriminator``): fewer reasoning
stages, or code only with the problems' own tests, run through the same training step as the
full chain, and contradictory settings are refused by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from artifacts import RunStore
from configs import ChainConfig, ConfigError, load_config
from configs.schema import check_learnable
from pipeline.catalogue import kind_inputs, step_parts, work_items

REPO = Path(__file__).resolve().parent.parent
CODE_ONLY = ChainConfig(stages=(5,), discriminator=False)


@pytest.mark.parametrize("stages, why", [([1, 2], "must hold the code stage 5"),
                                         ([5, 3], "increasing"), ([0, 5], "stage ids from 1")])
def test_a_chain_without_code_or_out_of_order_is_refused_by_key(stages, why):
    with pytest.raises(ConfigError, match=f"chain.stages.*{why}"):
        load_config(None, [f"chain.stages={stages}"])


def test_training_what_the_chain_does_not_write_is_refused():
    cfg = load_config(None, ["chain.stages=[2, 5]", "schedule.stages=[1, 5]"])
    with pytest.raises(ConfigError, match=r"stage\(s\) \[1\] would be trained"):
        check_learnable(cfg)
    cfg = load_config(None, ["chain.discriminator=false", "schedule.stages=[5]",
                             "schedule.n_discriminator_steps=0", "schedule.k_alternating=2"])
    with pytest.raises(ConfigError, match="chain.discriminator=false with .*k_alternating=2"):
        check_learnable(cfg)
    check_learnable(load_config(None, [
        "chain.stages=[5]", "chain.discriminator=false", "schedule.stages=[5]",
        "schedule.n_discriminator_steps=0", "schedule.k_alternating=1"]))  # generator only


def test_the_catalogue_follows_the_chain():
    assert [i.name for i in work_items(CODE_ONLY)] == [
        "rollout-5", "baseline", "execute", "rewards", "update"]
    assert kind_inputs("execute", "generator", chain=CODE_ONLY) == [
        ("chains", "generator-5"), ("tests", "baseline")]
    assert step_parts("generator", CODE_ONLY) == [
        ("chains", "generator-5"), ("tests", "baseline"), ("executions", "all"),
        ("rewards", "all"), ("updates", "generator")]
    short = ChainConfig(stages=(2, 4, 5))
    assert kind_inputs("rollout", "generator", chain=short) == []
    (tests_4,) = [i for i in work_items(short) if i.name == "tests-4"]
    assert tests_4.inputs("discriminator", 5) == [
        ("chains", "generator-2"), ("chains", "generator-4"), ("tests", "stage-2")]
    assert [i.name for i in work_items()] == [  # the default: the whole chain
        *[f"rollout-{s}" for s in range(1, 6)], "baseline",
        *[f"tests-{s}" for s in range(1, 6)], "execute", "rewards", "update"]


def _train(tmp_path: Path, tiny_model_dir: Path, run_id: str, extra: list[str]) -> RunStore:
    from flows.train import train

    # Shrunk for wall-clock time only: one generator step on two problems x two samples,
    # short outputs. Everything else is the real pipeline.
    overrides = [f"model.generator={tiny_model_dir}", f"artifacts.root={tmp_path / 'runs'}",
                 f"tracking.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
                 "schedule.stages=[5]", "schedule.n_discriminator_steps=0",
                 "schedule.n_generator_steps=1", "schedule.k_alternating=0",
                 "sampling.max_new_tokens=12", "sampling.samples_per_problem=2",
                 "problems.limit=2", "schedule.problems_per_step=2",
                 "rewards.mutants_per_problem=1", *extra]
    train(config=str(REPO / "configs/minimal.yaml"), overrides=overrides, run_id=run_id)
    store = RunStore(str(tmp_path / "runs"), run_id)
    assert store.complete_steps() == [1] and store.incomplete_steps() == []
    return store


@pytest.mark.slow
def test_a_code_only_run_trains_on_the_problems_own_tests(prefect_harness, tiny_model_dir,
                                                          tmp_path, monkeypatch):
    from configs import load_config as load
    from models.stages import direct_messages
    from problems import load_problems

    monkeypatch.chdir(tmp_path)
    store = _train(tmp_path, tiny_model_dir, "code-only", [
        "chain.stages=[5]", "chain.discriminator=false",
        "rewards.generator={baseline_all_pass: 1.0}"])
    chains = store.read("chains", step=1)
    assert set(zip(chains["role"], chains["stage"], strict=True)) == {("generator", 5)}
    assert len(chains) == 2 * 2  # problems x samples: one stage, one role
    # the prompt is exactly what a model asked for code directly sees
    problems = {p.id: p for p in load_problems("demo", limit=2)}
    tokenizer_text = chains["prompt"].iloc[0]
    first = problems[chains["problem_id"].iloc[0]]
    assert direct_messages(first)[1]["content"] in tokenizer_text
    assert "reasoning so far" not in tokenizer_text.lower()
    tests = store.read("tests", step=1)
    assert set(tests["origin"]) == {"baseline"} and len(tests) > 0
    rewards = store.read("rewards", step=1)
    executions = store.read("executions", step=1)
    candidate = executions[executions["target_kind"] == "candidate"]
    for _, row in rewards.iterrows():  # the reward is the baseline suite's all-pass
        mine = candidate[(candidate["problem_id"] == row["problem_id"])
                         & (candidate["sample_idx"] == row["sample_idx"])]
        all_passed = len(mine) > 0 and bool((mine["status"] == "passed").all())
        assert row["generator_reward"] == float(all_passed)
        assert row["n_tests"] == row["n_baseline"] > 0  # the suite is the baseline alone
    assert list(store.read("updates")["role"]) == ["generator"]
    assert load(None, ["chain.stages=[5]"]).chain.stages == (5,)


@pytest.mark.slow
def test_a_shorter_chain_shows_each_stage_only_its_own_earlier_stages(
        prefect_harness, tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = _train(tmp_path, tiny_model_dir, "short-chain", ["chain.stages=[2, 4, 5]"])
    chains = store.read("chains", step=1)
    assert set(zip(chains["role"], chains["stage"], strict=True)) == {
        (role, s) for role in ("generator", "discriminator") for s in (2, 4, 5)}
    code = chains[(chains["role"] == "generator") & (chains["stage"] == 5)]
    for prompt in code["prompt"]:
        assert "### Stage 2: structured reasoning" in prompt
        assert "### Stage 4: constraints and invariants" in prompt
        assert "### Stage 1:" not in prompt and "### Stage 3:" not in prompt
    tests = store.read("tests", step=1)
    assert set(tests["stage"]) <= {0, 2, 4, 5} and "baseline" in set(tests["origin"])


def test_shares_of_a_code_only_chain_count_at_the_code_stage():
    from pipeline.chainshares import chain_shares
    from pipeline.solver import InferenceResult
    from problems import load_problems

    problem = load_problems("demo", limit=1)[0]
    result = InferenceResult(problem=problem, sample_idx=0, reasoning_chain=[],
                             generated_code="", code=None, code_reason="no code",
                             stage_times=[0.1], finished=[True])
    assert result.stages == [5]
    shares = {s.stage: s.gen_ended for s in chain_shares([result], [[]]).stages}
    assert shares == {1: None, 2: None, 3: None, 4: None, 5: 1.0}
    three = InferenceResult(problem=problem, sample_idx=0, reasoning_chain=["a", "b"],
                            generated_code="", code=None, code_reason="no code",
                            stage_times=[0.1] * 3, finished=[True, False, True],
                            reasoning_stages=[2, 4])
    shares = {s.stage: s.gen_ended for s in chain_shares([three], [[]]).stages}
    assert shares == {1: None, 2: 1.0, 3: None, 4: 0.0, 5: 1.0}
