"""Sessions pytest does not complete: ``SystemExit`` or ``KeyboardInterrupt`` raised by the
candidate while pytest collects the test module (an *INTERNALERROR*, or *Interrupted*), or while
it runs a test (*Interrupted*), or at the candidate's import; and a test that calls
``pytest.exit``. A ``SystemExit`` inside a test function is an ordinary failure to pytest, and
is here beside them."""

from __future__ import annotations

from .corpus import family, single

DOUBLE = {
    "ok": """
        def double(x):
            return 2 * x
    """,
    "exits": """
        import sys


        def double(x):
            sys.exit(0)
    """,
    "interrupts": """
        def double(x):
            if x > 1:
                raise KeyboardInterrupt
            return 2 * x
    """,
}

TESTS = {
    "module-level": """
        assert double(1) == 2
        assert double(2) == 4
    """,
    "functions": """
        def test_one():
            assert double(1) == 2


        def test_two():
            assert double(2) == 4


        def test_three():
            assert double(3) == 6
    """,
}

PAIRS = [
    *family("stops/double", DOUBLE, TESTS),
    single("stops/exit-at-import", """
        raise SystemExit(0)


        def double(x):
            return 2 * x
    """, """
        def test_one():
            assert double(1) == 2
    """),
    single("stops/interrupt-at-import", """
        raise KeyboardInterrupt


        def double(x):
            return 2 * x
    """, """
        def test_one():
            assert double(1) == 2
    """),
    single("stops/pytest-exit", """
        def double(x):
            return 2 * x
    """, """
        import pytest


        def test_one():
            assert double(1) == 2


        def test_stop():
            pytest.exit("enough")
    """),
]
