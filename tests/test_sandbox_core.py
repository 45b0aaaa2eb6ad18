"""The sandbox's interface and judging semantics (the attacks live in the other files).

Expected verdicts are what real pytest makes of the same files (the layout of
``sandbox.jailside.layout``; the table of ``sandbox.jailside.verdicts``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from sandbox import (
    STATUSES,
    ExecutionResult,
    Limits,
    Placement,
    Sandbox,
    SandboxError,
    execute,
    execute_many,
    jail,
    job_runner,
    validate_tests,
)

REPO = Path(__file__).resolve().parent.parent
SQUARE = "def square(x):\n    return x * x\n"


def statuses(result: ExecutionResult) -> list[str]:
    return [o.status for o in result.outcomes]


def test_result_shape_and_per_test_outcomes_in_order():
    tests = ["assert square(3) == 9", "assert square(3) == 10", "assert square('a') == 1",
             "for i in range(5):\n    assert square(i) == i * i", "def (:",
             "def test_f():\n    assert square(4) == 16\n"]
    result = execute(SQUARE, tests)
    assert isinstance(result, ExecutionResult)
    assert statuses(result) == ["passed", "failed", "error", "passed", "invalid", "passed"]
    assert (result.passed, result.total) == (3, 6)
    assert all(o.status in STATUSES and o.duration_s >= 0 for o in result.outcomes)
    assert "assert 9 == 10" in result.outcomes[1].message  # pytest's own explanation
    assert "TypeError" in result.outcomes[2].message
    assert [(i.name, i.outcome) for i in result.outcomes[5].items] == [("test_f", "passed")]
    assert result.outcomes[0].items == ()  # module-level asserts: no pytest item
    assert result.isolation in ("bwrap+seccomp+pidns", "bwrap+seccomp", "bwrap",
                                "process+seccomp", "process")
    assert result.attempts == 1


def test_tests_are_independent_of_each_others_failures():
    code = SQUARE + "import os\ndef hang():\n    while True: pass\ndef die():\n    os._exit(3)\n"
    tests = ["assert square(2) == 4", "assert hang()", "assert square(3) == 9", "assert die()",
             "assert square(4) == 16", "assert square(4) == 17", "assert square(5) == 25",
             "import os\nos._exit(0)", "assert square(6) == 36"]
    result = execute(code, tests, timeout_s=0.5)
    assert statuses(result) == ["passed", "timeout", "passed", "crashed", "passed", "failed",
                                "passed", "crashed", "passed"], result.outcomes


def test_def_test_functions_and_expected_exceptions():
    code = ("def parse(s):\n    if not s.isdigit():\n        raise ValueError(s)\n"
            "    return int(s)\n")
    tests = ["def test_parse():\n    assert parse('12') == 12\n",
             "try:\n    parse('x')\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError",
             "def test_wrong():\n    assert parse('1') == 2\n",
             "def helper(v):\n    return parse(v) + 1\nassert helper('4') == 5"]
    assert statuses(execute(code, tests)) == ["passed", "passed", "failed", "passed"]


def test_assert_semantics_match_python():
    code = ("def f(x):\n    if x == 0:\n        raise ZeroDivisionError\n    return x / 2\n"
            "def pair():\n    return (1, 2)\ndef kw(a, b=0):\n    return a - b\n")
    tests = ["assert f(3) == 1.5", "assert abs(f(1) - 0.5) < 1e-9",
             "assert math.isclose(f(0.2), 0.1)",  # math is not imported: NameError
             "import math\nassert math.isclose(f(5), 2.5)",
             "assert f(4) == 2 or f(0) == 0",  # short-circuit: f(0) is never evaluated
             "assert pair() == [1, 2]",        # a tuple is not a list
             "assert kw(5, b=2) == 3 and kw(a=1) == 1", "assert sorted([f(6), f(2)]) == [1, 3]",
             "assert f(3 * 2) == 3", "assert f(0) == 0", "assert len(pair()) == 2 and pair()[1]"]
    assert statuses(execute(code, tests)) == [
        "passed", "passed", "error", "passed", "passed", "failed", "passed", "passed",
        "passed", "error", "passed"]


VALUES = ["None", "True", "0", "-5", "2 ** 70", "10 ** 5000", "1.5", "float('inf')", "-0.0",
          "1 + 2j", "'é\\x00'", "b'\\x00\\xff'", "bytearray(b'ab')", "[1, [2]]", "(1, (2,))",
          "{1, 'a'}", "frozenset({1})", "{'a': [1], (1, 2): {3}}", "[]", "{}", "range(2, 10, 3)",
          "slice(1, None, 2)", "Ellipsis", "Fraction(1, 3)", "Decimal('1.10')",
          "Counter('abca')", "OrderedDict(b=1, a=2)", "deque([1, 2], maxlen=3)",
          "datetime.date(2024, 2, 29)", "pathlib.PurePosixPath('/a/b')"]
IMPORTS = ("import datetime, pathlib\nfrom collections import Counter, OrderedDict, deque\n"
           "from decimal import Decimal\nfrom fractions import Fraction\n")


@pytest.mark.parametrize("expr", VALUES)
def test_returned_values_arrive_with_their_exact_type_and_value(expr):
    code = IMPORTS + f"def value():\n    return {expr}\n"
    test = IMPORTS + (f"def test_v():\n    v, expected = value(), {expr}\n"
                      "    assert type(v) is type(expected)\n    assert v == expected\n"
                      "    if type(v) is not int:  # (repr of 10 ** 5000 is refused by Python)\n"
                      "        assert repr(v) == repr(expected)  # -0.0, maxlen, order...\n")
    wrong = IMPORTS + "def value():\n    return 'something else'\n"
    right, other = execute_many([(code, [test]), (wrong, [test])])
    assert (statuses(right), statuses(other)) == (["passed"], ["failed"]), right.outcomes


def test_shared_structure_is_kept_and_nan_arrives():
    code = ("import math\ndef grid():\n    return [[0] * 2] * 3\n"
            "def pair(x):\n    return [x, x]\ndef nan():\n    return [math.nan]\n")
    tests = ["g = grid()\ng[0][0] = 1\nassert g == [[1, 0]] * 3\n",  # one row, three times
             "xs = [1]\np = pair(xs)\nassert p[0] is p[1] is xs\n",  # the test's own list back
             "import math\nassert math.isnan(nan()[0])\n"]
    assert statuses(execute(code, tests)) == ["passed"] * 3


def test_execute_many_keeps_job_order():
    jobs = [(f"def f():\n    return {i}\n", [f"assert f() == {i}", "assert f() == -1"])
            for i in range(12)]
    results = execute_many(jobs, workers=2)
    assert [r.passed for r in results] == [1] * 12
    assert [r.outcomes[1].status for r in results] == ["failed"] * 12


def test_validate_tests_marks_what_the_reference_passes():
    valid, result = validate_tests(SQUARE, ["assert square(2) == 4", "assert square(2) == 5"])
    assert valid == [True, False] and result.total == 2


def test_a_configs_limits_and_placement_travel_typed_to_the_runner():
    from configs.sections import SandboxConfig

    config = SandboxConfig(timeout_s=0.5, memory_mb=256, workers=1)
    assert config.limits() == Limits(timeout_s=0.5, memory_mb=256)
    assert config.placement() == Placement(workers=1)
    assert SandboxConfig().limits() == Limits()  # the defaults are the sandbox's, not a copy
    run = job_runner(config.limits(), config.placement())
    (result,) = run([("def f():\n    while True: pass\n", ["assert f()"])])
    assert statuses(result) == ["timeout"]
    assert "limit 0.5s" in result.outcomes[0].message
    assert result.limits["timeout_s"] == 0.5 and result.limits["memory_mb"] == 256
    (later,) = execute_many([(SQUARE, ["assert square(2) == 4"])], config.limits(),
                            timeout_s=5.0, workers=1)
    assert later.limits["timeout_s"] == 5.0 and statuses(later) == ["passed"]
    with pytest.raises(ValueError, match="executor"):
        Placement(executor="slurm")


def test_bad_options_and_inputs_raise_or_are_judged():
    with pytest.raises(ValueError):
        execute(SQUARE, ["assert 1"], timeout_s=-1)
    with pytest.raises(ValueError):
        execute(SQUARE, ["assert 1"], isolation="vm")
    result = execute(SQUARE, ["assert square(1) == 1", b"assert 1", None])
    assert statuses(result) == ["passed", "invalid", "invalid"]
    assert statuses(execute(42, ["assert 1"])) == ["error"]  # not code: nothing can pass


def test_without_bubblewrap_it_says_so_and_records_the_weaker_level(monkeypatch):
    monkeypatch.setattr(jail, "_detected", {})
    monkeypatch.setattr(jail, "_bwrap_problem", lambda: "bwrap is not installed")
    with pytest.warns(RuntimeWarning, match="WITHOUT BUBBLEWRAP"):
        assert jail.resolve("auto") == "process"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        assert jail.resolve("auto") == "process"
    with pytest.raises(SandboxError, match="required"):
        jail.resolve("bwrap")


def test_world_readable_asks_files_for_read_and_folders_for_search():
    # A root caller runs bubblewrap as nobody only when everything the jail binds is
    # world-readable; a plain file (the judge's ``py.py``) has no execute bit to ask for.
    import tempfile

    top = Path(tempfile.mkdtemp())
    try:
        (top / "pkg").mkdir()
        (top / "mod.py").write_text("")
        for path, mode in ((top, 0o755), (top / "pkg", 0o755), (top / "mod.py", 0o644)):
            path.chmod(mode)
        assert jail._world_readable(str(top / "mod.py"))
        assert jail._world_readable(str(top / "pkg"))
        (top / "mod.py").chmod(0o640)
        (top / "pkg").chmod(0o754)
        assert not jail._world_readable(str(top / "mod.py"))
        assert not jail._world_readable(str(top / "pkg"))
        (top / "mod.py").chmod(0o644)
        top.chmod(0o700)
        assert not jail._world_readable(str(top / "mod.py"))
    finally:
        top.chmod(0o755)
        for path in (top / "mod.py", top / "pkg"):
            path.unlink() if path.is_file() else path.rmdir()
        top.rmdir()


def test_process_isolation_runs_and_is_recorded():
    with Sandbox(isolation="process", workers=1) as box:
        result = box.execute(SQUARE, ["assert square(3) == 9", "assert square(3) == 8"])
    assert statuses(result) == ["passed", "failed"]
    assert result.isolation.startswith("process")


def test_bwrap_level_is_recorded_where_available():
    if jail._bwrap_problem() is not None:
        pytest.skip("bubblewrap unavailable here")
    assert execute(SQUARE, ["assert square(1) == 1"]).isolation.startswith("bwrap")


def test_a_worker_that_cannot_start_is_a_clear_error(monkeypatch):
    broken = jail.Launch(["/nonexistent/python"], "process", {})
    monkeypatch.setattr(jail, "launch", lambda level: broken)
    with Sandbox(isolation="process", workers=1) as box:
        with pytest.raises(SandboxError, match="cannot start a sandbox worker"):
            box.execute(SQUARE, ["assert square(1) == 1"])


CLI_TESTS = '''\
import pytest
from solution import square

LIMIT = 4
CASES = [(i, i * i) for i in range(LIMIT)]


@pytest.fixture
def offset():
    return 10


@pytest.mark.parametrize("x, want", CASES)
def test_table(x, want):
    assert square(x) == want


def test_fixture(offset):
    assert square(offset) == 100


@pytest.mark.parametrize("x", [2, 3])
def test_wrong(x):
    assert square(x) == x + x


class TestGroup:
    def test_negative(self):
        assert square(-LIMIT) == 16
'''


def test_cli_runs_a_test_file_as_pytest_would(tmp_path):
    (tmp_path / "sol.py").write_text(SQUARE)
    (tmp_path / "test_it.py").write_text(CLI_TESTS)
    argv = [sys.executable, "-m", "sandbox", "run", "--code", str(tmp_path / "sol.py"),
            "--tests", str(tmp_path / "test_it.py")]
    out = subprocess.run([*argv, "--json"], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, out.stderr  # one module, and it did not pass
    data = json.loads(out.stdout)
    (module,) = data["outcomes"]
    assert module["status"] == "failed" and (data["passed"], data["total"]) == (0, 1)
    items = [(item["name"], item["outcome"]) for item in module["items"]]
    assert items == [("test_table[0-0]", "passed"), ("test_table[1-1]", "passed"),
                     ("test_table[2-4]", "passed"), ("test_table[3-9]", "passed"),
                     ("test_fixture", "passed"), ("test_wrong[2]", "passed"),
                     ("test_wrong[3]", "failed"), ("TestGroup::test_negative", "passed")]
    # the same file without the wrong test passes, and the text report names each item
    (tmp_path / "test_it.py").write_text(CLI_TESTS.split("@pytest.mark.parametrize(\"x\", [2")[0])
    text = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "PASSED   " in text.stdout and "test_table[3-9]" in text.stdout
    assert "1/1 test modules passed" in text.stdout


def test_cli_refuses_bad_input_with_status_2(tmp_path):
    (tmp_path / "sol.py").write_bytes(b"\xff\xfe")
    (tmp_path / "t.json").write_text('{"not": "a list"}')
    for code, tests in (("sol.py", "t.json"), ("missing.py", "t.json")):
        out = subprocess.run([sys.executable, "-m", "sandbox", "run", "--code",
                              str(tmp_path / code), "--tests", str(tmp_path / tests)],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and out.stderr.startswith("error: --code"), out.stderr


def _our_workers() -> list[int]:
    """Pids of worker processes (bwrap or python) whose parent is this test process."""
    me, found = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            found.append(int(pid))
    return found


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


def test_a_worker_that_dies_is_replaced_and_the_job_still_judged():
    # Only this box's worker: in a full test session the process has other children (the
    # shared pool of earlier tests, Prefect's test server) that must not be killed.
    others = set(_our_workers())
    with Sandbox(workers=1) as box:
        assert box.execute(SQUARE, ["assert square(2) == 4"]).passed == 1
        before = [pid for pid in _our_workers() if pid not in others]
        assert before
        for pid in before:
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while not all(_gone(pid) for pid in before) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(_gone(pid) for pid in before)  # the worker really is dead
        result = box.execute(SQUARE, ["assert square(3) == 9", "assert square(3) == 1"])
        assert statuses(result) == ["passed", "failed"]
