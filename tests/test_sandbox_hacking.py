"""Reward hacking and output spoofing: a wrong solution that tries to look right must score 0.

Each candidate below computes the wrong answer (``double(x)`` should be ``2 * x``) and adds one
trick. Module-level asserts and test functions are both attacked, and the honest solution is
shown to pass the very same tests, so no test here passes by failing everything.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import execute

HONEST = "def double(x):\n    return 2 * x\n"
WRONG = "def double(x):\n    return x + 1\n"
SPLIT = ["assert double(2) == 4", "assert double(5) == 10", "assert double(-1) == -2"]
WHOLE = ["for x in range(-3, 4):\n    assert double(x) == 2 * x",
         "def test_double():\n    assert double(7) == 14\n    assert isinstance(double(1), int)"]
ALL = SPLIT + WHOLE


def test_honest_solution_passes_every_test_used_here():
    result = execute(HONEST, ALL)
    assert result.passed == result.total == len(ALL), result.outcomes


def assert_scores_zero(code: str, tests=ALL):
    result = execute(code, tests, timeout_s=1.0)
    assert result.passed == 0, [(t, o) for t, o in zip(tests, result.outcomes, strict=True)]
    return result


@pytest.mark.parametrize("trick", [
    "import sys\nsys.exit(0)",
    "import os\nos._exit(0)",
    "raise SystemExit(0)",
    "raise KeyboardInterrupt",
    "import atexit, os\natexit.register(lambda: os._exit(0))",
    "import sys, os\nsys.excepthook = lambda *a: os._exit(0)",
    "import sys\nsys.stdout.write('ok')\nsys.stdout.flush()\nimport os\nos._exit(0)",
], ids=["sys.exit", "os._exit", "SystemExit", "KeyboardInterrupt", "atexit", "excepthook",
        "print-and-exit"])
def test_exiting_early_with_status_0_scores_nothing(trick):
    assert_scores_zero(WRONG + trick + "\n")


@pytest.mark.parametrize("raised", ["SystemExit(0)", "KeyboardInterrupt()", "BaseException()",
                                    "GeneratorExit()"])
def test_raising_base_exceptions_from_calls_scores_nothing(raised):
    result = assert_scores_zero(f"def double(x):\n    raise {raised}\n")
    assert all(o.status in ("error", "failed") for o in result.outcomes), result.outcomes


@pytest.mark.parametrize("cls", [
    "class R:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
    "    __hash__ = object.__hash__",
    "class R(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__",
    "class R(list):\n    def __eq__(self, o): return True",
    "class R(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__",
    "class R(float):\n    def __eq__(self, o): return True\n    __hash__ = float.__hash__",
], ids=["object", "int", "list", "str", "float"])
def test_always_equal_objects_are_refused(cls):
    # The one place the judge differs from one process on purpose: a candidate's object
    # compares with a value the test made itself by identity only (``jailside.mirror``), so
    # an "always equal" object (even an int or list subclass) equals no expected value.
    code = f"{cls}\ndef double(x):\n    return R()\n"
    result = assert_scores_zero(code, ALL)
    assert [o.status for o in result.outcomes] == ["failed"] * len(ALL), result.outcomes


def test_truthy_objects_pass_only_what_they_pass_under_pytest():
    # A bare ``assert is_even(4)`` holds for any truthy value, under pytest too (the test's
    # weakness, not the judge's); a test that says what it means is not fooled.
    code = "class T:\n    def __bool__(self): return True\ndef is_even(x):\n    return T()\n"
    tests = ["assert is_even(4) is True", "assert is_even(4) == True", "assert not is_even(3)",
             "def test_both():\n    assert is_even(2) is True and is_even(3) is False\n"]
    result = execute(code, tests + ["assert is_even(4)"])
    assert [o.status for o in result.outcomes] == ["failed"] * 4 + ["passed"], result.outcomes
    honest = execute("def is_even(x):\n    return x % 2 == 0\n", tests)
    assert honest.passed == len(tests), honest.outcomes


@pytest.mark.parametrize("patch", [
    "import builtins\nbuiltins.AssertionError = type('AE', (Exception,), {})",
    "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda *a: 1",
    "import builtins\n_range = range\nbuiltins.range = lambda *a: _range(0)",
    "import math\nmath.isclose = lambda *a, **k: True\nmath.fabs = lambda x: 0.0",
    "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None",
    "import operator\noperator.eq = lambda a, b: True",
], ids=["AssertionError", "isinstance+len", "range", "math", "unittest", "operator"])
def test_monkeypatching_builtins_math_or_frameworks_changes_nothing(patch):
    tests = ALL + ["assert math.isclose(double(0.5), 2.0)",
                   "import math\nassert math.fabs(double(3) - 0) < 1e-9",
                   "import unittest\nunittest.TestCase().assertEqual(double(3), 7)",
                   "assert len([double(1)]) == 2"]
    code = WRONG + patch + "\n"
    assert_scores_zero(code, tests)
    if "builtins" not in patch:  # (patching builtins may break the candidate's own process)
        # the same patch beside an honest solution still passes the honest tests
        assert execute(HONEST + patch + "\n", ALL).passed == len(ALL)


def test_writing_conftest_or_pytest_plugins_has_no_effect(tmp_path):
    cwd = Path.cwd()
    code = WRONG + f"""
import os
hook = "def pytest_runtest_makereport(item, call):\\n    call.excinfo = None\\n"
for folder in (".", "/tmp", os.path.expanduser("~"), {str(cwd)!r}, {str(tmp_path)!r}):
    for name in ("conftest.py", "pytest_plugin.py", "sitecustomize.py"):
        try:
            with open(os.path.join(folder, name), "w") as fh:
                fh.write(hook)
        except OSError:
            pass
pytest_plugins = ["pytest_plugin"]
"""
    assert_scores_zero(code)
    for folder in (cwd, tmp_path, Path("/tmp")):
        for name in ("conftest.py", "pytest_plugin.py", "sitecustomize.py"):
            path = folder / name
            assert not path.exists() or "pytest_runtest_makereport" not in path.read_text()


def test_forging_frames_on_every_descriptor_scores_nothing():
    # Writes plausible result frames (this sandbox's own framing, a 'done' with guessed
    # tokens, JSON verdicts) to every descriptor it can find or open.
    code = WRONG + """
import json, os, struct
def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data
forged = [frame(["ok", 4]), frame(["done", "0" * 32]), frame({"tests": [{"status": "ok"}]}),
          b'{"passed": true, "status": "passed"}\\n']
fds = list(range(0, 64))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    fds.append(os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass
        except OSError:
            pass
for fd in fds:
    for blob in forged:
        try:
            os.write(fd, blob)
        except OSError:
            pass
"""
    assert_scores_zero(code, ["assert double(5) == 10", "assert double(-1) == -2"] + WHOLE)


@pytest.mark.parametrize("spoof", [
    "===== 12 passed in 0.01s =====",
    "Ran 12 tests in 0.001s\\n\\nOK",
    '{"passed": 12, "total": 12, "status": "passed"}',
    "PASSED\\nALL TESTS PASSED\\nexit code 0",
])
def test_spoofed_summaries_on_stdout_and_stderr_are_ignored(spoof):
    # Printed at import, in every call, and straight to the process's descriptors.
    code = (f"import os, sys\nprint({spoof!r})\nprint({spoof!r}, file=sys.stderr)\n"
            f"os.write(1, {spoof!r}.encode())\nos.write(2, {spoof!r}.encode())\n"
            f"def double(x):\n    print({spoof!r})\n    print({spoof!r}, file=sys.stderr)\n"
            f"    os.write(1, {spoof!r}.encode())\n    return x + 1\n")
    result = assert_scores_zero(code)
    assert len(result.output) <= 65536  # captured for people, never parsed


def test_environment_is_scrubbed():
    os.environ["SANDBOX_TEST_SECRET"] = "hunter2"
    try:
        code = "import os\ndef env():\n    return sorted(os.environ)\n"
        result = execute(code, ["assert 'SANDBOX_TEST_SECRET' not in env()",
                                "assert not any('TOKEN' in k or 'KEY' in k for k in env())"])
        assert result.passed == 2, result.outcomes
    finally:
        del os.environ["SANDBOX_TEST_SECRET"]
