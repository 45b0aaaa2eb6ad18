"""sandbox/pytest_shim.py's ``approx``, checked against real pytest's: the same comparisons,
reprs and errors (see test_sandbox_pytest_shim.py for how the shim is loaded)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from shim_support import outcome

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
