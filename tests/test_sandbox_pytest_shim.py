"""sandbox/pytest_shim.py, the stdlib-only ``pytest`` of the jail, checked against real pytest.

The shim is loaded the way the jail loads it: its source exec'd into a fresh module object.
Where pytest itself can run the same thing, the two must agree (same outcome, same message).
"""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
import types
import warnings
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parent.parent / "sandbox" / "pytest_shim.py"


def load_shim() -> types.ModuleType:
    mod = types.ModuleType("pytest")
    exec(compile(SHIM.read_text(), "pytest_shim", "exec"), mod.__dict__)
    return mod


@pytest.fixture(scope="module")
def shim() -> types.ModuleType:
    return load_shim()


def outcome(body, p) -> tuple[str, str]:
    """What ``body(p)`` did: ("ok", "") or the name and text of what it raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # re-emitted warnings are not the point here
        try:
            body(p)
        except BaseException as exc:  # noqa: BLE001 - pytest's outcomes are BaseExceptions
            return type(exc).__name__, str(exc)
    return "ok", ""


def same_as_pytest(body, shim) -> tuple[str, str]:
    got, want = outcome(body, shim), outcome(body, pytest)
    assert got == want, body.__name__
    return got


# --- the module itself ---------------------------------------------------------------------------

def test_the_shim_imports_only_the_standard_library_and_exposes_its_names(shim):
    tree = ast.parse(SHIM.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    assert all(hasattr(shim, name) for name in shim.__all__)
    assert {"raises", "approx", "fail", "skip", "xfail", "importorskip", "mark", "param",
            "fixture", "warns", "deprecated_call", "expand_params"} <= set(shim.__all__)
    assert shim.Failed.__module__ == "pytest"


# --- raises --------------------------------------------------------------------------------------

def no_raise(p):
    with p.raises(ValueError):
        pass


def no_raise_tuple(p):
    with p.raises((ValueError, TypeError)):
        pass


def wrong_type(p):
    with p.raises(ValueError):
        raise KeyError("k")


def matching(p):
    with p.raises(ValueError, match=r"bad \d+") as excinfo:
        raise ValueError("a bad 42 value")
    assert excinfo.type is ValueError and excinfo.typename == "ValueError"
    assert str(excinfo.value) == "a bad 42 value" and excinfo.match("42$|bad")
    assert excinfo.tb is not None and excinfo.errisinstance((KeyError, ValueError))


def match_mismatch(p):
    with p.raises(ValueError, match="good"):
        raise ValueError("bad")


def match_looks_unescaped(p):
    with p.raises(ValueError, match="f(x)"):
        raise ValueError("f(x)")


def match_sees_notes(p):
    with p.raises(ValueError, match="extra"):
        exc = ValueError("x")
        exc.add_note("extra context")
        raise exc


def invalid_regex(p):
    with p.raises(ValueError, match="("):
        raise ValueError("x")


def subclass_and_tuple(p):
    with p.raises(LookupError):
        raise KeyError("k")
    with p.raises((TypeError, ZeroDivisionError)):
        1 / 0  # noqa: B018


def callable_form(p):
    excinfo = p.raises(ZeroDivisionError, lambda a, b=1: a / b, 1, b=0)
    assert excinfo.type is ZeroDivisionError


def callable_form_no_raise(p):
    p.raises(ValueError, int, "3")


def excinfo_match_fails(p):
    with p.raises(ValueError) as excinfo:
        raise ValueError("abc")
    excinfo.match("xyz")


def fail_inside_raises_exception(p):
    with p.raises(Exception):
        p.fail("boom")


def did_not_raise_inside_raises_exception(p):
    with p.raises(Exception):
        with p.raises(ValueError):
            pass


def fail_caught_when_asked_for(p):
    with p.raises(p.fail.Exception, match="boom"):
        p.fail("boom")
    with p.raises(BaseException):
        p.fail("boom")


def skip_inside_raises_exception(p):
    with p.raises(Exception):
        p.skip("not now")


def assert_inside_raises_assertion_error(p):
    with p.raises(AssertionError, match="nope"):
        raise AssertionError("nope")


RAISES_CASES = [no_raise, no_raise_tuple, wrong_type, matching, match_mismatch,
                match_looks_unescaped, match_sees_notes, invalid_regex, subclass_and_tuple,
                callable_form, callable_form_no_raise, excinfo_match_fails,
                fail_inside_raises_exception, did_not_raise_inside_raises_exception,
                fail_caught_when_asked_for, skip_inside_raises_exception,
                assert_inside_raises_assertion_error]


@pytest.mark.parametrize("body", RAISES_CASES, ids=lambda f: f.__name__)
def test_raises_behaves_like_pytest(shim, body):
    same_as_pytest(body, shim)


def test_raises_failure_modes(shim):
    assert outcome(no_raise, shim) == ("Failed", "DID NOT RAISE ValueError")
    assert outcome(no_raise_tuple, shim) == ("Failed", "DID NOT RAISE any of (ValueError, "
                                                       "TypeError)")
    assert issubclass(shim.Failed, AssertionError)  # the sandbox counts it as a failed test
    assert shim.raises.Exception is shim.fail.Exception is shim.Failed
    kind, message = outcome(match_mismatch, shim)
    assert kind == "AssertionError" and "Regex pattern did not match" in message
    assert "'good'" in message and "'bad'" in message

    error = KeyError("k")
    with pytest.raises(KeyError) as caught:  # the other type goes through unchanged
        with shim.raises(ValueError):
            raise error
    assert caught.value is error
    with pytest.raises(ValueError):
        shim.raises()
    with pytest.raises(TypeError):
        shim.raises(ValueError, bogus=1)
    with pytest.raises(TypeError):
        shim.raises(42)


def test_excinfo_is_only_readable_after_the_block(shim):
    with pytest.raises(AssertionError):
        with shim.raises(ValueError) as excinfo:
            excinfo.value  # noqa: B018
    assert "ExceptionInfo" in type(excinfo).__name__


# --- fail, skip, xfail, importorskip -------------------------------------------------------------

def test_outcomes_behave_like_pytest(shim):
    assert same_as_pytest(lambda p: p.fail("boom"), shim) == ("Failed", "boom")
    assert same_as_pytest(lambda p: p.skip("later"), shim) == ("Skipped", "later")
    assert same_as_pytest(lambda p: p.skip(reason="later"), shim) == ("Skipped", "later")
    same_as_pytest(lambda p: p.importorskip("no_such_module_xyz"), shim)
    same_as_pytest(lambda p: p.importorskip("json", minversion="99"), shim)
    assert shim.importorskip("json") is json
    assert shim.importorskip("os.path") is os.path
    assert shim.importorskip("json", minversion="1.0") is json


def test_skips_escape_except_exception_and_failures_are_assertion_errors(shim):
    assert not issubclass(shim.Skipped, Exception) and issubclass(shim.Skipped, BaseException)
    for call in (lambda: shim.skip("s"), lambda: shim.xfail("x"),
                 lambda: shim.importorskip("no_such_module_xyz")):
        with pytest.raises(shim.Skipped):
            try:
                call()
            except Exception:  # what test code catching errors would write
                pytest.fail("Skipped was swallowed by except Exception")
    assert issubclass(shim.XFailed, shim.Skipped) and shim.xfail.Exception is shim.XFailed
    assert shim.skip.Exception is shim.Skipped
    with pytest.raises(AssertionError, match="^boom$") as caught:
        shim.fail("boom")
    assert type(caught.value) is shim.Failed
    with pytest.raises(shim.Failed, match="^old$"):
        shim.fail(msg="old")


# --- approx --------------------------------------------------------------------------------------

INF, NAN = math.inf, math.nan
APPROX_CASES = [  # (actual, expected, keywords)
    (0.1 + 0.2, 0.3, {}), (1.0001, 1, {}), (1.0001, 1, {"rel": 1e-3}), (1.0001, 1, {"abs": 1e-3}),
    (1 + 1e-8, 1, {}), (1 + 1e-8, 1, {"abs": 1e-12}), (1 + 1e-8, 1, {"rel": 1e-6, "abs": 1e-12}),
    (1 + 2e-6, 1, {}), (1 + 0.9e-6, 1, {}), (0.0, 0.0, {}), (1e-13, 0.0, {}), (1e-11, 0.0, {}),
    (1e6 + 1, 1e6, {}), (1e6 + 0.5, 1e6, {}), (-1.0, 1.0, {}), (-1.0, 1.0, {"abs": 2.0}),
    (3, 3.0000001, {}), (3, 3, {}), (2, 3, {"rel": 0.5}), (INF, INF, {}), (INF, 1e308, {}),
    (1e308, INF, {}), (-INF, INF, {}), (INF, INF, {"rel": 1.0}), (NAN, NAN, {}),
    (NAN, NAN, {"nan_ok": True}), (1.0, NAN, {"nan_ok": True}), (NAN, 1.0, {"nan_ok": True}),
    (1 + 1j, 1 + 1j + 1e-9, {}), (1 + 1j, 1 + 1.1j, {}), (1j, 0, {"abs": 1.0}),
    (Fraction(1, 3), 0.3333333, {}), (Fraction(1, 3), Fraction(1, 3), {}),
    (10**20 + 1, 10**20, {}), (10**20 + 10**15, 10**20, {}),
    (True, 1, {}), (1, True, {}), (True, True, {}), (False, True, {}), (False, 0, {}),
    (0, False, {}), (1.0, True, {}), (True, 1.0000001, {}), (True, 1.1, {}),
    ("a", "a", {}), ("a", "b", {}), (None, None, {}), (None, 0, {}), (0, None, {}),
    ("1.0", 1.0, {}), (1.0, 1.0, {"abs": -1}), (1.1, 1.0, {"abs": -1}), (1.1, 1.0, {"rel": -1}),
    ([0.1 + 0.2, 0.2 + 0.4], [0.3, 0.6], {}), ((0.1 + 0.2,), [0.3], {}), ([0.3], (0.3,), {}),
    ([1, 2], [1, 2, 3], {}), ([1, 2], 5, {}), (5, [5], {}), ([], [], {}), ([1.1], [1.0], {}),
    ([1.1], [1.0], {"rel": 0.2}), ([None, 1.0000005], [None, 1], {}),
    (["foo", 1.0000005], [None, 1], {}), ([True], [1], {}), ([1], [True], {}),
    ([NAN, 1.0], [NAN, 1.0], {"nan_ok": True}), ([NAN], [NAN], {}), ("ab", ["a", "b"], {}),
    ({"a": 0.1 + 0.2}, {"a": 0.3}, {}), ({"a": 1}, {"b": 1}, {}), ({"a": 1}, [1], {}),
    ({"a": 1, "b": 2}, {"a": 1}, {}), ({"a": 1.01}, {"a": 1}, {"abs": 0.1}),
    ({"required": 1.0000005, "optional": None}, {"required": 1, "optional": None}, {}),
    ([0.3, 0.6], {0: 0.3, 1: 0.6}, {}),
]


def approx_outcomes(p, actual, expected, keywords) -> list:
    def attempt(compare):
        try:
            return compare()
        except Exception as exc:  # noqa: BLE001 - a raised error is an outcome to compare
            return type(exc).__name__
    return [attempt(lambda: actual == p.approx(expected, **keywords)),
            attempt(lambda: p.approx(expected, **keywords) == actual),
            attempt(lambda: actual != p.approx(expected, **keywords)),
            attempt(lambda: p.approx(expected, **keywords) != actual)]


@pytest.mark.parametrize(("actual", "expected", "keywords"), APPROX_CASES, ids=repr)
def test_approx_agrees_with_pytest(shim, actual, expected, keywords):
    want = approx_outcomes(pytest, actual, expected, keywords)
    assert approx_outcomes(shim, actual, expected, keywords) == want


def test_approx_failure_modes(shim):
    assert 0.1 + 0.2 == shim.approx(0.3) and not 0.1 + 0.2 != shim.approx(0.3)
    assert 0.31 != shim.approx(0.3) and [0.31] != shim.approx([0.3])
    assert 1 != shim.approx(True)  # bools are no numbers to approx, as in pytest
    assert {"a": 1.1} != shim.approx({"a": 1.0}) and (1.0, 2.1) != shim.approx((1.0, 2.0))
    with pytest.raises(AssertionError):  # a missing ``== x`` does not pass silently
        assert shim.approx(1.0)


@pytest.mark.parametrize("make", [
    lambda p: p.approx(1.0), lambda p: p.approx(0.3), lambda p: p.approx(1e-20),
    lambda p: p.approx(5000.0), lambda p: p.approx(0), lambda p: p.approx(1 + 2j),
    lambda p: p.approx(1j, abs=1.0), lambda p: p.approx(INF), lambda p: p.approx(NAN),
    lambda p: p.approx(True), lambda p: p.approx("x"), lambda p: p.approx(None),
    lambda p: p.approx(1.0, rel=0.1), lambda p: p.approx(1.0, abs=0.5),
    lambda p: p.approx(1.0, abs=-1), lambda p: p.approx(Fraction(1, 3)),
    lambda p: p.approx([1.0, 2.0]), lambda p: p.approx((1, 2)), lambda p: p.approx([]),
    lambda p: p.approx({"a": 1.0, "b": None}), lambda p: p.approx([None, "s", 1]),
])
def test_approx_repr_is_pytests(shim, make):
    assert repr(make(shim)) == repr(make(pytest))


@pytest.mark.parametrize("body", [
    lambda p: p.approx([[1.0]]), lambda p: p.approx({"a": [1.0]}), lambda p: p.approx({1.0}),
    lambda p: bool(p.approx(1.0)), lambda p: hash(p.approx(1.0)), lambda p: p.approx(1.0) < 2,
    lambda p: p.approx(1.0, rel="x"), lambda p: p.approx(b"ab") == b"ab",
    lambda p: p.approx(range(3)) == [0, 1, 2],
])
def test_approx_errors_are_pytests(shim, body):
    assert outcome(body, shim)[0] == outcome(body, pytest)[0]


# --- marks, param, expand_params -----------------------------------------------------------------

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


# --- warns, deprecated_call ----------------------------------------------------------------------

def warns_matching(p):
    with p.warns(UserWarning, match="hel+o") as record:
        warnings.warn("hello", UserWarning, stacklevel=1)
        assert len(record) == 1  # visible inside the block too
    assert len(record) == 1 and str(record[0].message) == "hello"
    assert record[0].category is UserWarning


def warns_nothing(p):
    with p.warns(UserWarning):
        pass


def warns_wrong_regex(p):
    with p.warns(UserWarning, match="bye"):
        warnings.warn("hello", stacklevel=1)


def warns_wrong_type(p):
    with p.warns(DeprecationWarning):
        warnings.warn("x", UserWarning, stacklevel=1)


def deprecated(p):
    with p.deprecated_call():
        warnings.warn("old", DeprecationWarning, stacklevel=1)
    with p.deprecated_call(match="^older$"):
        warnings.warn("older", PendingDeprecationWarning, stacklevel=1)


def deprecated_nothing(p):
    with p.deprecated_call():
        warnings.warn("x", UserWarning, stacklevel=1)


def callable_forms(p):
    assert p.deprecated_call(lambda: warnings.warn("old", FutureWarning, stacklevel=1) or 5) == 5
    assert p.warns(UserWarning, lambda x: warnings.warn("w", stacklevel=1) or x, 3) == 3


def warns_skip_propagates(p):
    with p.warns(UserWarning):
        p.skip("not now")


def warns_error_without_warning(p):
    with p.warns(UserWarning):
        raise KeyError("k")


def warns_error_after_warning(p):
    with p.warns(UserWarning):
        warnings.warn("w", stacklevel=1)
        raise KeyError("k")


def unexpected_warnings_are_passed_on(p):
    with p.warns(RuntimeWarning) as outer:
        with p.warns(UserWarning):
            warnings.warn("u", UserWarning, stacklevel=1)
            warnings.warn("r", RuntimeWarning, stacklevel=1)
    assert [type(w.message) for w in outer] == [RuntimeWarning]


@pytest.mark.parametrize("body", [
    warns_matching, warns_nothing, warns_wrong_regex, warns_wrong_type, deprecated,
    deprecated_nothing, callable_forms, warns_skip_propagates, warns_error_without_warning,
    warns_error_after_warning, unexpected_warnings_are_passed_on], ids=lambda f: f.__name__)
def test_warns_behaves_like_pytest(shim, body):
    same_as_pytest(body, shim)


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
