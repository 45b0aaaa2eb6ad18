"""Messy problem files: every issue in one pass, bad bytes, ``problems.on_invalid``, recorded
repairs, and a bad problem file failing ``flows.train`` before Prefect starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from problem_support import GOOD, REPO, write

from problems import ProblemLoadError, load_problem_set, load_problems
from problems.__main__ import main as problems_main
from problems.loaders import select
from problems.vet import REPAIRS, RUN_RECORD, load_for_run, vet
from sandbox import Limits

PATIENT = Limits(timeout_s=5.0)  # a reference on a busy test machine is not a broken problem


def leetcode(pid: str, signature: str, reference: str, tests: list) -> dict:
    return {"id": pid, "description": f"{pid}.", "function_signature": signature,
            "reference_solution": reference, "baseline_tests": tests, "difficulty": "easy",
            "tags": ["array"]}


# -- every issue of every problem, in one pass ---------------------------------------------------

def test_validate_reports_every_issue_of_a_multi_fault_problem(tmp_path, capsys):
    multi = dict(GOOD, id=42, description=None, baseline_tests="assert add(1, 2) == 3",
                 difficulty=["easy"], tags="math")
    bad_tags = dict(GOOD, id="bad-tags", tags=[1, None])
    both = dict(GOOD, id="", reference_solution="def add(a, b)\n  return a+b")  # id and code
    path = write(tmp_path, "multi.json", [GOOD, multi, bad_tags, both])
    assert problems_main(["validate", str(path), "--no-exec"]) == 1
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.startswith(f"{path}: #1 ")]
    by_field = {line.split(": ")[2]: line for line in lines}
    assert set(by_field) == {"id", "description", "baseline_tests", "difficulty", "tags"}, out
    assert "expected a non-empty string, got integer 42" in by_field["id"]
    assert "is null" in by_field["description"] and "missing" not in by_field["description"]
    assert "expected a list, got string" in by_field["baseline_tests"]
    assert "expected one of easy, medium, hard, got list" in by_field["difficulty"]
    assert "expected a list of strings, got string 'math'" in by_field["tags"]
    assert f"{path}: #2 (bad-tags): tags[0]: expected a string, got integer 1" in out
    assert f"{path}: #2 (bad-tags): tags[1]: expected a string, got null" in out
    assert f"{path}: #3: id: expected a non-empty string, got string ''" in out
    assert f"{path}: #3: reference_solution: does not compile: expected ':' (line 1)" in out
    assert "4 problem(s), 1 ok, 3 with issues (9 issue(s))" in err


def test_missing_and_null_are_told_apart(tmp_path):
    absent = {k: v for k, v in GOOD.items() if k != "reference_solution"}
    null = dict(GOOD, id="null", reference_solution=None, baseline_tests=None)
    issues = load_problem_set(write(tmp_path, "p.json", [absent, null])).issues
    assert [(i.index, i.field, i.reason.split(" (")[0], i.kind) for i in issues] == [
        (0, "reference_solution", "missing field", "missing_field"),
        (1, "reference_solution", "is null", "null_field"),
        (1, "baseline_tests", "is null", "null_field"),
    ]
    assert {i.reason for i in issues if i.index == 1} == {
        "is null (expected a list of tests)", "is null (expected a non-empty string)"}


# -- bytes that are not UTF-8 ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bad.json", "bad.jsonl"])
def test_non_utf8_problem_file_is_a_clean_error_naming_file_and_offset(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b'[{"id": "caf\xe9"}]' if name.endswith(".json") else
                     json.dumps(GOOD).encode() + b'\n{"id": "\xff"}\n')
    offset = path.read_bytes().index(b"\xe9" if name.endswith(".json") else b"\xff")
    proc = subprocess.run([sys.executable, "-m", "problems", "validate", str(path)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "UnicodeDecodeError" not in proc.stderr
    assert f"{path}: not UTF-8 text: byte 0x" in proc.stderr
    assert f"at offset {offset} " in proc.stderr
    with pytest.raises(ProblemLoadError, match=f"offset {offset}"):
        load_problems(path)


def test_sandbox_cli_names_a_non_utf8_code_file_and_refuses_bad_timeouts(tmp_path):
    code = tmp_path / "solution.py"
    code.write_bytes(b"def add(a, b):\n    return a + b  # caf\xe9\n")
    tests = tmp_path / "tests.py"
    tests.write_text("assert add(1, 2) == 3\n")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "sandbox", "run", *args],
                              capture_output=True, text=True, cwd=REPO, timeout=120)

    proc = run("--code", str(code), "--tests", str(tests))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    offset = code.read_bytes().index(b"\xe9")
    assert f"--code {code}: not UTF-8 text: byte 0xe9 at offset {offset} (line 2)" \
        in proc.stderr
    proc = run("--code", str(tests), "--tests", str(code))  # the tests file is named too
    assert proc.returncode == 2 and f"--tests {code}: not UTF-8 text" in proc.stderr
    for bad in ("-1", "0", "nan", "inf", "soon"):
        proc = run("--code", str(tests), "--tests", str(tests), f"--timeout={bad}")
        assert proc.returncode == 2, bad
        assert "argument --timeout" in proc.stderr and bad in proc.stderr, proc.stderr


# -- repairs: named, proven by the reference, never a weaker test ---------------------------------

TWO_SUM = leetcode(
    "two-sum", "def twoSum(self, nums: List[int], target: int) -> List[int]",
    "class Solution:\n  def twoSum(self, nums, target):\n    seen = {}\n"
    "    for i, x in enumerate(nums):\n      if target - x in seen:\n"
    "        return seen[target - x], i\n      seen[x] = i\n",
    [[[2, 7, 11, 15], 9, [0, 1]], [[3, 3], 6, [0, 1]]])


def test_repairs_are_recorded_proven_and_never_weaken(tmp_path):
    sort_colors = leetcode(
        "sort-colors", "def sortColors(self, nums: List[int]) -> None",
        "class Solution:\n  def sortColors(self, nums):\n    nums.sort()\n",
        [[[2, 0, 1], [0, 1, 2]]])
    words = leetcode(
        "longest-word", "def longest(self, words: List[str]) -> str",
        "class Solution:\n  def longest(self, words):\n    return max(words, key=len)\n",
        [["[&quot;a&quot;,&quot;abc&quot;]", "abc"]])
    count = leetcode("count", "def say(self, n: int) -> str",
                     "class Solution:\n  def say(self, n):\n    return str(n) * 2\n",
                     [[12, 1212]])
    wrong = leetcode(  # the recorded answer is wrong, not its format: skipped, not "repaired"
        "wrong", "def pair(self, n: int) -> List[int]",
        "class Solution:\n  def pair(self, n):\n    return n, n + 1\n", [[1, [2, 1]]])
    cut = leetcode(  # a value cut off in the recording: nothing to repair from
        "cut", "def total(self, grid: List[List[int]]) -> int",
        "class Solution:\n  def total(self, grid):\n    return sum(map(sum, grid))\n",
        [["[[1,2]", 3]])
    path = write(tmp_path, "lc.json", [TWO_SUM, sort_colors, words, count, wrong, cut])
    report = vet(path, limits=PATIENT)
    c = report.counts()
    assert (c["total"], c["valid"], c["repaired"], c["skipped"]) == (6, 4, 4, 2), c
    assert c["repaired_by"] == {"tuple_answers_recorded_as_lists": 1, "in_place_answers": 1,
                                "html_escaped_values": 1, "str_answers_recorded_unquoted": 1}
    assert c["skipped_by"] == {"wrong_answer": 1, "truncated_values": 1}
    by_id = {p.id: p for p in report.problems}
    assert by_id["two-sum"].baseline_tests == ("assert twoSum([2, 7, 11, 15], 9) == (0, 1)",
                                               "assert twoSum([3, 3], 6) == (0, 1)")
    assert by_id["longest-word"].baseline_tests == ("assert longest(['a', 'abc']) == 'abc'",)
    assert by_id["count"].baseline_tests == ("assert say(12) == '1212'",)
    [in_place] = by_id["sort-colors"].baseline_tests
    assert in_place.endswith("assert answer == [0, 1, 2]")
    for record in report.repairs:  # each names its rule, the test before and after
        assert set(record.repairs) <= {r.name for r in REPAIRS} and record.before != record.after
    from sandbox import execute

    # still exact: wrong answers fail every repaired test (no-op in place, the list form of the
    # tuple answer, a wrong string)
    fails = {"sort-colors": "def sortColors(nums):\n    pass\n",
             "two-sum": "def twoSum(nums, target):\n    return [0, 1]\n",
             "longest-word": "def longest(words):\n    return 'a'\n",
             "count": "def say(n):\n    return 1212\n"}
    for pid, code in fails.items():
        p = by_id[pid]
        assert execute(p.program(code), list(p.baseline_tests), limits=PATIENT).passed == 0, pid
    reasons = {s.problem_id: s for s in report.skipped}
    assert "assert (1, 2) == " in reasons["wrong"].issues[0].reason  # pytest's own message
    json.dumps(report.to_dict())  # what the run records


# -- problems.on_invalid --------------------------------------------------------------------------

def test_on_invalid_fail_lists_the_bad_problems_and_names_the_setting(tmp_path):
    no_tests = dict(GOOD, id="no-tests", baseline_tests=[])
    path = write(tmp_path, "p.json", [GOOD, no_tests, dict(GOOD, id="null-desc",
                                                           description=None)])
    t0 = time.monotonic()
    with pytest.raises(ProblemLoadError) as info:
        load_for_run(path, on_invalid="fail")
    message = str(info.value)
    assert "#1 (no-tests): no_baseline_tests" in message
    assert "#2 (null-desc): null_field: description: is null" in message
    assert "problems.on_invalid=fail" in message and "problems.on_invalid=skip" in message
    assert time.monotonic() - t0 < 10  # structural failures: no reference was run
    # a reference failing its own test is listed too (after running it)
    bad_ref = dict(GOOD, id="bad-ref", reference_solution="def add(a, b):\n    return a - b\n")
    path = write(tmp_path, "q.json", [GOOD, bad_ref])
    with pytest.raises(ProblemLoadError, match=r"(?s)#1 \(bad-ref\): wrong_answer: "
                                               r"baseline_tests\[0\]: reference fails it.*"
                                               r"problems\.on_invalid=skip"):
        load_for_run(path, on_invalid="fail", limits=PATIENT)
    skipped = load_for_run(path, on_invalid="skip", limits=PATIENT, quiet=True)
    assert [p.id for p in skipped] == ["add"]
    with pytest.raises(ProblemLoadError, match="problems.ids names skipped problem"):
        load_for_run(path, on_invalid="skip", ids=["bad-ref"], limits=PATIENT, quiet=True)


def test_a_run_checks_only_the_references_it_uses(tmp_path):
    """``load_for_run`` runs references in the run's order until ``limit`` valid ones: a bad
    reference past them is not run (counted ``unchecked``); within them, ``skip`` takes the
    next valid problem and ``fail`` names the bad one."""
    bad = "def add(a, b):\n    return a - b\n"
    rows = [dict(GOOD, id=f"p{i}", reference_solution=bad if i in (1, 17) else
                 GOOD["reference_solution"]) for i in range(20)]
    path = write(tmp_path, "r.json", rows)
    first = load_for_run(path, on_invalid="fail", limit=1, limits=PATIENT)
    assert [p.id for p in first] == ["p0"]
    c = first.report.counts()
    assert (c["valid"], c["skipped"], c["unchecked"]) == (1, 0, 19), c
    with pytest.raises(ProblemLoadError, match=r"#1 \(p1\): wrong_answer"):
        load_for_run(path, on_invalid="fail", limit=3, limits=PATIENT)
    three = load_for_run(path, on_invalid="skip", limit=3, limits=PATIENT, quiet=True)
    assert [p.id for p in three] == ["p0", "p2", "p3"]
    c = three.report.counts()
    assert [s.problem_id for s in three.report.skipped] == ["p1"]  # p17 never ran
    assert c["unchecked"] > 0 and c["valid"] + c["skipped"] + c["unchecked"] == 20, c
    assert "not run (not used)" in three.report.summary()
    # the whole file, as ``vet`` sees it, selects the same problems
    every = load_for_run(path, on_invalid="skip", limits=PATIENT, quiet=True)
    assert [p.id for p in every][:3] == ["p0", "p2", "p3"]
    assert [s.problem_id for s in every.report.skipped] == ["p1", "p17"]
    assert every.report.counts()["unchecked"] == 0


def test_a_run_of_part_of_the_seed_file_selects_what_vetting_all_of_it_does(shared_data):
    source = shared_data / "leetcode_formatted.json"
    whole = load_for_run(source, on_invalid="skip", limits=PATIENT, quiet=True).report
    for curriculum in (False, True):
        part = load_for_run(source, on_invalid="skip", limit=25, curriculum=curriculum,
                            limits=PATIENT, quiet=True)
        expected = select(whole.problems, limit=25, curriculum=curriculum)
        assert [p.id for p in part] == [p.id for p in expected]
        assert [p.baseline_tests for p in part] == [p.baseline_tests for p in expected]
        c, w = part.report.counts(), whole.counts()
        assert c["unchecked"] > 0 and c["valid"] + c["skipped"] + c["unchecked"] == w["total"]
        assert c["valid"] < w["valid"] and c["skipped"] < w["skipped"], (c, w)


def test_on_invalid_is_a_checked_setting():
    from configs import ConfigError, load_config

    assert load_config("configs/minimal.yaml", []).problems.on_invalid == "fail"
    with pytest.raises(ConfigError, match="problems.on_invalid='maybe': must be fail or skip"):
        load_config("configs/minimal.yaml", ["problems.on_invalid=maybe"])


def test_skip_on_the_seed_leetcode_file_counts_and_records(shared_data, tmp_path, capsys):
    from artifacts.store import RunStore
    from artifacts.tracking import Tracker
    from lifecycle.context import record_problem_report

    source = shared_data / "leetcode_formatted.json"
    problems = load_for_run(source, on_invalid="skip", limits=PATIENT)
    report = problems.report
    c = report.counts()
    print(json.dumps(c))
    assert c["total"] == 720 and c["valid"] + c["skipped"] == 720
    assert c["valid"] == len(problems) >= 300
    assert c["skipped_by"]["no_baseline_tests"] >= 100
    for kind in ("leetcode_node_types", "truncated_values", "entry_point_not_defined",
                 "bad_signature", "bad_test_shape"):
        assert c["skipped_by"].get(kind, 0) >= 5, (kind, c)
    for rule in ("tuple_answers_recorded_as_lists", "html_escaped_values", "in_place_answers"):
        assert c["repaired_by"].get(rule, 0) >= 1, (rule, c)
    assert f"problems: {source}: 720 problem(s): {c['valid']} valid" in capsys.readouterr().out
    two_sum = next(p for p in problems if p.id == "two-sum")
    assert two_sum.baseline_tests[0].endswith("== (0, 1)")
    assert all(s.issues and all(i.reason for i in s.issues) for s in report.skipped)
    assert {s.problem_id for s in report.skipped}.isdisjoint(p.id for p in problems)

    # recorded in the run store and as an MLflow artifact
    tracker = Tracker(f"sqlite:///{tmp_path}/mlflow.db", "messy",
                      artifact_location=str(tmp_path / "mlartifacts"))
    run = tracker.client.create_run(tracker.experiment_id).info.run_id
    ctx = SimpleNamespace(problems=problems, store=RunStore(str(tmp_path / "runs"), "r1"),
                          tracker=tracker, mlflow_run_id=run)
    record_problem_report(ctx)
    assert "recorded in" in capsys.readouterr().out
    stored = ctx.store.read_json(RUN_RECORD)
    assert stored["counts"] == json.loads(json.dumps(c))
    assert len(stored["skipped"]) == c["skipped"] and len(stored["valid_ids"]) == c["valid"]
    entry = next(s for s in stored["skipped"] if s["id"] == "add-two-numbers")
    assert entry["kind"] == "leetcode_node_types" and "ListNode" in entry["issues"][0]["reason"]
    logged = json.loads(Path(tracker.client.download_artifacts(
        run, RUN_RECORD, str(tmp_path / "dl"))).read_text())
    assert logged == stored


# -- flows.train: problems are checked before Prefect starts --------------------------------------

@pytest.mark.parametrize("content", [b'[{"id": "caf\xe9"}]', b"no-tests"])
def test_bad_problem_file_fails_train_before_prefect_starts(tmp_path, content):
    if content == b"no-tests":
        content = json.dumps([GOOD, dict(GOOD, id="no-tests", baseline_tests=[])]).encode()
    path = tmp_path / "problems.json"
    path.write_bytes(content)
    home = tmp_path / "prefect"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "flows.train", "--config", "configs/minimal.yaml",
                           "--artifacts-root", str(tmp_path / "runs"),
                           "--set", f"problems.source={path}"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and str(path) in proc.stderr
    if b"no-tests" in content:
        assert "#1 (no-tests)" in proc.stderr and "problems.on_invalid=skip" in proc.stderr
    # Prefect never started: no temporary server, so no database in PREFECT_HOME, no run
    assert not (home / "prefect.db").exists()
    assert not (tmp_path / "runs").exists()
    assert "Prefect" not in proc.stdout + proc.stderr
