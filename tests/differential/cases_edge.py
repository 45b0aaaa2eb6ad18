"""Generators (infinite ones through ``itertools.islice``), closures and decorators, callbacks
from the candidate into the test, candidates named like builtins or standard-library names,
``__all__`` and private names, candidates that print or fail at import, and tests that cannot
run (syntax errors, nothing to run, unknown names)."""

from __future__ import annotations

from .corpus import family, single

GEN = {
    "ok": """
        import itertools


        def naturals():
            n = 0
            while True:
                yield n
                n += 1


        def evens(limit):
            for i in range(0, limit, 2):
                yield i


        def chunks(items, size):
            it = iter(items)
            while chunk := list(itertools.islice(it, size)):
                yield chunk


        def make_adder(k):
            def add(x):
                return x + k
            return add


        def apply_all(funcs, value):
            return [f(value) for f in funcs]
    """,
    "lists": """
        def naturals():
            return iter(range(1000))


        def evens(limit):
            return [i for i in range(limit) if i % 2 == 0]


        def chunks(items, size):
            return [items[i:i + size] for i in range(0, len(items), size)]


        def make_adder(k):
            return lambda x: x + k


        def apply_all(funcs, value):
            return list(map(lambda f: f(value), funcs))
    """,
    "buggy": """
        def naturals():
            n = 1
            while True:
                yield n
                n += 1


        def evens(limit):
            yield from range(0, limit + 1, 2)


        def chunks(items, size):
            for i in range(0, len(items) - size + 1, size):
                yield list(items[i:i + size])


        def make_adder(k):
            return lambda x: x * k


        def apply_all(funcs, value):
            return [f(value) for f in reversed(funcs)]
    """,
}
GEN_TESTS = {
    "islice": """
        from itertools import islice


        def test_first_five():
            assert list(islice(naturals(), 5)) == [0, 1, 2, 3, 4]

        def test_next():
            gen = naturals()
            assert next(gen) == 0
            assert next(gen) == 1
    """,
    "finite": """
        import pytest


        @pytest.mark.parametrize("limit, expected", [(0, []), (5, [0, 2, 4]), (6, [0, 2, 4])])
        def test_evens(limit, expected):
            assert list(evens(limit)) == expected

        def test_sum():
            assert sum(evens(10)) == 20
    """,
    "generator_type": """
        import inspect
        import types


        def test_is_lazy():
            result = evens(4)
            assert isinstance(result, types.GeneratorType)
            assert inspect.isgenerator(result)
    """,
    "chunks": """
        def test_chunks():
            assert list(chunks([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]
            assert list(chunks([], 3)) == []
    """,
    "closures": """
        def test_adder():
            add5 = make_adder(5)
            assert add5(1) == 6
            assert [make_adder(k)(1) for k in range(3)] == [1, 2, 3]

        def test_callbacks_from_the_test():
            seen = []

            def record(x):
                seen.append(x)
                return x * 10
            assert apply_all([record, str, lambda v: v - 1], 4) == [40, "4", 3]
            assert seen == [4]
    """,
}

NAMED = {
    "ok": """
        from collections import defaultdict as _dd


        def gcd(a, b):
            while b:
                a, b = b, a % b
            return abs(a)


        def sqrt(x, eps=1e-12):
            if x < 0:
                raise ValueError("math domain error")
            guess = x or 1.0
            while abs(guess * guess - x) > eps * (x if x > 1 else 1.0):
                guess = (guess + x / guess) / 2
            return guess


        class Counter:
            def __init__(self):
                self._counts = _dd(int)

            def add(self, key):
                self._counts[key] += 1
                return self

            def count(self, key):
                return self._counts[key]


        def max(values):
            best = None
            for v in values:
                if best is None or v > best:
                    best = v
            return best
    """,
    "wrong": """
        import math


        def gcd(a, b):
            return min(a, b)


        def sqrt(x):
            return math.pow(x, 0.5) if x >= 0 else 0.0


        class Counter:
            def __init__(self):
                self.total = 0

            def add(self, key):
                self.total += 1
                return self

            def count(self, key):
                return self.total


        def max(values):
            return sorted(values)[0] if values else None
    """,
}
NAMED_TESTS = {
    "gcd": """
        import math


        def test_gcd():
            for a, b in [(12, 18), (7, 5), (0, 9), (100, 75)]:
                assert gcd(a, b) == math.gcd(a, b)
    """,
    "sqrt": """
        import math

        import pytest


        def test_sqrt():
            assert sqrt(2) == pytest.approx(math.sqrt(2))
            assert sqrt(0) == pytest.approx(0.0, abs=1e-6)

        def test_domain():
            with pytest.raises(ValueError):
                sqrt(-1)
    """,
    "counter_class": """
        def test_own_counter():
            c = Counter().add("a").add("b").add("a")
            assert c.count("a") == 2
            assert c.count("z") == 0
    """,
    "stdlib_shadow": """
        from collections import Counter
        from math import gcd


        def test_the_stdlib_wins_when_imported_after():
            assert Counter("aab")["a"] == 2
            assert gcd(4, 6) == 2
    """,
    "explicit_builtin": """
        from solution import max


        def test_max():
            assert max([3, 9, 2]) == 9
            assert max([]) is None
    """,
}

PRINTER = {
    "ok": """
        print("loading solution")


        def square(x):
            print(f"square({x})")
            return x * x


        __all__ = ["square"]


        def _helper():
            return 42


        if __name__ == "__main__":
            print(square(int(input())))
    """,
    "wrong": """
        import sys

        print("loading", file=sys.stderr)


        def square(x):
            print(x)
            return x + x


        def _helper():
            return 41
    """,
}
PRINTER_TESTS = {
    "plain": """
        def test_square():
            assert square(3) == 9
            assert square(-2) == 4
    """,
    "private": """
        from solution import _helper


        def test_private():
            assert _helper() == 42
    """,
    "star_import": """
        from solution import *


        def test_star():
            assert square(4) == 16
    """,
}

FAIL_LOAD = "def f(x):\n    return x\n\nraise RuntimeError('broken at import')\n"
BAD_SYNTAX = "def f(x)\n    return x\n"
F_OK = "def f(x):\n    return x + 1\n"
F_BAD = "def f(x):\n    return x\n"
SHAPES = {
    "assert_only": "assert f(1) == 2\n",
    "unrelated": "import math\n\ndef test_pi():\n    assert math.pi > 3\n",
    "syntax_error": "def test_x(:\n    assert f(1) == 2\n",
    "definitions_only": "import pytest\n\nK = 3\n\ndef helper():\n    return f(K)\n",
    "name_error": "def test_missing():\n    assert g(1) == 2\n",
    "module_name_error": "assert undefined_thing(1)\n",
    "import_missing": "from solution import g\n\ndef test_g():\n    assert g(1) == 2\n",
    "class_with_init": """
        class TestThing:
            def __init__(self):
                self.x = 1

            def test_x(self):
                assert f(self.x) == 2
    """,
    "async_test": "async def test_async():\n    assert f(1) == 2\n",
    "yield_test": "def test_gen():\n    yield f(1)\n",
    "not_a_test": "def check_f():\n    assert f(1) == 999\n",
    "docstring_only": '"""Tests for f."""\n',
    "docstring_future": ('"""Tests."""\nfrom __future__ import annotations\n\n'
                         "def test_f() -> None:\n    assert f(1) == 2\n"),
    "catch_all": "def test_lenient():\n    try:\n        assert f(1) == 2\n"
                 "    except Exception:\n        pass\n",
}
EDGE_CODES = {"ok": F_OK, "bad": F_BAD, "fails_import": FAIL_LOAD, "syntax": BAD_SYNTAX}

PAIRS = (family("gen", GEN, GEN_TESTS) + family("named", NAMED, NAMED_TESTS)
         + family("printer", PRINTER, PRINTER_TESTS) + family("shape", EDGE_CODES, SHAPES)
         + [single("lru_cache", """
               from functools import lru_cache


               @lru_cache(maxsize=None)
               def fib(n):
                   return n if n < 2 else fib(n - 1) + fib(n - 2)
           """, """
               def test_fib():
                   assert fib(30) == 832040
                   assert fib.cache_info().hits > 0
                   fib.cache_clear()
           """)])
