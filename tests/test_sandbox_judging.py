"""Tests are judged as real pytest judges them (``sandbox.jailside.verdicts``): each case is one
property, checked with a wrong candidate that must not pass and, where it matters, a correct
one that must. The verdicts expected here are the ones pytest gives the same files."""

from __future__ import annotations

import pytest

from sandbox import execute

CATCH_ALL = """
def test_tolerant():
    try:
        f(1)
    except Exception:
        pass
"""


def statuses(code: str, tests: list[str], **options) -> list[str]:
    return [o.status for o in execute(code, tests, **options).outcomes]


# (body of f, [verdict of CATCH_ALL, of a module catching BaseException, of a loop over map(f)])
# as real pytest gives them: an ``Exception`` is caught by ``except Exception``, a
# ``BaseException`` is not (SystemExit, KeyboardInterrupt and GeneratorExit end pytest's
# session or its test: ``error``); a process that dies is ``crashed`` whatever the test
# catches (outside the jail it would take pytest with it).
FAILING_CALLS = [
    ("raise SystemExit(0)", ["error", "passed", "error"]),
    ("raise KeyboardInterrupt", ["error", "passed", "error"]),
    # PEP 479 at the call boundary: the call raises RuntimeError, it never ends map's loop
    # (a deliberate deviation: see tests/differential/test_sandbox_boundary_values.py)
    ("raise StopIteration", ["passed", "passed", "error"]),
    ("raise GeneratorExit", ["error", "passed", "error"]),
    ("class Out(BaseException):\n        pass\n    raise Out()", ["error", "passed", "error"]),
    ("raise MemoryError", ["passed", "passed", "error"]),
    ("return object()", ["passed", "passed", "failed"]),
    ("return type('Weird', (), {})()", ["passed", "passed", "failed"]),
    ("import os; os._exit(0)", ["crashed"] * 3),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", ["crashed"] * 3),
    ("import os; os.abort()", ["crashed"] * 3),
]


@pytest.mark.parametrize("body, expected", FAILING_CALLS, ids=[b for b, _ in FAILING_CALLS])
def test_a_call_that_raises_or_dies_is_judged_as_under_pytest(body, expected):
    code = f"def f(x):\n    {body}\n"
    tests = [CATCH_ALL,
             "try:\n    f(1)\nexcept BaseException:\n    pass\n",
             "for x in map(f, [1, 2, 3]):\n    assert False\n"]
    assert statuses(code, tests) == expected


def test_a_candidate_that_does_not_load_fails_tests_that_never_call_it():
    for code in ("def f(x) return x\n", "raise SystemExit(0)\n", "import os\nos._exit(0)\n",
                 "def f(x):\n    return x\nraise ValueError('at import')\n"):
        tests = ["assert 1 == 1", "def test_nothing():\n    pass\n", CATCH_ALL,
                 "import math\nassert math.pi > 3\n"]
        assert "passed" not in statuses(code, tests), code


def test_an_ordinary_exception_is_still_catchable_as_python_would():
    code = "def f(x):\n    raise ValueError('bad input')\n"
    assert statuses(code, [CATCH_ALL,
                           "import pytest\ndef test_r():\n    with pytest.raises(ValueError, "
                           "match='bad'):\n        f(1)\n"]) == ["passed", "passed"]


def test_a_candidate_exception_subclass_is_caught_by_its_builtin_base_and_its_name():
    code = ("class BadInput(ValueError):\n    pass\n"
            "class Worse(BadInput):\n    pass\n"
            "def f(x):\n    if x < 0:\n        raise Worse(f'negative: {x}')\n    return x\n")
    tests = ["try:\n    f(-1)\n    assert False\nexcept ValueError as e:\n"
             "    assert 'negative' in str(e)\n",
             "import pytest\ndef test_named():\n    with pytest.raises(BadInput):\n"
             "        f(-2)\n",
             "import pytest\ndef test_base():\n    with pytest.raises(Worse):\n        f(-3)\n",
             "import pytest\ndef test_other():\n    with pytest.raises(KeyError):\n"
             "        f(-4)\n"]
    assert statuses(code, tests) == ["passed", "passed", "passed", "error"]


@pytest.mark.parametrize("test, expected", [
    ("class TestX:\n    def test_a(self):\n        assert f(1) == 99\n", "failed"),
    ("class TestX:\n    def test_a(self):\n        assert f(1) == 2\n", "passed"),
    ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n"
     "        self.assertEqual(f(1), 99)\n", "failed"),
    ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n"
     "        self.assertEqual(f(1), 2)\n", "passed"),
    ("async def test_a():\n    assert f(1) == 99\n", "failed"),  # pytest.fail: no plugin
    ("def test_a():\n    yield\n    assert f(1) == 99\n", "failed"),  # pytest.fail
    ("def test_a(value):\n    assert f(value) == 99\n", "error"),  # no such fixture
    ("def check():\n    assert f(1) == 99\n", "invalid"),
    ("class TestX:\n    def __init__(self):\n        pass\n    def test_a(self):\n"
     "        assert f(1) == 99\n", "invalid"),
    ("import pytest\ndef test_a():\n    pytest.skip('later')\n    assert f(1) == 99\n",
     "skipped"),  # no verdict on the code, and no credit
    ("import pytest\n@pytest.mark.parametrize('x, y', [(1, 2), (2, 3), (5, 7)])\n"
     "def test_p(x, y):\n    assert f(x) == y\n", "failed"),
    ("import pytest\n@pytest.mark.parametrize('x, y', [(1, 2), (2, 3)])\n"
     "def test_p(x, y):\n    assert f(x) == y\n", "passed"),
    ("import pytest\n@pytest.fixture\ndef base():\n    return 4\n"
     "def test_fx(base):\n    assert f(base) == 5\n", "passed"),
])
def test_what_pytest_would_run_is_run_and_nothing_else_passes(test, expected):
    assert statuses("def f(x):\n    return x + 1\n", [test]) == [expected]


def test_expected_values_use_the_real_builtins_even_where_the_candidate_defines_them():
    code = ("def sorted(xs, **kw):\n    return []\ndef len(xs):\n    return 0\n"
            "def sum(xs, *a):\n    return 0\ndef max(*a, **k):\n    return 0\n"
            "def g(xs):\n    return []\n")
    tests = ["assert g([3, 1, 2]) == sorted([3, 1, 2])",
             "assert len(g([1])) == len([9])",
             "assert sum(g([1])) == sum([5])",
             "assert max([4]) == g([4])",
             "def test_whole():\n    assert g([2, 1]) == sorted([2, 1])\n"]
    assert "passed" not in statuses(code, tests)
    honest = "def g(xs):\n    return builtins_sorted(xs)\nimport builtins\nbuiltins_sorted = " \
             "builtins.sorted\ndef sorted(xs, **kw):\n    return []\n"
    assert statuses(honest, tests[:1]) == ["passed"]


def test_in_place_mutation_is_seen_by_the_test_both_ways():
    tests = ["xs = [3, 1, 2]\nsort_it(xs)\nassert xs == [1, 2, 3]\n",
             "d = {'a': [2, 1]}\nsort_it(d['a'])\nassert d == {'a': [1, 2]}\n",
             "def test_unchanged():\n    xs = [3, 1, 2]\n    assert smallest(xs) == 1\n"
             "    assert xs == [3, 1, 2]\n"]
    in_place = "def sort_it(xs):\n    xs.sort()\ndef smallest(xs):\n    return min(xs)\n"
    assert statuses(in_place, tests) == ["passed", "passed", "passed"]
    mutating = ("def sort_it(xs):\n    xs.sort()\n"
                "def smallest(xs):\n    xs.sort()\n    return xs[0]\n")
    assert statuses(mutating, tests)[2] != "passed"
    returning = "def sort_it(xs):\n    return sorted(xs)\ndef smallest(xs):\n    return min(xs)\n"
    assert statuses(returning, tests)[:2] == ["failed", "failed"]


def test_pytest_helpers_models_write_work():
    code = "def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n" \
           "    return sum(xs) / len(xs)\n"
    tests = ["import pytest\ndef test_a():\n    assert mean([0.1, 0.2]) == pytest.approx(0.15)\n",
             "import pytest\ndef test_b():\n    with pytest.raises(ValueError):\n"
             "        mean([])\n",
             "import pytest\nassert mean([1, 2]) == pytest.approx(1.5)\n",
             "import pytest\ndef test_c():\n    with pytest.raises(TypeError):\n"
             "        mean([1])\n"]
    assert statuses(code, tests) == ["passed", "passed", "passed", "failed"]


def test_nan_compares_by_identity_as_in_one_process():
    code = "import math\ndef f():\n    return [math.nan]\ndef g():\n    return math.nan\n"
    tests = ["import math\nassert f() == [math.nan]",
             "import math\ndef test_w():\n    assert f() == [math.nan]\n",
             "import math\nassert math.isnan(g())"]
    assert statuses(code, tests) == ["passed", "passed", "passed"]


def test_a_returned_generator_works_where_a_test_iterates_it():
    code = ("def evens(n):\n    for i in range(n):\n        if i % 2 == 0:\n"
            "            yield i\n"
            "def naturals():\n    i = 0\n    while True:\n        yield i\n        i += 1\n"
            "def squares(n):\n    return map(lambda x: x * x, range(n))\n"
            "def upto(n):\n    return range(n)\n")
    tests = ["assert list(evens(5)) == [0, 2, 4]",
             "assert sum(evens(5)) == 6",
             "assert evens(5) != [0, 2, 4]",  # an iterator is not a list, as in Python
             "def test_for():\n    out = []\n    for x in evens(7):\n        out.append(x)\n"
             "    assert out == [0, 2, 4, 6]\n",
             "def test_next():\n    it = naturals()\n    assert next(it) == 0\n"
             "    assert next(it) == 1\n",
             "import itertools\nassert list(itertools.islice(naturals(), 3)) == [0, 1, 2]",
             "assert list(squares(4)) == [0, 1, 4, 9]",
             "assert upto(3) == range(3) and list(upto(3)) == [0, 1, 2]",
             "assert list(naturals()) == []"]  # drawing forever runs out of time
    assert statuses(code, tests, timeout_s=1.0) == ["passed"] * 8 + ["timeout"]


def test_a_generator_that_raises_midway_raises_where_the_test_draws():
    code = "def g():\n    yield 1\n    raise ValueError('boom')\n" \
           "def h():\n    yield 1\n    raise SystemExit\n"
    tests = ["def test_a():\n    it = g()\n    assert next(it) == 1\n    try:\n"
             "        next(it)\n        assert False\n    except ValueError:\n        pass\n",
             "def test_b():\n    try:\n        list(h())\n    except Exception:\n        pass\n"]
    assert statuses(code, tests) == ["passed", "error"]
