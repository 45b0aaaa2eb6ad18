"""Red team, side two: wrong code is not credited. Each wrong candidate below meets a test
module that real pytest fails (or skips) for it, and the sandbox must give exactly that
verdict; the right candidate passes the same module where that shows the test can pass.

A candidate that passes its own function off as a standard-library one (``__module__`` set to
``math``) is still the one called: the candidate process sends functions and classes as
handles, and the test process refuses a standard-library name for them (``codec.behaves``).
"""

from __future__ import annotations

import textwrap

import pytest

from sandbox import execute, execute_many


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def status(code: str, test: str) -> str:
    return execute(src(code), [src(test)], timeout_s=5.0).outcomes[0].status


# A candidate named like a standard-library function or class, and wrong: the test must call
# the candidate's own object (never resolve the name to the real one) and fail.
NAMED = [
    ("def gcd(a, b):\n    return 0\n",
     "import math\nassert gcd(12, 8) == 4\nassert gcd(9, 6) == math.gcd(9, 6)\n"),
    ("def sqrt(x):\n    return 0.0\n", "import math\nassert math.isclose(sqrt(16), 4.0)\n"),
    ("def comb(n, k):\n    return 0\n", "def test_comb():\n    assert comb(5, 2) == 10\n"),
    ("def isclose(a, b, **kw):\n    return True\n", "assert not isclose(1.0, 2.0)\n"),
    ("class Counter(dict):\n    def most_common(self, n=None):\n        return []\n",
     "def test_c():\n    assert Counter({'a': 2}).most_common(1) == [('a', 2)]\n"),
]
RIGHT = {"gcd": "from math import gcd\n", "sqrt": "from math import sqrt\n",
         "comb": "from math import comb\n", "isclose": "from math import isclose\n",
         "Counter": "from collections import Counter\n"}


def _name(code: str) -> str:
    return code.split()[1].split("(")[0]


@pytest.mark.parametrize("code, test", NAMED, ids=[_name(c) for c, _ in NAMED])
def test_a_wrong_candidate_named_like_the_standard_library_is_called_and_fails(code, test):
    wrong, right = execute_many([(code, [test]), (RIGHT[_name(code)], [test])])
    assert wrong.outcomes[0].status == "failed", wrong.outcomes
    assert right.outcomes[0].status == "passed", right.outcomes


# The same candidates, but they also install themselves in the module they imitate (and say
# they come from it), so that the jail's candidate process names them as the standard
# library's own object and the test process would use its real one.
DISGUISE = "import {module}\n{name}.__module__ = {module!r}\n{module}.{name} = {name}\n"


@pytest.mark.parametrize("code, test", NAMED, ids=[_name(c) for c, _ in NAMED])
def test_a_wrong_candidate_disguised_as_the_standard_library_is_called_and_fails(code, test):
    name = _name(code)
    module = "collections" if name == "Counter" else "math"
    disguised = code + DISGUISE.format(module=module, name=name)
    assert status(disguised, test) == "failed"


ADD_RIGHT, ADD_WRONG = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"


def test_an_expected_failure_earns_no_credit():
    # unittest's expectedFailure: the wrong candidate makes it an xfail (skipped, not passed);
    # the right one an unexpected success, which pytest fails.
    test = """
        import unittest

        class T(unittest.TestCase):
            @unittest.expectedFailure
            def test_add(self):
                self.assertEqual(add(2, 2), 4)
    """
    assert status(ADD_WRONG, test) == "skipped"
    assert status(ADD_RIGHT, test) == "failed"


@pytest.mark.parametrize("test", [
    """
        import pytest

        def test_add():
            try:
                if add(2, 2) != 4:
                    pytest.fail("wrong sum")
            except Exception:
                pass
    """,
    """
        import pytest

        try:
            if add(2, 2) != 4:
                pytest.fail("wrong sum")
        except Exception:
            pass
    """], ids=["in-a-test", "module-level"])
def test_pytest_fail_is_not_swallowed_by_except_exception(test):
    # pytest's Failed is no Exception: ``except Exception`` does not catch it
    assert status(ADD_WRONG, test) == "failed"
    assert status(ADD_RIGHT, test) == "passed"


def test_a_debit_before_the_check_is_seen_after_the_raise():
    test = """
        import pytest

        def test_overdraw_leaves_the_balance():
            acct = {"balance": 10}
            with pytest.raises(ValueError):
                withdraw(acct, 50)
            assert acct["balance"] == 10
    """
    debit_first = """
        def withdraw(account, amount):
            account["balance"] -= amount
            if account["balance"] < 0:
                raise ValueError("insufficient funds")
            return account["balance"]
    """
    check_first = """
        def withdraw(account, amount):
            if amount > account["balance"]:
                raise ValueError("insufficient funds")
            account["balance"] -= amount
            return account["balance"]
    """
    assert status(debit_first, test) == "failed"
    assert status(check_first, test) == "passed"
