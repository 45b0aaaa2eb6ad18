"""Problem loading: every source format, every structural validation error, selection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from problem_support import GOOD, REPO, write

from problems import Problem, ProblemLoadError, load_problem_set, load_problems, select


def run_ns(problem: Problem, code: str) -> dict:
    ns: dict = {}
    exec(problem.program(code), ns)  # trusted reference code only
    return ns


def test_demo_set_is_rich_and_clean() -> None:
    problem_set = load_problem_set("demo")
    assert problem_set.issues == []
    problems = problem_set.problems
    assert len(problems) >= 30
    counts = {d: sum(p.difficulty == d for p in problems) for d in ("easy", "medium", "hard")}
    assert all(n > 0 for n in counts.values()), counts
    assert all(len(p.baseline_tests) >= 4 for p in problems)
    two_sum = next(p for p in problems if p.id == "two_sum")
    assert two_sum.entry_point == "two_sum"
    for p in problems:  # every reference passes its own tests (trusted code: plain exec)
        ns = run_ns(p, p.reference_solution)
        for test in p.baseline_tests:
            exec(test, ns)


def test_seed_object_format_with_assert_strings(tmp_path: Path) -> None:
    path = write(tmp_path, "p.json", {"problems": [GOOD]})
    [p] = load_problems(path)
    assert (p.id, p.entry_point, p.difficulty, p.tags) == ("add", "add", "easy", ("math",))
    assert p.baseline_tests == tuple(GOOD["baseline_tests"])


def test_bare_list_with_leetcode_class_and_list_tests(tmp_path: Path) -> None:
    record = {
        "id": "two-sum", "description": "d", "difficulty": "Easy", "tags": [],
        "function_signature": "def twoSum(self, nums: List[int], target: int) -> List[int]",
        "reference_solution": (
            "class Solution:\n  def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
            "    seen = {}\n    for i, n in enumerate(nums):\n"
            "      if target - n in seen:\n        return [seen[target - n], i]\n"
            "      seen[n] = i\n"),
        "baseline_tests": [[[2, 7, 11, 15], 9, [0, 1]], [[3, 3], 6, [0, 1]]],
    }
    [p] = load_problems(write(tmp_path, "lc.json", [record]))
    assert p.entry_point == "twoSum"
    assert p.function_signature == "def twoSum(nums: List[int], target: int) -> List[int]:"
    assert p.baseline_tests[0] == "assert twoSum([2, 7, 11, 15], 9) == [0, 1]"
    assert p.difficulty == "easy"
    ns = run_ns(p, p.reference_solution)  # typing names resolve through the preamble
    for test in p.baseline_tests:
        exec(test, ns)


def test_jsonl_and_parquet_round_trip(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    problems = load_problems("demo", limit=5)
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("\n".join(json.dumps(p.to_row()) for p in problems) + "\n")
    parquet = tmp_path / "p.parquet"
    pq.write_table(pa.Table.from_pylist([p.to_row() for p in problems]), parquet)
    for path in (jsonl, parquet):
        loaded = load_problems(path)
        assert [p.id for p in loaded] == [p.id for p in problems]
        assert loaded[0].baseline_tests == problems[0].baseline_tests
        assert loaded[0].reference_solution == problems[0].reference_solution


def test_humaneval_ships_164_runnable_problems() -> None:
    problems = load_problems("humaneval")
    assert len(problems) == 164
    by_id = {p.id: p for p in problems}
    he0 = by_id["HumanEval/0"]
    assert he0.entry_point == "has_close_elements"
    assert "from typing import List" in he0.preamble
    assert all(t.startswith("assert ") for t in he0.baseline_tests)
    assert sum(len(p.baseline_tests) > 1 for p in problems) > 100  # split per assert
    for p in problems[:20]:
        ns = run_ns(p, p.reference_solution)
        for test in p.baseline_tests:
            exec(test, ns)


@pytest.mark.parametrize("mutate, field, reason", [
    (lambda r: r.pop("reference_solution"), "reference_solution", "missing field"),
    (lambda r: r.pop("baseline_tests"), "baseline_tests", "missing field"),
    (lambda r: r.update(reference_solution="def add(a, b)\n  return a+b"),
     "reference_solution", "does not compile"),
    (lambda r: r.update(reference_solution="def plus(a, b):\n    return a + b\n"),
     "reference_solution", "entry point 'add' is not defined"),
    (lambda r: r.update(baseline_tests=["assert add(1, 2) = 3"]),
     "baseline_tests[0]", "not runnable Python"),
    (lambda r: r.update(baseline_tests=[[1, 2]]), "baseline_tests[0]",
     "expected 2 argument(s) and the expected value (3 items), got 2"),
    (lambda r: r.update(baseline_tests=[]), "baseline_tests", "no baseline tests"),
    (lambda r: r.update(baseline_tests="assert add(1, 2) == 3"), "baseline_tests",
     "expected a list"),
    (lambda r: r.update(function_signature="# Function signature not found"),
     "function_signature", "not a Python function signature"),
    (lambda r: r.update(difficulty="trivial"), "difficulty", "is not easy, medium or hard"),
    (lambda r: r.update(description=""), "description", "expected a non-empty string"),
])
def test_each_validation_error_is_named(tmp_path: Path, mutate, field, reason) -> None:
    bad = dict(GOOD, id="bad")
    mutate(bad)
    path = write(tmp_path, "mixed.json", {"problems": [GOOD, bad]})
    problem_set = load_problem_set(path)
    assert [p.id for p in problem_set.problems] == ["add"]
    [issue] = [i for i in problem_set.issues if i.field == field]
    assert reason in issue.reason
    assert (issue.index, issue.problem_id) == (1, "bad")
    assert str(path) in str(issue)
    with pytest.raises(ProblemLoadError) as info:  # strict loading never half-succeeds
        load_problems(path)
    assert f"#1 (bad): {field}: " in str(info.value)
    with pytest.warns(UserWarning, match="skipped 1 problem issue"):
        assert [p.id for p in load_problems(path, strict=False)] == ["add"]


def test_duplicate_ids_and_bad_files(tmp_path: Path) -> None:
    problem_set = load_problem_set(write(tmp_path, "dup.json", [GOOD, GOOD]))
    assert [i.reason for i in problem_set.issues] == ["duplicate of problem #0"]
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ProblemLoadError, match="broken.json: not valid JSON"):
        load_problems(tmp_path / "broken.json")
    with pytest.raises(ProblemLoadError, match="expected a list of problems"):
        load_problems(write(tmp_path, "obj.json", {"items": []}))
    with pytest.raises(ProblemLoadError, match="no such file"):
        load_problems(tmp_path / "missing.json")
    with pytest.raises(ProblemLoadError, match="unknown problem file type '.csv'"):
        (tmp_path / "p.csv").write_text("x")
        load_problems(tmp_path / "p.csv")
    (tmp_path / "bad.jsonl").write_text(json.dumps(GOOD) + "\n{oops\n")
    with pytest.raises(ProblemLoadError, match="bad.jsonl:2: not valid JSON"):
        load_problems(tmp_path / "bad.jsonl")


def test_selection_ids_limit_curriculum() -> None:
    problems = load_problems("demo")
    ordered = select(problems, curriculum=True)
    ranks = ["easy", "medium", "hard"]
    assert [ranks.index(p.difficulty) for p in ordered] == sorted(
        ranks.index(p.difficulty) for p in problems)
    assert [p.id for p in select(problems, ids=["two_sum", "add"])] == ["two_sum", "add"]
    assert len(select(problems, limit=3)) == 3
    with pytest.raises(ProblemLoadError, match="unknown problem id"):
        select(problems, ids=["no_such_problem"])


def test_real_seed_files_load(shared_data: Path) -> None:
    for name in ("function_problems.json", "example_problems.json"):
        problem_set = load_problem_set(shared_data / name)
        assert problem_set.issues == [] and len(problem_set.problems) == 5


def test_real_leetcode_mess_is_named(shared_data: Path) -> None:
    problem_set = load_problem_set(shared_data / "leetcode_formatted.json")
    assert len(problem_set.problems) > 400
    reasons = {i.reason.split(":")[0] for i in problem_set.issues}
    assert "no baseline tests" in reasons
    assert "not a Python function signature" in reasons
    assert any(r.startswith("expected 2 argument(s)") for r in reasons)
    assert all(i.problem_id for i in problem_set.issues)


def test_validate_cli_structural(tmp_path: Path) -> None:
    bad = dict(GOOD, id="bad", reference_solution="def nope(): pass")
    path = write(tmp_path, "p.json", [GOOD, bad])
    proc = subprocess.run([sys.executable, "-m", "problems", "validate", str(path),
                           "--no-exec"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1
    assert f"{path}: #1 (bad): reference_solution: entry point 'add' is not defined" \
        in proc.stdout
    assert "2 problem(s), 1 ok, 1 with issues" in proc.stderr
    ok = subprocess.run([sys.executable, "-m", "problems", "validate", "demo", "--no-exec"],
                        capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0, ok.stdout + ok.stderr
