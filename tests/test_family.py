"""The procedural ``piecewise`` family: disjoint splits, references that pass their suites, an
edge path only the hidden suite exercises, determinism, and loading through the loader."""

from __future__ import annotations

import math

import pytest

from problems import load_problems
from problems.family import (
    SPLITS,
    WARM_EDGE_MISS,
    WARM_EDGE_TEST,
    Params,
    all_params,
    edge_tests,
    family_records,
    hidden_tests,
    params_of,
    problem_id,
    split_params,
    warm_targets,
)


def _passes(code: str, tests: list[str], preamble: str = "") -> list[bool]:
    """Each test's verdict on ``preamble + code`` (the family's own code: run in-process)."""
    out = []
    for test in tests:
        env: dict = {}
        exec(preamble + code, env)  # noqa: S102 - the family's own generated reference
        try:
            exec(test, env)  # noqa: S102
            out.append(True)
        except AssertionError:
            out.append(False)
    return out


def test_splits_are_disjoint_and_cover_every_combination():
    keys = {s: {p.key for p in split_params(s)} for s in SPLITS}
    assert sum(len(k) for k in keys.values()) == len(all_params()) == 1730
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1:]:
            assert not keys[a] & keys[b], (a, b)
    # shares as designed (50/30/20 by a hash): within 4 binomial sigmas of the target
    n = len(all_params())
    for split, share in (("warmstart", 0.5), ("train", 0.3), ("heldout", 0.2)):
        assert abs(len(keys[split]) - n * share) < 4 * math.sqrt(n * share * (1 - share)), split


def test_deterministic_by_parameters():
    assert family_records("family:piecewise:heldout") == family_records("family:piecewise:heldout")
    p = split_params("train")[0]
    assert params_of(problem_id(p)) == p
    assert Params(3, 4, 0, "zero").name == Params(3, 4, 0, "zero").name


@pytest.mark.parametrize("split", SPLITS)
def test_references_pass_baseline_and_hidden_suites_and_only_hidden_tests_the_edge(split):
    records = {r["id"]: r for r in family_records(f"family:piecewise:{split}")}
    for p in split_params(split):
        rec, hidden = records[problem_id(p)], hidden_tests(problem_id(p))
        assert rec["baseline_tests"] == [p.test(x) for x in p.main_inputs()]
        pre = rec["preamble"]
        assert all(_passes(rec["reference_solution"], rec["baseline_tests"] + hidden, pre))
        # the guard-less code passes every baseline test and fails every edge test
        no_guard = p.code(with_guard=False)
        assert all(_passes(no_guard, rec["baseline_tests"], pre))
        assert not any(_passes(no_guard, edge_tests(problem_id(p)), pre))
        # the warm start's written tests: valid on the reference; the edge one catches it
        assert all(_passes(rec["reference_solution"],
                           [p.written_test(), p.written_test(edge=True)], pre))
        assert not any(_passes(no_guard, [p.written_test(edge=True)], pre))
        assert not set(rec["baseline_tests"]) & set(edge_tests(problem_id(p)))


def test_loader_reads_a_split_and_names_a_bad_spec():
    held = load_problems("family:piecewise:heldout")
    assert len(held) == len(split_params("heldout"))
    assert all(p.id.startswith("piecewise-") and "split:heldout" in p.tags for p in held)
    assert held[0].baseline_tests and held[0].entry_point in held[0].reference_solution
    both = load_problems("family:piecewise", limit=3)
    assert [p.id for p in both] == [problem_id(p) for p in split_params("warmstart")[:3]]
    from problems import ProblemLoadError

    with pytest.raises(ProblemLoadError, match="family:<name>"):
        load_problems("family:piecewise:test")
    with pytest.raises(ProblemLoadError, match="family:<name>"):
        load_problems("family:nosuch")
    with pytest.raises(ValueError, match="not a piecewise family problem id"):
        hidden_tests("two-sum")


def test_warm_targets_are_imperfect_as_designed():
    warm = split_params("warmstart")
    targets = [warm_targets(problem_id(p)) for p in warm]
    missing = sum("if " not in code for code, _ in targets)
    with_edge = sum(len(tests) > 1 for p, (_, tests) in zip(warm, targets,
                                                                                strict=True))
    n = len(warm)
    for count, share in ((missing, WARM_EDGE_MISS), (with_edge, WARM_EDGE_TEST)):
        assert abs(count - n * share) < 4 * math.sqrt(n * share * (1 - share)), (count, share)
    # every warm target is right on the main path; a code without the guard is still wrong
    for p, (code, tests) in zip(warm[:50], targets[:50], strict=True):
        assert all(_passes(p.code(), tests, p.preamble()))
        assert all(_passes(code, [p.test(x) for x in p.main_inputs()], p.preamble()))


def test_ideal_targets_have_the_guard_and_the_edge_test():
    for p in split_params("warmstart")[:100]:
        code, tests = warm_targets(problem_id(p), ideal=True)
        assert code == p.code() and tests == [p.written_test(), p.written_test(edge=True)]
        assert all(_passes(code, [p.test(x) for x in (*p.main_inputs(), *p.edge_inputs())],
                           p.preamble()))

def test_heldout_sources_may_not_be_trained_on():
    from configs import ConfigError, load_config
    from configs.schema import check_learnable

    base = ["evaluation.source=family:piecewise:heldout"]
    for clash in ("problems.source=family:piecewise:heldout",
                  "warm_start.source=family:piecewise", "problems.source=family:piecewise"):
        with pytest.raises(ConfigError, match="the held-out problems would be trained on"):
            check_learnable(load_config("configs/tiny.yaml", [*base, clash]))
    check_learnable(load_config("configs/tiny.yaml", base))  # the default splits are disjoint


def test_evaluation_judges_family_problems_on_their_hidden_suite():
    from pipeline.heldout import hidden_problem

    held = load_problems("family:piecewise:heldout", limit=2)
    for p in held:
        judged = hidden_problem(p)
        assert list(judged.baseline_tests) == hidden_tests(p.id)
        assert set(edge_tests(p.id)) <= set(judged.baseline_tests)
        assert not set(edge_tests(p.id)) & set(p.baseline_tests)  # training never sees them
    demo = load_problems("demo", limit=1)[0]
    assert hidden_problem(demo) is demo


def test_warm_start_fits_the_family_targets_not_the_references():
    from pipeline.warmstart import chain_targets

    p = load_problems("family:piecewise:warmstart", limit=40)
    missing = [q for q in p if "if " not in chain_targets(q)[0][-1]]
    assert missing, "some warm-start codes lack the guard by design"
    q = missing[0]
    texts, tests = chain_targets(q)
    assert q.reference_solution.strip() not in texts[-1] and len(tests) == 5
    demo = load_problems("demo", limit=1)[0]
    texts, tests = chain_targets(demo)
    assert demo.reference_solution.strip() in texts[-1]
    assert tests == [list(demo.baseline_tests)] * 5
