"""Values a candidate returns: ``Counter``/``defaultdict``/``OrderedDict``/``deque``, sets (of
small ints: their order is their value), tuples, ``None``, annotated dataclasses (frozen,
ordered), namedtuples, enums, typing; and the arguments it mutates (in place, nested, then
raising)."""

from __future__ import annotations

from .corpus import family

WORDS = {
    "counter": """
        from collections import Counter


        def word_counts(text):
            return Counter(text.lower().split())


        def group_by_len(words):
            from collections import defaultdict
            groups = defaultdict(list)
            for w in words:
                groups[len(w)].append(w)
            return groups


        def unique_lengths(words):
            return {len(w) for w in words}


        def last_n(items, n):
            from collections import deque
            return deque(items, maxlen=n)


        def first_seen(items):
            from collections import OrderedDict
            return OrderedDict((x, i) for i, x in reversed(list(enumerate(items))))
    """,
    "plain_dicts": """
        def word_counts(text):
            counts = {}
            for w in text.split():
                counts[w] = counts.get(w, 0) + 1
            return counts


        def group_by_len(words):
            groups = {}
            for w in words:
                groups.setdefault(len(w), []).append(w)
            return groups


        def unique_lengths(words):
            return sorted({len(w) for w in words})


        def last_n(items, n):
            return list(items)[-n:]


        def first_seen(items):
            out = {}
            for i, x in enumerate(items):
                out.setdefault(x, i)
            return out
    """,
    "buggy": """
        from collections import Counter, OrderedDict, defaultdict, deque


        def word_counts(text):
            return Counter(text.split())


        def group_by_len(words):
            groups = defaultdict(set)
            for w in words:
                groups[len(w)].add(w)
            return groups


        def unique_lengths(words):
            return set(len(w) for w in words[1:])


        def last_n(items, n):
            return deque(items[:n])


        def first_seen(items):
            return OrderedDict((x, i) for i, x in enumerate(items))
    """,
}
WORDS_TESTS = {
    "counter_eq": """
        from collections import Counter


        def test_counts():
            result = word_counts("the cat The dog")
            assert result == {"the": 2, "cat": 1, "dog": 1}
            assert result["the"] == 2

        def test_counter_api():
            result = word_counts("a b a c a")
            assert isinstance(result, Counter)
            assert result.most_common(1) == [("a", 3)]
            assert result["zzz"] == 0
    """,
    "defaultdict": """
        from collections import defaultdict


        def test_groups():
            groups = group_by_len(["a", "bb", "cc", "d"])
            assert groups[1] == ["a", "d"]
            assert groups[2] == ["bb", "cc"]
            assert dict(groups) == {1: ["a", "d"], 2: ["bb", "cc"]}

        def test_missing_key_default():
            groups = group_by_len(["abc"])
            assert isinstance(groups, defaultdict)
            assert groups[99] == []
            assert 99 in groups
    """,
    "sets": """
        def test_set_value():
            assert unique_lengths(["a", "bb", "cc", "ddd"]) == {1, 2, 3}

        def test_set_iteration_order():
            result = unique_lengths(["aaaa", "a", "aaa", "aa"])
            assert list(result) == [1, 2, 3, 4]
            assert sorted(result) == [1, 2, 3, 4]
            assert type(result) is set
    """,
    "deque": """
        from collections import deque


        def test_last_n():
            d = last_n([1, 2, 3, 4, 5], 3)
            assert list(d) == [3, 4, 5]
            assert d == deque([3, 4, 5])
            assert d.maxlen == 3
            d.append(6)
            assert list(d) == [4, 5, 6]
    """,
    "ordered": """
        from collections import OrderedDict


        def test_first_seen():
            result = first_seen(["b", "a", "b", "c"])
            assert result == {"b": 0, "a": 1, "c": 3}
            assert list(result) == ["b", "a", "c"]
            assert result == OrderedDict([("b", 0), ("a", 1), ("c", 3)])
    """,
}

RECORDS = {
    "dataclass": """
        from dataclasses import dataclass, field
        from enum import Enum
        from typing import NamedTuple, Optional


        class Color(Enum):
            RED = 1
            GREEN = 2


        class Pair(NamedTuple):
            left: int
            right: int = 0


        @dataclass(order=True)
        class Point:
            x: int
            y: int = 0
            tags: list = field(default_factory=list, compare=False)

            def norm1(self) -> int:
                return abs(self.x) + abs(self.y)


        @dataclass(frozen=True)
        class Version:
            major: int
            minor: int


        def parse_point(text: str) -> Optional[Point]:
            if "," not in text:
                return None
            x, y = (int(v) for v in text.split(","))
            return Point(x, y)


        def color_of(name: str) -> Color:
            return Color[name.upper()]


        def split_pair(n: int) -> Pair:
            return Pair(n // 2, n - n // 2)
    """,
    "swapped": """
        from dataclasses import dataclass, field
        from enum import Enum
        from typing import NamedTuple


        class Color(Enum):
            RED = 1
            GREEN = 2


        class Pair(NamedTuple):
            left: int
            right: int = 0


        @dataclass(order=True)
        class Point:
            x: int
            y: int = 0
            tags: list = field(default_factory=list, compare=False)

            def norm1(self):
                return self.x + self.y


        @dataclass
        class Version:
            major: int
            minor: int


        def parse_point(text):
            x, y = text.split(",")
            return Point(int(y), int(x))


        def color_of(name):
            return Color.RED


        def split_pair(n):
            return (n - n // 2, n // 2)
    """,
}
RECORDS_TESTS = {
    "dataclass_eq": """
        def test_parse():
            assert parse_point("1,2") == Point(1, 2)
            assert parse_point("1,2") != Point(2, 1)
            assert parse_point("nothing") is None

        def test_fields():
            p = parse_point("3,-4")
            assert (p.x, p.y) == (3, -4)
            assert p.norm1() == 7
            assert repr(p) == "Point(x=3, y=-4, tags=[])"
    """,
    "dataclass_order": """
        def test_sorting():
            pts = [Point(2, 1), Point(1, 5), Point(1, 2)]
            assert sorted(pts) == [Point(1, 2), Point(1, 5), Point(2, 1)]
            assert max(pts).x == 2
            assert Point(0, 0, ["a"]) == Point(0, 0, ["b"])
    """,
    "frozen": """
        import dataclasses

        import pytest


        def test_frozen():
            v = Version(1, 2)
            with pytest.raises(dataclasses.FrozenInstanceError):
                v.major = 3
            assert len({Version(1, 2), Version(1, 2)}) == 1
    """,
    "enum": """
        def test_color():
            assert color_of("green") is Color.GREEN
            assert color_of("red").value == 1
            assert color_of("red").name == "RED"
    """,
    "namedtuple": """
        def test_pair():
            p = split_pair(7)
            assert p == (3, 4)
            assert p.left == 3 and p.right == 4
            assert split_pair(4) == Pair(2, 2)
            assert Pair(5) == (5, 0)
    """,
}

MUTATE = {
    "in_place": """
        def sort_in_place(items):
            items.sort()


        def add_default(config, key, value):
            config.setdefault(key, value)
            return config


        def append_then_fail(log, entry):
            log.append(entry)
            if entry < 0:
                raise ValueError(f"negative entry {entry}")
            return len(log)


        def bump_all(matrix):
            for row in matrix:
                for i in range(len(row)):
                    row[i] += 1
    """,
    "copies": """
        def sort_in_place(items):
            return sorted(items)


        def add_default(config, key, value):
            new = dict(config)
            new.setdefault(key, value)
            return new


        def append_then_fail(log, entry):
            if entry < 0:
                raise ValueError(f"negative entry {entry}")
            log = log + [entry]
            return len(log)


        def bump_all(matrix):
            return [[x + 1 for x in row] for row in matrix]
    """,
}
MUTATE_TESTS = {
    "sort": """
        def test_sort_in_place():
            data = [3, 1, 2]
            assert sort_in_place(data) is None
            assert data == [1, 2, 3]
    """,
    "dict": """
        def test_config_mutated():
            config = {"a": 1}
            result = add_default(config, "b", 2)
            assert config == {"a": 1, "b": 2}
            assert result is config
    """,
    "mutate_then_raise": """
        import pytest


        def test_log_kept_after_error():
            log = [1]
            assert append_then_fail(log, 5) == 2
            with pytest.raises(ValueError, match="negative"):
                append_then_fail(log, -1)
            assert log == [1, 5, -1]
    """,
    "nested": """
        def test_rows_bumped():
            rows = [[1, 2], [3]]
            first = rows[0]
            bump_all(rows)
            assert rows == [[2, 3], [4]]
            assert first == [2, 3]
    """,
}

PAIRS = (family("words", WORDS, WORDS_TESTS) + family("records", RECORDS, RECORDS_TESTS)
         + family("mutate", MUTATE, MUTATE_TESTS))
