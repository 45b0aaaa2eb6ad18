"""The standard library working on a candidate's objects (``dataclasses`` helpers, an ``Enum``
class iterated, counted and indexed), module state kept between tests, and callbacks (key
functions, a decorator applied to the test's own function). Each test module meets a right
candidate and a subtly wrong one."""

from __future__ import annotations

from .corpus import family

CASES: dict[str, tuple[str, str, str]] = {}  # name -> (right code, wrong code, test)

CASES["dataclass_helpers"] = ("""
    from dataclasses import dataclass, field


    @dataclass
    class Item:
        name: str
        qty: int = 1
        tags: list = field(default_factory=list)


    def restock(item, n):
        return Item(item.name, item.qty + n, list(item.tags))
""", """
    class Item:
        def __init__(self, name, qty=1, tags=None):
            self.name, self.qty, self.tags = name, qty, tags or []

        def __eq__(self, other):
            return vars(self) == vars(other)


    def restock(item, n):
        item.qty += n
        return item
""", """
    import dataclasses


    def test_helpers():
        item = restock(Item("nut", 2), 3)
        assert dataclasses.is_dataclass(item)
        assert dataclasses.asdict(item) == {"name": "nut", "qty": 5, "tags": []}
        assert dataclasses.astuple(item) == ("nut", 5, [])
        assert [f.name for f in dataclasses.fields(Item)] == ["name", "qty", "tags"]
        assert dataclasses.replace(item, qty=0) == Item("nut", 0)
""")

CASES["enum_class"] = ("""
    from enum import Enum


    class Color(Enum):
        RED = 1
        GREEN = 2
        BLUE = 3


    def warm(color):
        return color is Color.RED
""", """
    from enum import Enum


    class Color(Enum):
        RED = 1
        GREEN = 2


    def warm(color):
        return color.value == 1 or color.name == "GREEN"
""", """
    def test_members():
        assert [c.name for c in Color] == ["RED", "GREEN", "BLUE"]
        assert len(Color) == 3
        assert Color(2) is Color.GREEN
        assert Color["BLUE"].value == 3
        assert Color.RED in Color
        assert list(Color.__members__) == ["RED", "GREEN", "BLUE"]

    def test_warm():
        assert warm(Color.RED)
        assert not any(warm(c) for c in list(Color)[1:])
""")

CASES["callbacks"] = ("""
    import functools


    def sort_by(items, key):
        return sorted(items, key=key)


    def count_calls(fn):
        calls = []

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            calls.append(args)
            return fn(*args, **kwargs)
        wrapper.get_calls = lambda: list(calls)
        return wrapper
""", """
    def sort_by(items, key):
        return sorted(items)


    def count_calls(fn):
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper
""", """
    def test_key():
        assert sort_by([3, 1, 2], key=lambda x: -x) == [3, 2, 1]
        assert sort_by(["bb", "a"], key=len) == ["a", "bb"]

    def test_decorates_the_tests_function():
        @count_calls
        def double(x):
            return 2 * x
        assert double(4) == 8
        assert double.__name__ == "double"
""")

CASES["module_state"] = ("""
    _next = 0
    registry = {}


    def next_id():
        global _next
        _next += 1
        return _next


    def register(name):
        registry[name] = next_id()
        return registry[name]


    def lookup(name):
        return registry.get(name)
""", """
    def next_id():
        return 1


    def register(name):
        return next_id()


    def lookup(name):
        return None
""", """
    def test_first():
        assert next_id() == 1

    def test_second_sees_the_first():
        assert next_id() == 2
        assert register("a") == 3
        assert lookup("a") == 3
        assert lookup("b") is None
""")

PAIRS = [p for name, (right, wrong, test) in CASES.items()
         for p in family(name, {"right": right, "wrong": wrong}, {"test": test})]
