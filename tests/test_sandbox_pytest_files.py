"""Test files as code models write them, judged as real pytest judges them: marks, stacked
``parametrize`` with ``param``/ids/marks, fixtures, ``raises``/``warns``/``approx``, skips and
xfails, classes; the calls crossing into the jailed candidate process and back.

The expected items are what real pytest (the version installed beside the sandbox, run on
the same files: ``solution.py`` + ``test_0000.py``, ``plugin.PYTEST_ARGS``) reports, item by
item; for ``approx`` they are computed here, with the real ``pytest.approx`` on the same
values, so the candidate's values crossing the process boundary is all that is checked.
"""

from __future__ import annotations

import math  # noqa: F401 - the approx cases' sources use it
from decimal import Decimal  # noqa: F401
from fractions import Fraction  # noqa: F401

import pytest

from sandbox import execute

SOLUTION = '''\
def divide(a, b):
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return a / b


def mean(xs):
    if not xs:
        raise ValueError("empty")
    return sum(xs) / len(xs)


def careful(x):
    import warnings
    warnings.warn("be careful", UserWarning, stacklevel=2)
    return x
'''

MODEL_TESTS = '''\
import math
import warnings

import pytest
from solution import careful, divide, mean


@pytest.mark.parametrize("x", [0, 1])
@pytest.mark.parametrize("y, z", [(2, "a"), pytest.param(3, "b", id="three"),
                                  pytest.param(4, "c", marks=pytest.mark.skip)])
def test_stacked(x, y, z):
    assert x + y != 4


@pytest.mark.parametrize(["n"], [(1,), (2,)])
@pytest.mark.parametrize("c", [pytest.param(5, marks=[pytest.mark.skipif(True, reason="r")]),
                               pytest.param(6, marks=pytest.mark.skipif(False, reason="r")),
                               pytest.param(7, marks=pytest.mark.xfail(run=False))])
def test_marked_params(n, c):
    assert divide(c * n, n) == c


@pytest.mark.parametrize("s", "xyz")
@pytest.mark.parametrize("g", (i * i for i in range(3)))
def test_iterables(s, g):
    assert divide(g, 1) == g


@pytest.mark.parametrize("e", [])
def test_empty(e):
    assert False


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
        assert careful(3) == 3


def test_warns_missing():
    with pytest.warns(DeprecationWarning):
        careful(3)


@pytest.mark.xfail(raises=ValueError, strict=True)
def test_xfail_held():
    mean([])


@pytest.mark.xfail(strict=True)
def test_xfail_strict_passes():
    assert mean([1, 3]) == 2


def test_approx_collections():
    assert [divide(1, 10) + divide(2, 10), {"k": 1}] != pytest.approx([0.3, 1])
    assert {"a": divide(22, 7)} == pytest.approx({"a": 3.142857142857143})


def test_deprecated_call():
    with pytest.deprecated_call():
        warnings.warn("old", DeprecationWarning, stacklevel=1)


class TestMean:
    @pytest.fixture(autouse=True)
    def _data(self):
        self.data = [1.0, 2.0, 4.0]

    def test_mean(self):
        assert mean(self.data) == pytest.approx(7 / 3)

    def test_empty(self):
        with pytest.raises(ValueError, match="empty"):
            mean([])
'''

P, F, S, X = "passed", "failed", "skipped", "xfailed"
# (item, outcome, decided by an assert or pytest.fail) as real pytest 9 reports them
PYTEST_ITEMS = [
    ("test_stacked[2-a-0]", P, False), ("test_stacked[2-a-1]", P, False),
    ("test_stacked[three-0]", P, False), ("test_stacked[three-1]", F, True),
    ("test_stacked[4-c-0]", S, False), ("test_stacked[4-c-1]", S, False),
    ("test_marked_params[5-1]", S, False), ("test_marked_params[5-2]", S, False),
    ("test_marked_params[6-1]", P, False), ("test_marked_params[6-2]", P, False),
    ("test_marked_params[7-1]", X, False), ("test_marked_params[7-2]", X, False),
    *[(f"test_iterables[{g}-{s}]", P, False) for g in (0, 1, 4) for s in "xyz"],
    ("test_empty[NOTSET]", S, False),
    ("test_divide[6-3-2.0]", P, False), ("test_divide[1-3-0.333333]", F, True),
    ("test_divide[1-3-0.3333333333]", P, False),
    ("test_raises_ok", P, False), ("test_raises_not_raised", F, True),
    ("test_raises_wrong_message", F, True),
    ("test_swallowing_a_skip", S, False),  # Skipped is no Exception: it escapes the except
    ("test_fail", F, True), ("test_importorskip", S, False),
    ("test_importorskip_stdlib", P, False), ("test_warns", P, False),
    ("test_warns_missing", F, True), ("test_xfail_held", X, False),
    ("test_xfail_strict_passes", F, False),  # XPASS(strict)
    ("test_approx_collections", P, False), ("test_deprecated_call", P, False),
    ("TestMean::test_mean", P, False), ("TestMean::test_empty", P, False),
]


def test_a_model_written_file_is_judged_item_by_item_as_pytest_does():
    result = execute(SOLUTION, [MODEL_TESTS], timeout_s=5.0)
    (outcome,) = result.outcomes
    assert [(i.name, i.outcome, i.assertion) for i in outcome.items] == PYTEST_ITEMS
    assert outcome.status == "failed"  # its first failing item decides, by an assert
    assert outcome.message.startswith("test_stacked[three-1]: ")
    # without the failing tests the module passes, its skips and xfails earning nothing more
    failing = {name.split("[")[0] for name, kind, _ in PYTEST_ITEMS if kind == F}
    kept = [block for block in MODEL_TESTS.split("\n\n\n")
            if not any(f"def {name}(" in block for name in failing)]
    assert execute(SOLUTION, ["\n\n\n".join(kept)], timeout_s=5.0).outcomes[0].status == P


# (candidate's value, expected, approx keywords) as source; from pytest's own approx tests'
# kinds: scalars, tolerances, infinities and NaN, complex, Fraction, bools, None and strings,
# sequences and mappings (mismatched kinds and lengths too)
APPROX_CASES = [
    ("0.1 + 0.2", "0.3", ""), ("1.0001", "1", ""), ("1.0001", "1", "rel=1e-3"),
    ("1.0001", "1", "abs=1e-3"), ("1 + 1e-8", "1", "abs=1e-12"), ("1 + 2e-6", "1", ""),
    ("1e-13", "0.0", ""), ("1e-11", "0.0", ""), ("1e6 + 0.5", "1e6", ""),
    ("-1.0", "1.0", "abs=2.0"), ("3", "3.0000001", ""), ("2", "3", "rel=0.5"),
    ("math.inf", "math.inf", ""), ("math.inf", "1e308", ""), ("-math.inf", "math.inf", ""),
    ("math.nan", "math.nan", ""), ("math.nan", "math.nan", "nan_ok=True"),
    ("1 + 1j", "1 + 1j + 1e-9", ""), ("1 + 1j", "1 + 1.1j", ""),
    ("Fraction(1, 3)", "0.3333333", ""), ("Fraction(1, 3)", "Fraction(1, 3)", ""),
    ("Decimal('0.1')", "Decimal('0.1000001')", ""), ("10 ** 20 + 1", "10 ** 20", ""),
    ("True", "1", ""), ("1", "True", ""), ("False", "0", ""), ("True", "1.1", ""),
    ("'a'", "'a'", ""), ("None", "None", ""), ("None", "0", ""), ("'1.0'", "1.0", ""),
    ("1.1", "1.0", "abs=-1"), ("[0.1 + 0.2, 0.2 + 0.4]", "[0.3, 0.6]", ""),
    ("(0.1 + 0.2,)", "[0.3]", ""), ("[1, 2]", "[1, 2, 3]", ""), ("[1, 2]", "5", ""),
    ("[1.1]", "[1.0]", "rel=0.2"), ("[None, 1.0000005]", "[None, 1]", ""),
    ("[math.nan, 1.0]", "[math.nan, 1.0]", "nan_ok=True"), ("'ab'", "['a', 'b']", ""),
    ("{'a': 0.1 + 0.2}", "{'a': 0.3}", ""), ("{'a': 1}", "{'b': 1}", ""),
    ("{'a': 1, 'b': 2}", "{'a': 1}", ""), ("[0.3, 0.6]", "{0: 0.3, 1: 0.6}", ""),
    ("b'ab'", "b'ab'", ""), ("range(3)", "[0, 1, 2]", ""), ("{1.0}", "{1.0}", ""),
]
APPROX_PRELUDE = "import math\nfrom decimal import Decimal\nfrom fractions import Fraction\n"
APPROX_TEST = APPROX_PRELUDE + '''import pytest


def attempt(compare):
    try:
        return compare()
    except Exception as exc:
        return type(exc).__name__


def test_approx():
    actual, expected = value_{i}(), {expected}
    assert [attempt(lambda: actual == pytest.approx(expected, {kw})),
            attempt(lambda: pytest.approx(expected, {kw}) == actual),
            attempt(lambda: actual != pytest.approx(expected, {kw})),
            attempt(lambda: pytest.approx(expected, {kw}) != actual)] == {want!r}
'''


def _approx_here(actual: str, expected: str, kw: str) -> list:
    """The four comparisons with the real pytest.approx, in this process."""
    def attempt(compare):
        try:
            return compare()
        except Exception as exc:  # noqa: BLE001 - a raised error is an outcome to compare
            return type(exc).__name__
    a, e = eval(actual), eval(expected)  # noqa: S307 - the literal sources above
    opts = eval(f"dict({kw})")  # noqa: S307
    return [attempt(lambda: a == pytest.approx(e, **opts)),
            attempt(lambda: pytest.approx(e, **opts) == a),
            attempt(lambda: a != pytest.approx(e, **opts)),
            attempt(lambda: pytest.approx(e, **opts) != a)]


def test_approx_on_the_candidates_values_agrees_with_pytest_here():
    code = APPROX_PRELUDE + "".join(f"def value_{i}():\n    return {actual}\n"
                                    for i, (actual, _, _) in enumerate(APPROX_CASES))
    tests = [APPROX_TEST.format(i=i, expected=expected, kw=kw,
                                want=_approx_here(actual, expected, kw))
             for i, (actual, expected, kw) in enumerate(APPROX_CASES)]
    wants = {repr(_approx_here(*case)) for case in APPROX_CASES}
    assert len(wants) > 3  # the cases do not all come out the same: each one can fail
    result = execute(code, tests, timeout_s=5.0)
    failing = [(case, o.status, o.message) for case, o in
               zip(APPROX_CASES, result.outcomes, strict=True) if o.status != "passed"]
    assert failing == []
