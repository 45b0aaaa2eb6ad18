"""sandbox/pytest_shim.py, the stdlib-only ``pytest`` of the jail, checked against real pytest:
the module itself and the outcome helpers (raises, fail, skip, xfail, importorskip, warns,
deprecated_call). approx and the collection helpers (marks, parametrize, fixture, a whole
model-written file) are in the ``test_sandbox_pytest_shim_*`` files beside this one.

The shim is loaded the way the jail loads it: its source exec'd into a fresh module object
(the ``shim`` fixture, conftest.py). Where pytest itself can run the same thing, the two must
agree (same outcome, same message).
"""

from __future__ import annotations

import ast
import json
import os
import sys
import warnings

import pytest
from shim_support import SHIM, outcome, same_as_pytest

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
