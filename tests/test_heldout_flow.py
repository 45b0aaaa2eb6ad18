"""The real training flow on the procedural family: warm start on its warmstart split, PPO on
its train split, held-out evaluation (hidden suites) before training and after each stage."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_train_flow import overrides

from artifacts import RunStore
from problems.family import params_of

REPO = Path(__file__).resolve().parent.parent


def test_flow_evaluates_heldout_before_and_after_each_stage(prefect_harness, tiny_model_dir,
                                                            tmp_path, monkeypatch,
                                                            context_walks):
    from artifacts.tracking import Tracker
    from flows.train import train

    monkeypatch.chdir(tmp_path)
    sets = overrides(tiny_model_dir, tmp_path) + [
        "problems.source=family:piecewise:train", "tracking.register_models=false",
        "warm_start.enabled=true", "warm_start.steps=2", "warm_start.batch_size=2",
        "warm_start.source=family:piecewise:warmstart", "warm_start.limit=3",
        "evaluation.source=family:piecewise:heldout", "evaluation.limit=2"]
    summary = train(config=str(REPO / "configs/minimal.yaml"), overrides=sets,
                    run_id="heldout-test")
    store = RunStore(str(tmp_path / "runs"), "heldout-test")
    assert context_walks == []  # the warm start and evaluation tasks got it quoted too
    entries = store.read_json("heldout.json")
    assert [(e["label"], e["step"]) for e in entries] == [("before", 0), ("stage 1", 2),
                                                          ("stage 2", 4)]
    for e in entries:
        m = e["metrics"]
        assert m["problems"] == 2 and m["samples"] == 2
        assert 0 <= m["pass_at_1"] <= 1 and 0 <= m["edge_pass_rate"] <= 1
    # the first evaluation's wrong solutions are kept, fixed for the run (wrong_caught)
    wrong = store.read_json("heldout_wrong.json")
    assert isinstance(wrong, list)
    assert {params_of(w["problem_id"]).split for w in wrong} <= {"heldout"}
    for e in entries:
        assert ("wrong_caught" in e["metrics"]) == bool(wrong)
    # PPO saw train-split problems only; the evaluation only held-out ones
    trained = set(store.read("rewards")["problem_id"])
    assert trained and {params_of(p).split for p in trained} == {"train"}
    tracker = Tracker(summary["mlflow_tracking_uri"], "minimal")
    history = tracker.client.get_metric_history(summary["mlflow_run_id"], "heldout/pass_at_1")
    assert [m.step for m in history] == [0, 2, 4]
    # each stage's checkpoint (hence the champion) is scored on its held-out evaluation, not
    # on the stage's last training step
    scores = tracker.client.get_metric_history(summary["mlflow_run_id"], "checkpoint/score")
    expected = {e["step"]: round(0.7 * e["metrics"]["pass_at_1"]
                                 + 0.3 * e["metrics"].get("test_validity", 0.0), 12)
                for e in entries if e["label"] != "before"}
    assert {m.step: m.value for m in scores} == expected  # same expression, same rounding
    # the final table the run prints (through Prefect's log: where it lands depends on the
    # handlers of the moment, so it is rebuilt here from the same record)
    from pipeline.heldout import heldout_table

    table = heldout_table(entries, "family:piecewise:heldout").splitlines()
    assert table[0].startswith("held-out: family:piecewise:heldout, 2 problems never trained on")
    assert [line.split()[0] for line in table[2:5]] == ["before", "stage", "stage"]
    assert table[5].startswith("per chain stage: wrong solutions caught first")
    assert [line.split()[0] for line in table[7:]] == ["before", "stage", "stage"]
    for e in entries:  # first catches per stage add up to what was caught
        m = e["metrics"]
        if "wrong_caught" in m:
            assert abs(sum(m[f"caught_s{k}"] for k in range(1, 6)) - m["wrong_caught"]) < 1e-9


def test_a_second_run_reuses_the_before_evaluation_of_the_same_adapters(
        prefect_harness, tiny_model_dir, tmp_path, monkeypatch):
    """The ``before`` evaluation is a function of the adapters, problems, config and code: a
    second run with all of them equal takes it from ``.cache/heldout`` (and evaluates
    nothing: the evaluation is made to fail here), with the same record and wrong solutions."""
    import tasks.heldout
    from artifacts.tracking import Tracker
    from flows.train import train

    monkeypatch.chdir(tmp_path)
    sets = overrides(tiny_model_dir, tmp_path) + [
        "problems.source=family:piecewise:train", "tracking.register_models=false",
        "warm_start.enabled=true", "warm_start.steps=2", "warm_start.batch_size=2",
        "warm_start.source=family:piecewise:warmstart", "warm_start.limit=3",
        "evaluation.source=family:piecewise:heldout", "evaluation.limit=2",
        "schedule.n_discriminator_steps=0", "schedule.n_generator_steps=0",
        "schedule.k_alternating=0"]
    config = str(REPO / "configs/minimal.yaml")
    train(config=config, overrides=sets, run_id="first")
    assert len(list((tmp_path / ".cache" / "heldout").glob("*.json"))) == 1

    def evaluated(*args, **kwargs):
        raise AssertionError("the before evaluation was computed again")

    monkeypatch.setattr(tasks.heldout, "heldout_metrics", evaluated)
    summary = train(config=config, overrides=sets, run_id="second")
    first, second = (RunStore(str(tmp_path / "runs"), r) for r in ("first", "second"))
    assert second.read_json("heldout.json") == first.read_json("heldout.json")
    assert second.read_json("heldout_wrong.json") == first.read_json("heldout_wrong.json")
    tags = Tracker(summary["mlflow_tracking_uri"], "minimal").client.get_run(
        summary["mlflow_run_id"]).data.tags
    assert tags["heldout.before_cache"].startswith(".cache/heldout/")
    # another held-out sample count is another evaluation: computed (and refused here)
    with pytest.raises(Exception, match="computed again"):
        train(config=config, overrides=sets + ["evaluation.samples=2"], run_id="third")


def test_wrong_caught_counts_wrong_solutions_some_valid_test_rejects():
    from configs.sections import SandboxConfig
    from pipeline.execution import sandbox_runner
    from pipeline.heldout import wrong_caught
    from problems import load_problems

    add = next(p for p in load_problems("demo") if p.id == "add")
    wrong = [{"problem_id": "add", "code": "def add(a, b):\n    return a - b"},   # caught
             {"problem_id": "add", "code": "def add(a, b):\n    return a + b + (a == 7)"},
             {"problem_id": "add", "code": "def add(a, b):\n    raise ValueError"},  # caught
             {"problem_id": "gone", "code": "x = 1"}]   # no valid tests for it: not caught
    # each valid test with the earliest chain stage that wrote it
    valid = {"add": {"assert add(1, 2) == 3": 3, "assert add(0, 0) == 0": 1}}
    run = sandbox_runner(SandboxConfig(timeout_s=2.0))
    got = wrong_caught(wrong, valid, {"add": add}, run)
    assert got["wrong_caught"] == 2 / 4
    # a - b fails add(1, 2) only (stage 3); raising fails both, the earliest at stage 1
    assert (got["caught_s1"], got["caught_s3"]) == (1 / 4, 1 / 4)
    assert got["caught_s2"] == got["caught_s4"] == got["caught_s5"] == 0.0
    assert wrong_caught([], valid, {"add": add}, run) == {}
    assert wrong_caught(wrong[:1], {}, {"add": add}, run)["wrong_caught"] == 0.0
    ran = []  # two samples that wrote the same wrong code: each counts, their job runs once
    twice = wrong_caught(wrong + wrong[:1], valid, {"add": add},
                         lambda jobs: ran.extend(jobs) or run(jobs))
    assert twice["wrong_caught"] == 3 / 5 and len(ran) == 3


def test_heldout_samples_at_the_evaluation_temperature_when_set(tiny_model_dir, one_thread):
    """Training may explore at one temperature while pass@1 is measured at another: every
    sampling call of a held-out evaluation uses ``evaluation.temperature`` when it is set."""
    from configs import load_config
    from configs.sections import LoraConfig
    from models.policy import Policies
    from pipeline.heldout import heldout_metrics
    from tasks.heldout import heldout_problems

    class Recording:
        def __init__(self, inner):
            self.inner, self.temperatures = inner, set()

        def tokenizer_for(self, role):
            return self.inner.tokenizer_for(role)

        def adapter_version(self, role):
            return self.inner.adapter_version(role)

        def activate(self, role):
            self.inner.activate(role)

        def sample(self, role, prompts, sampling, seed, *, stop=None):
            self.temperatures.add(sampling.temperature)
            return self.inner.sample(role, prompts, sampling, seed, stop=stop)

    base = [f"model.generator={tiny_model_dir}", "sampling.max_new_tokens=4",
            "sampling.temperature=1.3", "evaluation.source=family:piecewise:heldout",
            "evaluation.limit=1"]
    problems = heldout_problems("family:piecewise:heldout", 1)
    for sets, expected in ((base, {1.3}), (base + ["evaluation.temperature=0.4"], {0.4})):
        cfg = load_config(str(REPO / "configs/minimal.yaml"), sets)
        sampler = Recording(Policies.load(cfg.model, LoraConfig(r=2, alpha=4)))
        rows, metrics = heldout_metrics(sampler, cfg, problems)
        assert sampler.temperatures == expected
        assert cfg.sampling.temperature == 1.3 and metrics["samples"] == len(rows) == 1
