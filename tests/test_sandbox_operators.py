"""A candidate object's arithmetic is never given a value of the test's (``docs/sandbox.md``,
the boundary contract). Given one, an object could answer whatever that value needs: an
``area`` whose result subtracts to 0 from anything passes every ``abs(x - expected) < tol``
and every ``assertAlmostEqual``. Arithmetic between the candidate's own objects is kept, and
a test that multiplies a candidate's vector by its own number gets a clear error naming the
type (both on the reference and the candidate: such a test is invalid, never a verdict)."""

from __future__ import annotations

import textwrap

import pytest

from sandbox import execute

LIAR = textwrap.dedent('''
    class Num:
        def __sub__(self, other):
            return 0

        def __rsub__(self, other):
            return 0

        def __truediv__(self, other):
            return 1.0


    def area(r):
        return Num()
''')
VECTOR = textwrap.dedent('''
    class V:
        def __init__(self, x):
            self.x = x

        def __add__(self, o):
            return V(self.x + o.x)

        def __mul__(self, k):
            return V(self.x * k)

        def __abs__(self):
            return abs(self.x)


    def make(x):
        return V(x)
''')


@pytest.mark.parametrize("test", [
    "assert abs(area(2) - 12.566) < 1e-3\n",
    "assert abs(12.566 - area(2)) < 1e-3\n",
    "assert area(2) / 12.566 == 1.0\n",
    "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_area(self):\n"
    "        self.assertAlmostEqual(area(2), 12.566, places=2)\n",
    "import math\nassert math.isclose(area(2) - 12.566, 0.0, abs_tol=1e-3)\n",
])
def test_an_object_that_answers_any_difference_with_zero_is_not_credited(test):
    outcome = execute(LIAR, [test]).outcomes[0]
    assert outcome.status == "error", outcome
    assert "Num" in outcome.message and "not given the test's float" in outcome.message


def test_the_candidates_objects_compute_with_each_other_and_refuse_the_tests_numbers():
    ok, scaled = execute(VECTOR, ["assert abs(make(1) + make(2)) == 3\n",
                                  "assert abs(make(2) * 3) == 6\n"]).outcomes
    assert ok.status == "passed", ok
    assert scaled.status == "error" and "V is not given the test's int" in scaled.message
