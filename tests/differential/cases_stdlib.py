"""The process a test and its candidate share, continued: the working directory
(``monkeypatch.chdir``), the recursion limit, and the standard-library modules the candidate
imported, patched through its names (``patch("solution.random.randint")``,
``monkeypatch.setattr(solution.random, ...)``, ``patch("solution.time.sleep")``) and read
through them (``math`` bound by the candidate's ``import math``)."""

from __future__ import annotations

from .corpus import family

STDLIB = {
    "ok": """
        import math
        import os
        import random
        import time


        def save(name, text):
            with open(name, "w") as f:
                f.write(text)
            return os.path.abspath(name)


        def roll():
            return random.randint(1, 6)


        def retry(fn, times=3):
            for _ in range(times):
                try:
                    return fn()
                except ValueError:
                    time.sleep(10)
            return None


        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)


        def hyp(a, b):
            return math.sqrt(a * a + b * b)
    """,
    "wrong": """
        import math
        import random


        def save(name, text):
            return name


        def roll():
            return 3 if random.random() < 2 else 1


        def retry(fn, times=3):
            try:
                return fn()
            except ValueError:
                return None


        def depth(n):
            return n if n < 500 else n - 1


        def hyp(a, b):
            return math.sqrt(a * a + b * b) if a else float(b)
    """,
}
STDLIB_TESTS = {
    "chdir": """
        def test_relative_path(tmp_path, monkeypatch):
            monkeypatch.chdir(tmp_path)
            assert save("out.txt", "hi") == str(tmp_path / "out.txt")
            assert (tmp_path / "out.txt").read_text() == "hi"
    """,
    "patch_module_function": """
        from unittest.mock import patch

        import solution


        def test_mock_patch():
            with patch("solution.random.randint", return_value=4):
                assert roll() == 4

        def test_monkeypatch(monkeypatch):
            monkeypatch.setattr(solution.random, "randint", lambda a, b: 6)
            assert roll() == 6

        def test_restored():
            assert all(1 <= roll() <= 6 for _ in range(20))
    """,
    "patch_sleep": """
        from unittest.mock import patch


        def test_retry_sleeps_between_tries():
            calls = []

            def flaky():
                calls.append(1)
                if len(calls) < 3:
                    raise ValueError("not yet")
                return "ok"
            with patch("solution.time.sleep") as sleep:
                assert retry(flaky) == "ok"
            assert sleep.call_count == 2
    """,
    "recursion_limit": """
        import sys


        def test_deep():
            sys.setrecursionlimit(10000)
            assert depth(3000) == 3000
    """,
    "module_via_candidate": """
        def test_uses_the_candidates_math_name():
            assert math.isclose(hyp(3, 4), 5.0)
            assert math.isclose(hyp(0, 2), 2.0)
    """,
}

PAIRS = family("stdlib", STDLIB, STDLIB_TESTS)
