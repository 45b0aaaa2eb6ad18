"""Plain functions: bare module-level asserts, test functions, explicit imports, helpers and
constants, parametrize, recursion; each test module against right and wrong candidates."""

from __future__ import annotations

from .corpus import family

ADD = {
    "ok": "def add(a, b):\n    return a + b\n",
    "sub": "def add(a, b):\n    return a - b\n",
    "off_by_one": "def add(a, b):\n    return a + b + 1\n",
    "no_return": "def add(a, b):\n    a + b\n",
    "raises": "def add(a, b):\n    raise NotImplementedError('todo')\n",
    "prints": "def add(a, b):\n    print('adding', a, b)\n    return a + b\n",
    "strings": "def add(a, b):\n    return int(str(a) + str(b))\n",
}
ADD_TESTS = {
    "bare": """
        assert add(1, 2) == 3
        assert add(-1, 1) == 0
        assert add(0, 0) == 0
    """,
    "functions": """
        def test_small():
            assert add(2, 3) == 5

        def test_negative():
            assert add(-2, -3) == -5

        def test_zero():
            assert add(0, 7) == 7
    """,
    "explicit_import": """
        from solution import add


        def test_add():
            assert add(10, 20) == 30, "10 + 20 should be 30"
    """,
    "helper_constants": """
        CASES = [(1, 2, 3), (0, 0, 0), (-5, 5, 0), (100, 1, 101)]


        def check(a, b, expected):
            result = add(a, b)
            assert result == expected, f"add({a}, {b}) = {result}, expected {expected}"


        def test_all_cases():
            for a, b, expected in CASES:
                check(a, b, expected)
    """,
    "body_loop": """
        for a in range(3):
            for b in range(3):
                assert add(a, b) == a + b, (a, b)
    """,
    "module_attr": """
        import solution


        def test_through_module():
            assert solution.add(1, 1) == 2
            assert callable(solution.add)
    """,
    "parametrize": """
        import pytest


        @pytest.mark.parametrize("a, b, expected", [(1, 2, 3), (2, 2, 4), (-1, -1, -2)])
        def test_add(a, b, expected):
            assert add(a, b) == expected
    """,
}

PALINDROME = {
    "ok": """
        def is_palindrome(s: str) -> bool:
            cleaned = [c.lower() for c in s if c.isalnum()]
            return cleaned == cleaned[::-1]
    """,
    "naive": """
        def is_palindrome(s):
            return s == s[::-1]
    """,
    "always_true": """
        def is_palindrome(s):
            return True
    """,
    "type_error": """
        def is_palindrome(s):
            if not s:
                raise TypeError("empty")
            return s.lower() == s.lower()[::-1]
    """,
}
PALINDROME_TESTS = {
    "param_ids": """
        import pytest


        @pytest.mark.parametrize(
            "text, expected",
            [("racecar", True), ("A man, a plan, a canal: Panama", True), ("hello", False),
             ("", True)],
            ids=["simple", "sentence", "no", "empty"],
        )
        def test_is_palindrome(text, expected):
            assert is_palindrome(text) is expected
    """,
    "class": """
        class TestPalindrome:
            def test_word(self):
                assert is_palindrome("level")

            def test_not(self):
                assert not is_palindrome("python")

            def test_mixed_case(self):
                assert is_palindrome("Noon")
    """,
    "bare_not": """
        assert is_palindrome("abba")
        assert not is_palindrome("abc")
    """,
}

FACTORIAL = {
    "recursive": """
        def factorial(n):
            if n < 0:
                raise ValueError("negative")
            return 1 if n <= 1 else n * factorial(n - 1)
    """,
    "iterative": """
        from functools import reduce
        import operator


        def factorial(n: int) -> int:
            if n < 0:
                raise ValueError(f"factorial of negative number {n}")
            return reduce(operator.mul, range(1, n + 1), 1)
    """,
    "bad_base": """
        def factorial(n):
            if n == 0:
                return 0
            return n * factorial(n - 1) if n > 1 else 1
    """,
    "no_base": """
        def factorial(n):
            return n * factorial(n - 1)
    """,
    "no_check": """
        import math


        def factorial(n):
            return math.prod(range(1, n + 1))
    """,
}
FACTORIAL_TESTS = {
    "values": """
        assert factorial(0) == 1
        assert factorial(1) == 1
        assert factorial(5) == 120
    """,
    "param": """
        import pytest


        @pytest.mark.parametrize("n, expected", [(0, 1), (3, 6), (6, 720), (10, 3628800)])
        def test_factorial(n, expected):
            assert factorial(n) == expected
    """,
    "negative": """
        import pytest


        def test_negative_raises():
            with pytest.raises(ValueError):
                factorial(-1)
    """,
    "big": """
        import math


        def test_big_numbers():
            assert factorial(30) == math.factorial(30)
            assert factorial(50) % 10 ** 12 == 0
    """,
}

FIZZBUZZ = {
    "ok": """
        def fizzbuzz(n):
            out = []
            for i in range(1, n + 1):
                if i % 15 == 0:
                    out.append("FizzBuzz")
                elif i % 3 == 0:
                    out.append("Fizz")
                elif i % 5 == 0:
                    out.append("Buzz")
                else:
                    out.append(str(i))
            return out
    """,
    "order": """
        def fizzbuzz(n):
            out = []
            for i in range(1, n + 1):
                if i % 3 == 0:
                    out.append("Fizz")
                elif i % 5 == 0:
                    out.append("Buzz")
                elif i % 15 == 0:
                    out.append("FizzBuzz")
                else:
                    out.append(str(i))
            return out
    """,
    "range": """
        def fizzbuzz(n):
            return ["FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else
                    "Buzz" if i % 5 == 0 else str(i) for i in range(n)]
    """,
}
FIZZBUZZ_TESTS = {
    "last": "assert fizzbuzz(15)[-1] == 'FizzBuzz'\n",
    "prefix": """
        def test_first_five():
            assert fizzbuzz(5) == ["1", "2", "Fizz", "4", "Buzz"]
    """,
    "length": """
        def test_length():
            for n in (0, 1, 10):
                assert len(fizzbuzz(n)) == n
    """,
}

TWO_SUM = {
    "list": """
        from typing import List, Optional


        def two_sum(nums: List[int], target: int) -> Optional[List[int]]:
            seen = {}
            for i, x in enumerate(nums):
                if target - x in seen:
                    return [seen[target - x], i]
                seen[x] = i
            return None
    """,
    "tuple": """
        def two_sum(nums, target):
            for i in range(len(nums)):
                for j in range(i + 1, len(nums)):
                    if nums[i] + nums[j] == target:
                        return (i, j)
    """,
    "values": """
        def two_sum(nums, target):
            for i, a in enumerate(nums):
                for b in nums[i + 1:]:
                    if a + b == target:
                        return [a, b]
            return []
    """,
    "reversed": """
        def two_sum(nums, target):
            seen = {}
            for i, x in enumerate(nums):
                if target - x in seen:
                    return [i, seen[target - x]]
                seen[x] = i
    """,
}
TWO_SUM_TESTS = {
    "exact": "assert two_sum([2, 7, 11, 15], 9) == [0, 1]\n",
    "sorted": """
        def test_sorted_indices():
            assert sorted(two_sum([3, 2, 4], 6)) == [1, 2]
    """,
    "missing": """
        def test_no_solution():
            assert two_sum([1, 2], 10) is None
    """,
}

PAIRS = (family("add", ADD, ADD_TESTS) + family("palindrome", PALINDROME, PALINDROME_TESTS)
         + family("factorial", FACTORIAL, FACTORIAL_TESTS)
         + family("fizzbuzz", FIZZBUZZ, FIZZBUZZ_TESTS)
         + family("two_sum", TWO_SUM, TWO_SUM_TESTS))
