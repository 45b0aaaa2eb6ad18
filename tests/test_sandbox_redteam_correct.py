"""Red team, side one: correct code is judged right. Each case is a correct candidate and a
test module written as a model writes them, whose verdict under real pytest (one process,
``solution.py`` beside ``test_0000.py``) is ``passed``; the sandbox must say the same. Where
a wrong variant is cheap, it is shown to fail the very same test, so no case passes by
accident.
"""

from __future__ import annotations

import textwrap

from sandbox import execute


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def verdicts(code: str, *tests: str) -> list[str]:
    result = execute(src(code), [src(t) for t in tests], timeout_s=5.0)
    return [o.status + (f": {o.message}" if o.status != "passed" else "")
            for o in result.outcomes]


POINT = """
    from dataclasses import dataclass, field


    @dataclass(order=True)
    class Point:
        x: int
        y: int = 0
        tags: list[str] = field(default_factory=list)

        def norm1(self) -> int:
            return abs(self.x) + abs(self.y)


    def origin() -> Point:
        return Point(0)


    def shift(p: Point, dx: int) -> Point:
        return Point(p.x + dx, p.y, list(p.tags))
"""


def test_an_annotated_dataclass_candidate():
    test = """
        import dataclasses

        def test_fields():
            p = Point(1, 2)
            assert (p.x, p.y, p.tags) == (1, 2, [])
            assert dataclasses.is_dataclass(p)
            assert dataclasses.asdict(p) == {"x": 1, "y": 2, "tags": []}
            assert [f.name for f in dataclasses.fields(Point)] == ["x", "y", "tags"]

        def test_eq_order_repr_methods():
            assert origin() == Point(0, 0) and type(origin()) is Point
            assert shift(Point(1, 1, ["a"]), 2) == Point(3, 1, ["a"])
            assert sorted([Point(3), Point(1)]) == [Point(1), Point(3)]
            assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=[])"
            assert Point(-2, 3).norm1() == 5
            assert dataclasses.replace(Point(1), y=5) == Point(1, 5)
    """
    assert verdicts(POINT, test) == ["passed"]
    wrong = POINT.replace("return Point(p.x + dx,", "return Point(p.x - dx,")
    assert verdicts(wrong, test)[0].startswith("failed: test_eq_order_repr_methods")


def test_an_annotated_dataclass_candidates_annotations():
    test = """
        import typing

        def test_hints():
            assert typing.get_type_hints(Point) == {"x": int, "y": int, "tags": list[str]}
            assert typing.get_type_hints(shift) == {"p": Point, "dx": int, "return": Point}
    """
    assert verdicts(POINT, test) == ["passed"]


INC = "def inc(x):\n    return x + 1\n"


def test_an_autouse_fixture_runs_around_every_test():
    test = """
        import pytest

        CALLS = []

        @pytest.fixture(autouse=True)
        def record():
            CALLS.append("setup")
            yield
            CALLS.append("teardown")

        def test_first():
            assert inc(1) == 2
            assert CALLS == ["setup"]

        def test_second():
            assert CALLS == ["setup", "teardown", "setup"]
    """
    assert verdicts(INC, test) == ["passed"]


def test_setup_class_once_and_setup_method_per_parametrized_case():
    test = """
        import pytest

        class TestSetup:
            log = []

            @classmethod
            def setup_class(cls):
                cls.base = inc(9)
                cls.log.append("class")

            def setup_method(self, method):
                self.log.append(method.__name__)
                self.value = inc(self.base)

            @pytest.mark.parametrize("k", [1, 2, 3])
            def test_value(self, k):
                assert self.value == 11
                assert self.log == ["class"] + ["test_value"] * k
    """
    assert verdicts(INC, test) == ["passed"]
    assert verdicts("def inc(x):\n    return x + 2\n", test)[0].startswith("failed")


def test_skipif_with_a_string_condition():
    code = "LIMIT = 5\n" + INC
    test = """
        import sys
        import pytest

        @pytest.mark.skipif("sys.version_info < (3, 8)", reason="old")
        def test_runs():
            assert inc(1) == 2

        @pytest.mark.skipif("LIMIT > 3", reason="the candidate's constant decides")
        def test_skipped():
            assert False

        @pytest.mark.skipif("inc(1) != 2", reason="the condition calls the candidate")
        def test_condition_calls_the_candidate():
            assert inc(2) == 3
    """
    result = execute(code, [src(test)])
    assert result.outcomes[0].status == "passed"
    assert [(i.name, i.outcome) for i in result.outcomes[0].items] == [
        ("test_runs", "passed"), ("test_skipped", "skipped"),
        ("test_condition_calls_the_candidate", "passed")]


def test_warnings_from_the_candidate_reach_pytest_warns():
    code = """
        import warnings

        def old(x):
            warnings.warn("old() is deprecated", DeprecationWarning, stacklevel=2)
            return x

        def loud(x):
            warnings.warn(f"careful with {x}")
            return x
    """
    test = """
        import warnings
        import pytest

        def test_warns():
            with pytest.warns(DeprecationWarning, match="deprecated"):
                assert old(3) == 3
            with pytest.warns(UserWarning) as record:
                loud(1)
                loud(2)
            assert [str(w.message) for w in record] == ["careful with 1", "careful with 2"]

        def test_deprecated_call():
            with pytest.deprecated_call():
                old(1)

        def test_recwarn(recwarn):
            loud(5)
            assert len(recwarn) == 1 and recwarn.pop(UserWarning).category is UserWarning

        def test_as_error():
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(UserWarning):
                    loud(9)
    """
    assert verdicts(code, test) == ["passed"]
    assert verdicts("def old(x):\n    return x\ndef loud(x):\n    return x\n",
                    test)[0].startswith("failed")


def test_a_returned_set_of_ints_iterates_in_cpythons_order():
    # CPython's order of an int set follows its hash table (the values modulo the table size,
    # probing, deletions): the test rebuilds each set the same way and compares the order.
    code = """
        def build(xs, drop=()):
            s = set()
            for x in xs:
                s.add(x)
            for x in drop:
                s.discard(x)
            return s

        def literal():
            return {100, 3, 64, 7, 1 << 40, -5, 33}

        def frozen():
            return frozenset(range(50, 0, -7))
    """
    test = """
        def local(xs, drop=()):
            s = set()
            for x in xs:
                s.add(x)
            for x in drop:
                s.discard(x)
            return s

        XS = [33, 1, 17, 64, 2, 100, 5, 8, 40, 1000, -1, -7, 2 ** 61, 2 ** 62 + 3]

        def test_orders():
            assert list(build(XS)) == list(local(XS))
            assert list(build(XS, XS[::2])) == list(local(XS, XS[::2]))
            big, gone = range(0, 400, 9), range(0, 300, 2)
            assert list(build(big, gone)) == list(local(big, gone))
            assert list(literal()) == list({100, 3, 64, 7, 1 << 40, -5, 33})
            assert list(frozen()) == list(frozenset(range(50, 0, -7)))
            assert str(build([8, 16, 24, 1])) == str(local([8, 16, 24, 1]))  # collisions
    """
    assert verdicts(code, test) == ["passed"]


def test_an_infinite_generator_drawn_with_islice():
    code = """
        import itertools

        def naturals():
            n = 0
            while True:
                yield n
                n += 1

        def primes():
            found = []
            for n in itertools.count(2):
                if all(n % p for p in found):
                    found.append(n)
                    yield n
    """
    test = """
        import itertools

        def test_islice():
            assert list(itertools.islice(naturals(), 5)) == [0, 1, 2, 3, 4]
            assert list(itertools.islice(primes(), 10)) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
            it = primes()
            assert next(it) == 2 and next(it) == 3
            assert list(zip(range(3), naturals())) == [(0, 0), (1, 1), (2, 2)]
            assert next(x for x in primes() if x > 100) == 101
    """
    assert verdicts(code, test) == ["passed"]


def test_a_returned_counter():
    code = """
        from collections import Counter

        def count(text):
            return Counter(text.split())

        def top(text, n):
            return count(text).most_common(n)
    """
    test = """
        from collections import Counter

        def test_counter():
            c = count("a b a c a b")
            assert c == Counter({"a": 3, "b": 2, "c": 1})
            assert type(c) is Counter and c["zzz"] == 0
            assert top("a b a c a b", 2) == [("a", 3), ("b", 2)]
            assert c.most_common(1) == [("a", 3)] and list(c) == ["a", "b", "c"]
            assert c + Counter("a") == Counter({"a": 4, "b": 2, "c": 1})
    """
    assert verdicts(code, test) == ["passed"]
    wrong = src(code).replace("text.split()", "text")
    assert verdicts(wrong, test)[0].startswith("failed")


RAISING = """
    class InsufficientFunds(Exception):
        def __init__(self, needed, available):
            super().__init__(f"need {needed}, have {available}")
            self.needed = needed
            self.available = available

    def withdraw(account, amount):
        if amount > account["balance"]:
            raise InsufficientFunds(amount, account["balance"])
        account["balance"] -= amount
        return account["balance"]

    def lookup(d, k):
        try:
            return d[k]
        except KeyError as exc:
            err = LookupError(f"no {k!r}")
            err.key = k
            err.add_note("looked everywhere")
            raise err from exc

    def opener(path):
        raise FileNotFoundError(2, "No such file or directory", path)
"""


def test_exception_attributes_are_kept():
    test = """
        import pytest

        def test_custom_attributes():
            with pytest.raises(InsufficientFunds, match="need 50, have 10") as info:
                withdraw({"balance": 10}, 50)
            assert (info.value.needed, info.value.available) == (50, 10)
            assert info.value.args == ("need 50, have 10",)

        def test_builtin_with_an_attribute_and_a_cause():
            with pytest.raises(LookupError, match="no 'k'") as info:
                lookup({}, "k")
            assert info.value.key == "k"
            assert type(info.value.__cause__) is KeyError and info.value.__cause__.args == ("k",)

        def test_oserror_fields():
            with pytest.raises(FileNotFoundError) as info:
                opener("/nope")
            assert (info.value.errno, info.value.strerror) == (2, "No such file or directory")
    """
    assert verdicts(RAISING, test) == ["passed"]


def test_oserror_filename_is_kept():
    test = """
        import pytest

        def test_filename():
            with pytest.raises(FileNotFoundError) as info:
                opener("/nope")
            assert info.value.filename == "/nope"
            assert str(info.value) == "[Errno 2] No such file or directory: '/nope'"
    """
    assert verdicts(RAISING, test) == ["passed"]


def test_exception_notes_are_kept():
    test = """
        import pytest

        def test_notes():
            with pytest.raises(LookupError) as info:
                lookup({}, "k")
            assert info.value.__notes__ == ["looked everywhere"]
    """
    assert verdicts(RAISING, test) == ["passed"]


def test_an_argument_mutated_before_the_candidate_raises_stays_mutated():
    code = """
        def debit_then_check(account, amount):
            account["balance"] -= amount
            account.setdefault("log", []).append(-amount)
            if account["balance"] < 0:
                raise ValueError("overdrawn")
            return account["balance"]

        def push_then_fail(stack, x):
            stack.append(x)
            stack.sort()
            raise RuntimeError("full")
    """
    test = """
        import pytest

        def test_dict():
            acct = {"balance": 10}
            with pytest.raises(ValueError):
                debit_then_check(acct, 25)
            assert acct == {"balance": -15, "log": [-25]}

        def test_list():
            s = [3, 1]
            with pytest.raises(RuntimeError, match="full"):
                push_then_fail(s, 2)
            assert s == [1, 2, 3]
    """
    assert verdicts(code, test) == ["passed"]


def test_a_pool_of_32_threads():
    # (each thread's malloc arena used to reserve 64 MB of the 512 MB address space: only
    # about 13 threads could start; see jail.MALLOC_ARENA_MAX)
    code = """
        from concurrent.futures import ThreadPoolExecutor

        def squares(n):
            with ThreadPoolExecutor(max_workers=32) as pool:
                return list(pool.map(lambda x: x * x, range(n)))
    """
    test = "def test_pool():\n    assert squares(1000) == [x * x for x in range(1000)]\n"
    assert verdicts(code, test) == ["passed"]
