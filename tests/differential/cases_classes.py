"""Candidate classes with methods (special methods, abstract bases, inheritance, ordering and
hashing) met by test classes with setup/teardown (``setup_method``/``teardown_method``,
``setup_class``, ``unittest.TestCase`` with ``setUp``/``tearDown``, ``expectedFailure``,
``unittest.skip``, ``subTest``) and by fixtures."""

from __future__ import annotations

from .corpus import family

STACK = {
    "ok": """
        class Stack:
            def __init__(self):
                self._items = []

            def push(self, item):
                self._items.append(item)

            def pop(self):
                if not self._items:
                    raise IndexError("pop from empty stack")
                return self._items.pop()

            def peek(self):
                if not self._items:
                    raise IndexError("peek at empty stack")
                return self._items[-1]

            def is_empty(self):
                return not self._items

            def __len__(self):
                return len(self._items)

            def __iter__(self):
                return iter(reversed(self._items))

            def __contains__(self, item):
                return item in self._items

            def __repr__(self):
                return f"Stack({self._items!r})"
    """,
    "fifo": """
        class Stack:
            def __init__(self):
                self._items = []

            def push(self, item):
                self._items.append(item)

            def pop(self):
                return self._items.pop(0)

            def peek(self):
                return self._items[0]

            def is_empty(self):
                return len(self._items) == 0

            def __len__(self):
                return len(self._items)

            def __iter__(self):
                return iter(self._items)

            def __contains__(self, item):
                return item in self._items

            def __repr__(self):
                return f"Stack({self._items!r})"
    """,
    "empty_none": """
        class Stack:
            def __init__(self):
                self.items = []

            def push(self, item):
                self.items.append(item)

            def pop(self):
                return self.items.pop() if self.items else None

            def peek(self):
                return self.items[-1] if self.items else None

            def is_empty(self):
                return self.items == []

            def __len__(self):
                return len(self.items)

            def __iter__(self):
                return iter(self.items[::-1])

            def __contains__(self, item):
                return item in self.items

            def __repr__(self):
                return "Stack(" + repr(self.items) + ")"
    """,
}
STACK_TESTS = {
    "setup_method": """
        import pytest


        class TestStack:
            def setup_method(self):
                self.stack = Stack()
                for x in (1, 2, 3):
                    self.stack.push(x)

            def teardown_method(self):
                self.stack = None

            def test_pop_order(self):
                assert [self.stack.pop() for _ in range(3)] == [3, 2, 1]

            def test_len(self):
                assert len(self.stack) == 3
                self.stack.pop()
                assert len(self.stack) == 2

            def test_empty_pop(self):
                with pytest.raises(IndexError):
                    Stack().pop()
    """,
    "setup_class": """
        class TestShared:
            @classmethod
            def setup_class(cls):
                cls.stack = Stack()
                cls.stack.push("a")
                cls.stack.push("b")

            def test_peek(self):
                assert self.stack.peek() == "b"

            def test_contains(self):
                assert "a" in self.stack
                assert "z" not in self.stack

            def test_iter_and_repr(self):
                assert list(self.stack) == ["b", "a"]
                assert repr(self.stack) == "Stack(['a', 'b'])"
    """,
    "unittest": """
        import unittest


        class StackTest(unittest.TestCase):
            def setUp(self):
                self.s = Stack()

            def tearDown(self):
                del self.s

            def test_empty(self):
                self.assertTrue(self.s.is_empty())
                self.assertEqual(len(self.s), 0)

            def test_push_pop(self):
                self.s.push(1)
                self.s.push(2)
                self.assertEqual(self.s.pop(), 2)
                self.assertFalse(self.s.is_empty())

            def test_pop_empty_raises(self):
                with self.assertRaises(IndexError):
                    self.s.pop()


        if __name__ == "__main__":
            unittest.main()
    """,
    "bare": """
        s = Stack()
        s.push(10)
        s.push(20)
        assert s.peek() == 20
        assert s.pop() == 20
        assert s.pop() == 10
        assert s.is_empty()
    """,
}

SHAPES = {
    "ok": """
        import math
        from abc import ABC, abstractmethod


        class Shape(ABC):
            @abstractmethod
            def area(self): ...

            def describe(self):
                return f"{type(self).__name__} with area {self.area():.2f}"


        class Circle(Shape):
            def __init__(self, r):
                self.r = r

            def area(self):
                return math.pi * self.r ** 2


        class Square(Shape):
            def __init__(self, side):
                self.side = side

            def area(self):
                return self.side ** 2

            def __eq__(self, other):
                return isinstance(other, Square) and other.side == self.side

            def __hash__(self):
                return hash(self.side)

            def __lt__(self, other):
                return self.area() < other.area()
    """,
    "no_abc": """
        class Shape:
            def area(self):
                return 0

            def describe(self):
                return f"{type(self).__name__} with area {self.area()}"


        class Circle(Shape):
            def __init__(self, r):
                self.r = r

            def area(self):
                return 3.14 * self.r * self.r


        class Square(Shape):
            def __init__(self, side):
                self.side = side

            def area(self):
                return self.side * 4
    """,
}
SHAPES_TESTS = {
    "polymorphism": """
        import math

        import pytest


        @pytest.fixture
        def shapes():
            return [Circle(1), Square(2)]

        def test_areas(shapes):
            assert [round(s.area(), 3) for s in shapes] == [round(math.pi, 3), 4]

        def test_inheritance(shapes):
            assert all(isinstance(s, Shape) for s in shapes)
            assert issubclass(Square, Shape)

        def test_describe():
            assert Square(3).describe() == "Square with area 9.00"
    """,
    "abstract": """
        import pytest


        def test_cannot_instantiate():
            with pytest.raises(TypeError):
                Shape()
    """,
    "equality": """
        def test_eq_hash_order():
            assert Square(2) == Square(2)
            assert Square(2) != Square(3)
            assert len({Square(1), Square(1), Square(2)}) == 2
            assert sorted([Square(3), Square(1)])[0].side == 1
    """,
    "expected_failure": """
        import unittest


        class KnownBugs(unittest.TestCase):
            @unittest.expectedFailure
            def test_circle_perimeter(self):
                self.assertEqual(Circle(1).perimeter(), 6.28)

            @unittest.expectedFailure
            def test_square_area(self):
                self.assertEqual(Square(2).area(), 4)

            @unittest.skip("not implemented")
            def test_triangle(self):
                self.fail("unreachable")
    """,
    "subtest": """
        import unittest


        class Areas(unittest.TestCase):
            def test_squares(self):
                for side in (1, 2, 3):
                    with self.subTest(side=side):
                        self.assertEqual(Square(side).area(), side * side)
    """,
}

PAIRS = family("stack", STACK, STACK_TESTS) + family("shapes", SHAPES, SHAPES_TESTS)
