"""More of what crosses between a test and its candidate: candidate ``Enum`` members and
classes as ``parametrize`` values (pytest names the items after them), numbers at the edges
(infinities, ``-0.0``, big ints, ``Fraction``, ``Decimal``, complex), dict views and lazy
iterators (``map``, ``zip``, ``filter``), bytes, a mutable default argument, a generator that
raises, module-level data of the candidate, and ``typing`` constructs (``TypedDict``,
``Generic[T]`` subscripted)."""

from __future__ import annotations

from .corpus import family

CASES: dict[str, tuple[str, str, str]] = {}  # name -> (right code, wrong code, test)

CASES["enum_parametrize"] = ("""
    from enum import Enum


    class Op(Enum):
        ADD = "+"
        MUL = "*"


    def apply(op, a, b):
        return a + b if op is Op.ADD else a * b
""", """
    from enum import Enum


    class Op(Enum):
        ADD = "+"
        MUL = "*"


    def apply(op, a, b):
        return a * b if op is Op.ADD else a + b
""", """
    import pytest


    @pytest.mark.parametrize("op", list(Op))
    def test_apply(op):
        assert apply(op, 2, 3) == {"+": 5, "*": 6}[op.value]
""")

CASES["numbers"] = ("""
    from decimal import Decimal
    from fractions import Fraction


    def values():
        return [float("inf"), -0.0, 1e308, 2 ** 100, Fraction(1, 3), Decimal("1.10"), 1 + 2j,
                -float("inf")]
""", """
    def values():
        return [1e308 * 10, 0.0, 1e308, 2.0 ** 100, 1 / 3, 1.1, complex(1, 2), -1e308 * 10]
""", """
    import math
    from fractions import Fraction


    def test_edges():
        v = values()
        assert v[0] == math.inf and v[-1] == -math.inf
        assert math.copysign(1, v[1]) == -1

    def test_exact_types():
        v = values()
        assert v[2] == 1e308 and v[3] == 2 ** 100 and type(v[3]) is int
        assert v[4] == Fraction(1, 3) and str(v[5]) == "1.10" and v[6] == 1 + 2j
""")

CASES["views_and_iterators"] = ("""
    def keys(d):
        return d.keys()


    def items(d):
        return d.items()


    def doubled(xs):
        return map(lambda x: 2 * x, xs)


    def pairs(a, b):
        return zip(a, b)


    def evens(xs):
        return filter(lambda x: x % 2 == 0, xs)
""", """
    def keys(d):
        return list(d)


    def items(d):
        return sorted(d.items(), reverse=True)


    def doubled(xs):
        return [2 * x for x in xs]


    def pairs(a, b):
        return list(zip(a, b))


    def evens(xs):
        return [x for x in xs if x % 2]
""", """
    def test_views():
        d = {"a": 1, "b": 2}
        assert keys(d) == {"a", "b"}
        assert list(items(d)) == [("a", 1), ("b", 2)]

    def test_lazy():
        m = doubled([1, 2])
        assert isinstance(m, map)
        assert list(m) == [2, 4]
        assert list(m) == []
        assert dict(pairs("ab", [1, 2])) == {"a": 1, "b": 2}
        assert list(evens(range(5))) == [0, 2, 4]
""")

CASES["bytes"] = ("""
    def encode(s):
        return s.encode("utf-8")


    def buffer(n):
        return bytearray(n)
""", """
    def encode(s):
        return s.encode("latin-1")


    def buffer(n):
        return bytes(n)
""", """
    def test_bytes():
        assert encode("h\\u00e9") == b"h\\xc3\\xa9"

    def test_bytearray():
        b = buffer(3)
        b[0] = 1
        assert b == bytearray(b"\\x01\\x00\\x00")
""")

CASES["mutable_default"] = ("""
    def add_item(x, items=[]):
        items.append(x)
        return items
""", """
    def add_item(x, items=None):
        items = items or []
        items.append(x)
        return items
""", """
    def test_the_default_is_shared_between_calls():
        assert add_item(1) == [1]
        assert add_item(2) == [1, 2]
        assert add_item(3, []) == [3]
""")

CASES["generator_raises"] = ("""
    def parse_all(items):
        for x in items:
            if not x.isdigit():
                raise ValueError(x)
            yield int(x)
""", """
    def parse_all(items):
        for x in items:
            if x.isdigit():
                yield int(x)
""", """
    import pytest


    def test_stops_at_the_bad_item():
        g = parse_all(["1", "x", "2"])
        assert next(g) == 1
        with pytest.raises(ValueError, match="x"):
            next(g)
        with pytest.raises(StopIteration):
            next(g)
""")

CASES["classes_as_parameters"] = ("""
    class Bubble:
        def sort(self, xs):
            xs = list(xs)
            for i in range(len(xs)):
                for j in range(len(xs) - 1 - i):
                    if xs[j] > xs[j + 1]:
                        xs[j], xs[j + 1] = xs[j + 1], xs[j]
            return xs


    class Builtin:
        def sort(self, xs):
            return sorted(xs)


    def merge_sort(xs):
        if len(xs) <= 1:
            return list(xs)
        mid = len(xs) // 2
        a, b = merge_sort(xs[:mid]), merge_sort(xs[mid:])
        out = []
        while a and b:
            out.append((a if a[0] <= b[0] else b).pop(0))
        return out + a + b
""", """
    class Bubble:
        def sort(self, xs):
            xs = list(xs)
            for i in range(len(xs) - 1):
                if xs[i] > xs[i + 1]:
                    xs[i], xs[i + 1] = xs[i + 1], xs[i]
            return xs


    class Builtin:
        def sort(self, xs):
            return sorted(xs)


    def merge_sort(xs):
        return sorted(set(xs))
""", """
    import pytest


    @pytest.mark.parametrize("cls", [Bubble, Builtin])
    @pytest.mark.parametrize("fn", [merge_sort, sorted])
    def test_sorters_agree(cls, fn):
        data = [3, 1, 2, 3, 0]
        assert cls().sort(data) == fn(data) == [0, 1, 2, 3, 3]
""")

CASES["module_data"] = ("""
    PRIMES = [2, 3, 5, 7]
    LIMITS = {"max": 10}


    def is_prime(n):
        return n in PRIMES
""", """
    PRIMES = [1, 2, 3, 5, 7]
    LIMITS = {"max": 7}


    def is_prime(n):
        return n in PRIMES
""", """
    def test_constants():
        assert PRIMES[:2] == [2, 3]
        assert LIMITS["max"] == 10

    def test_uses_them():
        assert all(is_prime(p) for p in PRIMES)
        assert not is_prime(4)
""")

CASES["typing_constructs"] = ("""
    from typing import Generic, TypedDict, TypeVar

    T = TypeVar("T")


    class Movie(TypedDict):
        title: str
        year: int


    class Box(Generic[T]):
        def __init__(self, item: T):
            self.item = item

        def get(self) -> T:
            return self.item


    def make_movie(title: str, year: int) -> Movie:
        return {"title": title, "year": year}
""", """
    from typing import Generic, TypeVar

    T = TypeVar("T")


    class Box(Generic[T]):
        def __init__(self, item):
            self.items = [item]

        def get(self):
            return self.items


    def make_movie(title, year):
        return (title, year)
""", """
    def test_typed_dict():
        assert make_movie("x", 1999) == {"title": "x", "year": 1999}

    def test_generic():
        assert Box[int](3).get() == 3
        assert Box("a").get() == "a"
""")

PAIRS = [p for name, (right, wrong, test) in CASES.items()
         for p in family(name, {"right": right, "wrong": wrong}, {"test": test})]
