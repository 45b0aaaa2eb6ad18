"""A candidate's objects used the ways a test uses them: operators and special methods,
context managers, iterator and sequence protocols, properties with setters and ``__slots__``,
chained exceptions, copies and ``vars``. Each test module meets a right candidate and a
subtly wrong one."""

from __future__ import annotations

from .corpus import family

CASES: dict[str, tuple[str, str, str]] = {}  # name -> (right code, wrong code, test)

CASES["vector"] = ("""
    import math


    class Vector:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def __add__(self, o):
            return Vector(self.x + o.x, self.y + o.y)

        def __mul__(self, k):
            return Vector(self.x * k, self.y * k)

        __rmul__ = __mul__

        def __abs__(self):
            return math.hypot(self.x, self.y)

        def __eq__(self, o):
            return isinstance(o, Vector) and (self.x, self.y) == (o.x, o.y)

        def __repr__(self):
            return f"Vector({self.x}, {self.y})"

        def __bool__(self):
            return bool(self.x or self.y)

        def __iter__(self):
            yield self.x
            yield self.y
""", """
    class Vector:
        def __init__(self, x, y):
            self.x, self.y = x, y

        def __add__(self, o):
            return Vector(self.x + o.x, self.y + o.x)

        def __mul__(self, k):
            return Vector(self.x * k, self.y * k)

        def __abs__(self):
            return abs(self.x) + abs(self.y)

        def __eq__(self, o):
            return (self.x, self.y) == (o.x, o.y)

        def __repr__(self):
            return f"Vector(x={self.x}, y={self.y})"

        def __iter__(self):
            return iter((self.x, self.y))
""", """
    def test_arithmetic():
        v = Vector(3, 4)
        assert abs(v) == 5
        assert v + Vector(1, 2) == Vector(4, 6)
        assert v + v + v == Vector(9, 12)

    def test_protocols():
        v = Vector(3, 4)
        assert not Vector(0, 0)
        x, y = v
        assert (x, y) == (3, 4)
        assert str(v) == "Vector(3, 4)"
        assert f"{v!r}" == "Vector(3, 4)"
""")

CASES["context_manager"] = ("""
    class Resource:
        opened = 0

        def __enter__(self):
            Resource.opened += 1
            return self

        def __exit__(self, *exc):
            Resource.opened -= 1
            return False

        def use(self):
            return "used"
""", """
    class Resource:
        opened = 0

        def __enter__(self):
            Resource.opened += 1
            return self

        def __exit__(self, *exc):
            if exc[0] is None:
                Resource.opened -= 1
            return True

        def use(self):
            return "used"
""", """
    import pytest


    def test_with():
        with Resource() as r:
            assert r.use() == "used"
            assert Resource.opened == 1
        assert Resource.opened == 0

    def test_exception_propagates():
        with pytest.raises(KeyError):
            with Resource():
                raise KeyError("x")
        assert Resource.opened == 0
""")

CASES["chained_error"] = ("""
    class ParseError(ValueError):
        def __init__(self, line, msg):
            super().__init__(f"line {line}: {msg}")
            self.line = line


    def parse(s):
        try:
            return int(s)
        except ValueError as e:
            raise ParseError(1, "bad int") from e
""", """
    class ParseError(Exception):
        def __init__(self, line, msg):
            super().__init__(msg)
            self.line = line


    def parse(s):
        if not s.strip("-").isdigit():
            raise ParseError(0, "bad int")
        return int(s)
""", """
    import pytest


    def test_parse_error():
        with pytest.raises(ParseError) as info:
            parse("x")
        assert info.value.line == 1
        assert isinstance(info.value.__cause__, ValueError)
        assert info.value.args == ("line 1: bad int",)

    def test_is_a_value_error():
        with pytest.raises(ValueError, match=r"line \\d+"):
            parse("y")
        assert parse("-12") == -12
""")

CASES["iterators"] = ("""
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return self

        def __next__(self):
            if self.n <= 0:
                raise StopIteration
            self.n -= 1
            return self.n + 1


    class Squares:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if i >= self.n:
                raise IndexError(i)
            return i * i
""", """
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n, -1, -1))


    class Squares:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if i > self.n:
                raise IndexError(i)
            return i * i
""", """
    def test_countdown():
        assert list(Countdown(3)) == [3, 2, 1]
        it = iter(Countdown(1))
        assert next(it) == 1
        assert next(it, None) is None

    def test_sequence_protocol():
        s = Squares(4)
        assert list(s) == [0, 1, 4, 9]
        assert s[2] == 4 and len(s) == 4
        assert 9 in s and 16 not in s
""")

CASES["property_slots"] = ("""
    class Temperature:
        __slots__ = ("_c",)

        def __init__(self, c):
            self._c = c

        @property
        def f(self):
            return self._c * 9 / 5 + 32

        @f.setter
        def f(self, value):
            self._c = (value - 32) * 5 / 9
""", """
    class Temperature:
        def __init__(self, c):
            self._c = c
            self.f = c * 9 / 5 + 32
""", """
    import pytest


    def test_property():
        t = Temperature(100)
        assert t.f == 212
        t.f = 32
        assert t._c == 0

    def test_slots():
        with pytest.raises(AttributeError):
            Temperature(0).other = 1
""")

CASES["copies_vars"] = ("""
    import copy


    class Box:
        def __init__(self, items):
            self.items = list(items)

        def clone(self):
            return copy.deepcopy(self)
""", """
    class Box:
        def __init__(self, items):
            self.items = items
            self._size = len(items)

        def clone(self):
            return self
""", """
    import copy


    def test_deepcopy():
        b = Box([1, [2]])
        c = copy.deepcopy(b)
        assert c is not b
        assert c.items == [1, [2]]
        assert copy.copy(b).items == [1, [2]]

    def test_clone_and_vars():
        b = Box([3])
        assert b.clone() is not b
        assert vars(b) == {"items": [3]}
""")

PAIRS = [p for name, (right, wrong, test) in CASES.items()
         for p in family(name, {"right": right, "wrong": wrong}, {"test": test})]
