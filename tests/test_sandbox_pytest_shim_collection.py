"""sandbox/pytest_shim.py's collection helpers (marks, param, expand_params, fixture), then a
whole model-written test file run in a jail-like interpreter and under real pytest, which must
agree (see test_sandbox_pytest_shim.py for how the shim is loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from shim_support import SHIM

# --- marks, param, expand_params, fixture ---------------------------------------------------------

def test_marks_are_recorded_and_otherwise_no_ops(shim):
    @shim.mark.slow
    @shim.mark.skip(reason="later")
    @shim.mark.xfail
    def test_f():
        return 1

    assert test_f() == 1 and test_f.__name__ == "test_f"
    assert [(m.name, m.args, m.kwargs) for m in test_f.__pytest_marks__] == [
        ("xfail", (), {}), ("skip", (), {"reason": "later"}), ("slow", (), {})]
    assert shim.expand_params(test_f) == [{}]
    assert not hasattr(test_f, "__pytest_params__")

    @shim.mark.usefixtures("db")
    class TestGroup:
        pass

    assert TestGroup.__pytest_marks__[0].args == ("db",)
    with pytest.raises(AttributeError):
        shim.mark._private  # noqa: B018
    assert shim.mark.skipif(lambda: True).args[0]() is True  # a lambda is an argument


def test_parametrize_expands_like_pytest_and_is_bounded(shim):
    @shim.mark.parametrize("x", [0, 1])
    @shim.mark.parametrize(["y", "z"], [(2, "a"), shim.param(3, "b", id="three")])
    def test_f(x, y, z):
        pass

    assert shim.expand_params(test_f) == [
        {"y": 2, "z": "a", "x": 0}, {"y": 2, "z": "a", "x": 1},
        {"y": 3, "z": "b", "x": 0}, {"y": 3, "z": "b", "x": 1}]
    assert [names for names, _, _ in test_f.__pytest_params__] == [("y", "z"), ("x",)]

    @shim.mark.parametrize("whole", [(1,), [2, 3]])  # one name in a string: values as given
    @shim.mark.parametrize(["unpacked"], [(4,), shim.param(5)])  # a list of names: unpacked
    def test_one_name(whole, unpacked):
        pass

    assert [(case["whole"], case["unpacked"]) for case in shim.expand_params(test_one_name)] == [
        ((1,), 4), ([2, 3], 4), ((1,), 5), ([2, 3], 5)]

    @shim.mark.parametrize("n", range(1001))
    def test_many(n):
        pass

    @shim.mark.parametrize("a", range(40))
    @shim.mark.parametrize("b", range(40))
    def test_product(a, b):
        pass

    @shim.mark.parametrize("n", __import__("itertools").count())  # never materialized whole
    def test_endless(n):
        pass

    for func in (test_many, test_product, test_endless):
        with pytest.raises(ValueError, match="1000"):
            shim.expand_params(func)

    @shim.mark.parametrize("a", range(10))
    @shim.mark.parametrize("b", range(100))
    def test_limit(a, b):
        pass

    assert len(shim.expand_params(test_limit)) == 1000

    @shim.mark.parametrize("a,b", [(1, 2, 3)])
    def test_wrong_arity(a, b):
        pass

    @shim.mark.parametrize("a", [1])
    @shim.mark.parametrize("a", [2])
    def test_twice(a):
        pass

    for func in (test_wrong_arity, test_twice):
        with pytest.raises(ValueError):
            shim.expand_params(func)


def test_fixture_marks_with_or_without_arguments(shim):
    @shim.fixture
    def plain():
        return 3

    @shim.fixture(scope="module", name="resource", autouse=True)
    def generator():
        yield 4

    assert plain.__pytest_fixture__ is True and plain.__pytest_fixture_name__ == "plain"
    assert plain() == 3 and list(generator()) == [4]
    assert generator.__pytest_fixture__ is True
    assert generator.__pytest_fixture_name__ == "resource"
    assert generator.__pytest_fixture_options__["scope"] == "module"
    assert generator.__pytest_fixture_options__["autouse"] is True


# --- end to end: a model-written test file, in a jail-like interpreter and under pytest ----------

RUNNER = """\
import json, sys, types
mod = types.ModuleType("pytest")
exec(compile(open(sys.argv[1]).read(), "pytest_shim", "exec"), mod.__dict__)
sys.modules["pytest"] = mod
ns = {"__name__": "test_generated"}
exec(compile(open(sys.argv[2]).read(), sys.argv[2], "exec"), ns)
outcomes = {}
for name, func in list(ns.items()):
    if name.startswith("test") and callable(func):
        for kwargs in mod.expand_params(func):
            try:
                func(**kwargs)
                status = "passed"
            except mod.Skipped:
                status = "skipped"
            except Exception:
                status = "failed"
            outcomes.setdefault(name, []).append(status)
print(json.dumps({"outcomes": outcomes, "site": [p for p in sys.path if "site-packages" in p]}))
"""

MODEL_TESTS = '''\
import json, math, os, warnings
import pytest


def record(name, **values):
    with open(os.environ["RECORD_PATH"], "a") as f:
        f.write(json.dumps([name, values]) + "\\n")


def divide(a, b):
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return a / b


@pytest.mark.parametrize("x", [0, 1])
@pytest.mark.parametrize("y, z", [(2, "a"), pytest.param(3, "b", id="three"),
                                  pytest.param(4, "c", marks=pytest.mark.skip)])
def test_stacked(x, y, z):
    record("test_stacked", x=x, y=y, z=z)
    assert x + y != 4


@pytest.mark.parametrize(["n"], [(1,), (2,)])
@pytest.mark.parametrize("c", [pytest.param(5, marks=[pytest.mark.skipif(True, reason="r")]),
                               pytest.param(6, marks=pytest.mark.skipif(False, reason="r")),
                               pytest.param(7, marks=pytest.mark.xfail(run=False))])
def test_marked_params(n, c):
    record("test_marked_params", n=n, c=c)


@pytest.mark.parametrize("s", "xyz")
@pytest.mark.parametrize("g", (i * i for i in range(3)))
def test_iterables(s, g):
    record("test_iterables", s=s, g=g)


@pytest.mark.parametrize("e", [])
def test_empty(e):
    record("test_empty", e=e)


@pytest.mark.parametrize("a, b, want", [(6, 3, 2.0), (1, 3, 0.333333), (1, 3, 0.3333333333)])
def test_divide(a, b, want):
    assert divide(a, b) == pytest.approx(want)


def test_raises_ok():
    with pytest.raises(ZeroDivisionError, match="by zero"):
        divide(1, 0)


def test_raises_not_raised():
    with pytest.raises(ZeroDivisionError):
        divide(1, 1)


def test_raises_wrong_message():
    with pytest.raises(ZeroDivisionError, match="^zero"):
        divide(1, 0)


def test_swallowing_a_skip():
    try:
        pytest.skip("not here")
    except Exception:
        pass
    assert False


def test_fail():
    pytest.fail("explicitly")


def test_importorskip():
    pytest.importorskip("surely_not_installed_module")


def test_importorskip_stdlib():
    assert pytest.importorskip("json").loads("[1]") == [1]


def test_warns():
    with pytest.warns(UserWarning, match="careful"):
        warnings.warn("be careful", stacklevel=1)


def test_approx_collections():
    assert [0.1 + 0.2, {"k": 1}] != pytest.approx([0.3, 1])
    assert {"a": math.pi} == pytest.approx({"a": 3.14159265})
'''


def test_a_model_written_file_runs_in_a_jail_like_interpreter_as_under_pytest(tmp_path):
    test_file = tmp_path / "test_generated.py"
    test_file.write_text(MODEL_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    runner = tmp_path / "runner.py"
    runner.write_text(RUNNER)
    env = {**os.environ, "RECORD_PATH": str(tmp_path / "shim.jsonl")}
    shim_run = subprocess.run([sys.executable, "-I", "-S", str(runner), str(SHIM), str(test_file)],
                              capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path)
    assert shim_run.returncode == 0, shim_run.stderr
    report = json.loads(shim_run.stdout)
    assert report["site"] == []  # nothing but the standard library was importable

    env["RECORD_PATH"] = str(tmp_path / "pytest.jsonl")
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c",
                    str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path),
                    f"--junitxml={junit}", str(test_file)],
                   capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    under_pytest: dict[str, list[str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        status = ("skipped" if case.find("skipped") is not None else
                  "failed" if case.find("failure") is not None or case.find("error") is not None
                  else "passed")
        under_pytest.setdefault(case.get("name").split("[")[0], []).append(status)
    under_pytest.pop("test_empty")  # pytest reports an empty parameter set as one skip
    assert under_pytest["test_marked_params"] == ["skipped"] * 2 + ["passed"] * 2 + ["skipped"] * 2
    for name in ("test_stacked", "test_marked_params"):  # expand_params leaves out marked cases
        under_pytest[name] = [status for status in under_pytest[name] if status != "skipped"]
    assert report["outcomes"] == under_pytest

    def records(name):
        return [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
    assert records("shim.jsonl") == records("pytest.jsonl")
    assert report["outcomes"]["test_swallowing_a_skip"] == ["skipped"]
    assert report["outcomes"]["test_divide"] == ["passed", "failed", "passed"]
