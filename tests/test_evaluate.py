"""Evaluation: pass@k against hand-computed values, test-side metrics on known tests, and the
evaluate flow end to end (run store, MLflow, summary) under Prefect's test harness."""

from __future__ import annotations

from fractions import Fraction
from math import comb
from pathlib import Path

import pytest

from configs.schema import TrainConfig
from pipeline.evaluation import (
    call_inputs,
    coherence,
    exercised_classes,
    mean_pass_at_k,
    mentioned_classes,
    pass_at_k,
    sample_rows,
    score_tests,
    summarize,
)
from problems import load_problems

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (5, 0, 1, 0.0),
    (5, 2, 1, 2 / 5),               # pass@1 = c / n
    (5, 2, 2, 1 - 3 / 10),          # 1 - C(3,2)/C(5,2)
    (5, 2, 3, 1 - 1 / 10),          # 1 - C(3,3)/C(5,3)
    (5, 2, 4, 1.0),                 # n - c < k: some pick of 4 always holds a pass
    (10, 3, 5, 1 - 21 / 252),       # 1 - C(7,5)/C(10,5)
    (4, 4, 4, 1.0),
])
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_is_stable_for_large_n():
    # C(1000, 100) overflows a float; the product form does not. Exact value by fractions.
    exact = 1 - Fraction(comb(990, 100), comb(1000, 100))
    assert pass_at_k(1000, 10, 100) == pytest.approx(float(exact), rel=1e-12)
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)


def test_pass_at_k_mean_and_errors():
    assert mean_pass_at_k([(4, 1), (4, 4)], 2) == pytest.approx((0.5 + 1.0) / 2)
    assert mean_pass_at_k([(4, 1), (1, 1)], 2) is None  # a problem with fewer samples than k
    for bad in ((3, 4, 1), (3, 1, 4), (3, 1, 0)):
        with pytest.raises(ValueError, match="pass_at_k"):
            pass_at_k(*bad)


def row(pid, j, passed, mode="chain", **test_side):
    out = {"problem_id": pid, "sample_idx": j, "mode": mode, "passed": passed,
           "code_ok": True, "n_baseline": 4, "n_baseline_passed": 4 if passed else 1,
           "generation_s": 1.0, "n_tests": None}
    return out | test_side


def test_summary_metrics_from_rows():
    side = {"n_tests": 4, "n_parsed": 5, "n_dropped": 1, "n_valid": 3, "n_mutants": 6,
            "n_mutants_killed": 3, "n_distinct_inputs": 2, "failure_rate": 0.25,
            "coherence": 0.5, "generator_reward": 0.75, "discriminator_reward": 0.1}
    rows = [row("a", 0, True, **side), row("a", 1, False, **side),
            row("b", 0, False, **side), row("b", 1, False, **side | {"coherence": None}),
            row("a", 0, True, "direct"), row("a", 1, True, "direct"),
            row("b", 0, False, "direct"), row("b", 1, False, "direct")]
    m = summarize(rows, [1, 2])
    assert m["eval/pass_at_1"] == pytest.approx((0.5 + 0.0) / 2)
    assert m["eval/pass_at_2"] == pytest.approx((1.0 + 0.0) / 2)
    assert m["eval/direct_pass_at_1"] == pytest.approx(0.5)
    assert m["eval/test_validity"] == pytest.approx(12 / 16)
    assert m["eval/mutation_kill_rate"] == pytest.approx(0.5)
    assert m["eval/distinct_test_rate"] == pytest.approx(16 / 20)
    assert m["eval/test_drop_rate"] == pytest.approx(4 / 24)
    assert m["eval/coherence"] == pytest.approx(0.5)  # the None sample is left out
    assert m["eval/baseline_pass_rate"] == pytest.approx((4 + 1 + 1 + 1) / 16)
    assert m["eval/problems"] == 2 and m["eval/samples"] == 4
    assert "eval/direct_test_validity" not in m


def test_edge_cases_named_and_tested():
    assert sorted(mentioned_classes(
        "2. Edge cases: an empty list, a single element, duplicates, None input. "
        "Values up to 10^9, may be negative.")) == [
        "duplicates", "empty", "large", "negative", "none", "single"]
    assert mentioned_classes("O(n) time, one pass") == set()
    assert exercised_classes("assert f('') == 0\nassert f('a') == 1", "f") == {"empty", "single"}
    assert exercised_classes("assert f(list(range(5000))) == 1", "f") == {"large"}
    assert exercised_classes("assert g(0) == 1", "f") == set()  # not the entry point
    assert exercised_classes("assert f(", "f") == set()  # unparsable: nothing, no raise
    chain = ["", "Edge cases: empty list, negative numbers.", "", "Handles zero."]
    score, named, hit = coherence(chain, ["assert f([]) == 0", "assert f([3]) == 3"], "f")
    assert (named, hit, score) == (3, 1, pytest.approx(1 / 3))
    assert coherence(["", "", "", ""], ["assert f([]) == 0"], "f")[0] is None
    assert len(set(call_inputs("assert f(1, 2) == 3 and f(1,2) == 3 and f(2, 1) == 3",
                               "f"))) == 2


def test_score_tests_validity_duplicates_mutants_and_coherence():
    """Known discriminator output for the demo 'add' problem, the reference as the code: the
    training pipeline's functions judge every test and the row says what happened."""
    from serving.inference import InferenceResult

    problem = load_problems("demo", ids=["add"])[0]
    texts = ["```python\nassert add(1, 2) == 3\nassert add(1, 1) == 3\n```",
             "```python\nassert add(1, 2) == 3\nassert add(-4, 0) == -4\n```",
             "no tests here", "```python\nassert add(2, 2) == 4\n```", ""]
    chain = ["", "Edge cases: negative numbers and zero.", "", ""]
    result = InferenceResult(problem=problem, sample_idx=0, reasoning_chain=chain,
                             generated_code="", code=problem.reference_solution,
                             code_reason="ok", stage_times=[0.1] * 5, test_texts=texts)
    cfg = TrainConfig()
    scored = score_tests([result], cfg)
    (r,) = sample_rows([result], scored, "test-model")
    # tests: add(1,2)==3, add(1,1)==3 (invalid), add(-4,0)==-4, add(2,2)==4; one duplicate
    assert (r["n_parsed"], r["n_tests"], r["n_valid"]) == (5, 4, 3)
    assert r["n_distinct_inputs"] == 4
    assert r["failure_rate"] == 0.0  # the reference passes every valid test
    # a + b has only a few mutants (at most mutants_per_problem); valid tests kill some
    assert 1 <= r["n_mutants"] <= cfg.rewards.mutants_per_problem and r["n_mutants_killed"] >= 1
    assert (r["n_edge_named"], r["n_edge_tested"], r["coherence"]) == (2, 2, 1.0)
    assert r["mode"] == "chain" and r["model"] == "test-model" and r["code_ok"]


@pytest.mark.slow  # Prefect's test server plus ~40 tiny generate calls: ~30-60 s
def test_evaluate_flow_records_everything(prefect_harness, tiny_model_dir, tmp_path,
                                          monkeypatch):
    from artifacts import RunStore
    from artifacts.tracking import Tracker
    from flows.evaluate import evaluate

    monkeypatch.chdir(tmp_path)  # nothing may be written to the caller's folder
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # Shrunk for wall-clock time: 2 problems x 2 samples, 8 new tokens, 2 mutants.
    out = evaluate(config=str(REPO / "configs/tiny.yaml"), overrides=[
        f"model.generator={tiny_model_dir}", f"artifacts.root={tmp_path / 'runs'}",
        f"tracking.tracking_uri={uri}", "sampling.max_new_tokens=8",
        "rewards.mutants_per_problem=2"], problems="demo", ids=["add", "is_even"], k=[1, 2],
        samples=2, run_id="eval-test")
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags

    with get_client(sync_client=True) as client:  # named like a training run, not at random
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=["evaluation"])))
    assert "eval-test" in [r.name for r in runs], [r.name for r in runs]
    rows = RunStore(str(tmp_path / "runs"), "eval-test").read("evaluations")
    assert len(rows) == 2 * 2 * 2  # problems x samples x (chain, direct)
    assert sorted(set(rows["mode"])) == ["chain", "direct"]
    assert rows[rows["mode"] == "chain"]["n_tests"].notna().all()
    assert rows[rows["mode"] == "direct"]["n_tests"].isna().all()
    run = Tracker(uri, "tiny").client.get_run(out["mlflow_run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["eval.model"] == str(tiny_model_dir)
    for key in ("eval/pass_at_1", "eval/pass_at_2", "eval/direct_pass_at_1",
                "eval/tests_per_sample", "eval/code_ok_rate", "eval/distinct_inputs"):
        assert key in run.data.metrics, key
        assert run.data.metrics[key] == pytest.approx(out["metrics"][key])
    summary = out["summary"]
    assert "pass@1" in summary and "pass@2" in summary and "direct" in summary
    assert "table=evaluations" in summary
    # the chain stages' report: in MLflow and in the printed summary, one row per stage
    for stage in (1, 5):
        assert f"eval/stage_report/s{stage}/bugs_caught" in run.data.metrics
    assert "what each chain stage's tests did" in summary
    table = summary.split("what each chain stage's tests did")[1].splitlines()
    assert [ln.split()[0] for ln in table[3:8]] == ["1", "2", "3", "4", "5"], table
