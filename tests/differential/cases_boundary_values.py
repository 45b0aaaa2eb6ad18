"""Values correct code commonly returns, across the call boundary: standard-library enum members
and flags, the candidate's own ``Enum`` classes compared with each other and with plain values,
builtin and ``operator`` callables, ``NamedTuple``s with methods, subclasses of builtin types,
exceptions carrying class attributes and properties, deeply nested containers, big integers,
long non-ASCII strings, time zones, ``fractions``, ``decimal`` and ``collections`` values.
Each family meets a right and a wrong candidate.

Left out (deviations or limits of the jail, see ``test_sandbox_boundary_values.py``): a
returned builtin compared by identity with the test's own (``f() is max``), ``typing``'s
subscripted aliases and the candidate's own ``TypeVar``s returned as values (outside
annotations they travel as handles)."""

from __future__ import annotations

from .corpus import family

STD_ENUMS = {
    "ok": """
        import enum
        import http
        import re
        import uuid


        def status(code):
            return http.HTTPStatus(code)


        def flags(ignore_case, multiline):
            out = re.RegexFlag(0)
            if ignore_case:
                out |= re.IGNORECASE
            if multiline:
                out |= re.MULTILINE
            return out


        def safety():
            return uuid.SafeUUID.safe


        def boundary():
            return enum.FlagBoundary.STRICT
    """,
    "wrong": """
        import enum
        import http
        import re
        import uuid


        def status(code):
            return http.HTTPStatus.OK


        def flags(ignore_case, multiline):
            return re.IGNORECASE


        def safety():
            return uuid.SafeUUID.unknown


        def boundary():
            return enum.FlagBoundary.CONFORM
    """,
}
STD_ENUM_TESTS = {
    "status": """
        import http


        def test_status_is_the_member():
            assert status(404) is http.HTTPStatus.NOT_FOUND
            assert status(404) == 404
            assert status(200).phrase == "OK"


        def test_status_in_a_dict():
            names = {http.HTTPStatus.NOT_FOUND: "missing"}
            assert names[status(404)] == "missing"
    """,
    "flags": """
        import re


        def test_flags_combine():
            got = flags(True, True)
            assert got == re.IGNORECASE | re.MULTILINE
            assert isinstance(got, re.RegexFlag)
            assert got & re.MULTILINE


        def test_flags_work_in_re():
            assert re.match("a$", "A\\nb", flags(True, True))
    """,
    "plain_enums": """
        import enum
        import uuid


        def test_members():
            assert safety() is uuid.SafeUUID.safe
            assert boundary() == enum.FlagBoundary.STRICT
            assert boundary() == "strict"
    """,
}

OWN_ENUMS = {
    "ok": """
        from enum import Enum, Flag, IntEnum, IntFlag, auto


        class Color(Enum):
            RED = 1
            GREEN = 2
            BLUE = 3

            def describe(self):
                return self.name.lower()

            @property
            def warm(self):
                return self is Color.RED


        class Level(IntEnum):
            LOW = 1
            HIGH = 2


        class Shade(str, Enum):
            LIGHT = "light"
            DARK = "dark"

            def __str__(self):
                return self.value


        class Perm(Flag):
            R = auto()
            W = auto()
            X = auto()


        class Mode(IntFlag):
            A = 1
            B = 2


        def parse_color(name):
            return Color[name.upper()]


        def level_of(n):
            return Level.HIGH if n > 5 else Level.LOW


        def shade(text):
            return Shade(text)


        def perms(text):
            out = Perm(0)
            for ch in text:
                out |= Perm[ch.upper()]
            return out


        def mode(a, b):
            return (Mode.A if a else Mode(0)) | (Mode.B if b else Mode(0))


        def is_warm(color):
            return color is Color.RED
    """,
    "wrong": """
        from enum import Enum, Flag, IntEnum, IntFlag, auto


        class Color(Enum):
            RED = 1
            GREEN = 2
            BLUE = 3

            def describe(self):
                return self.name

            @property
            def warm(self):
                return True


        class Level(IntEnum):
            LOW = 1
            HIGH = 2


        class Shade(str, Enum):
            LIGHT = "light"
            DARK = "dark"


        class Perm(Flag):
            R = auto()
            W = auto()
            X = auto()


        class Mode(IntFlag):
            A = 1
            B = 2


        def parse_color(name):
            return Color.GREEN


        def level_of(n):
            return Level.LOW


        def shade(text):
            return Shade.DARK


        def perms(text):
            return Perm.R


        def mode(a, b):
            return Mode.A


        def is_warm(color):
            return color == 1
    """,
}
OWN_ENUM_TESTS = {
    "members": """
        def test_member_identity():
            assert parse_color("red") is Color.RED
            assert parse_color("blue") == Color.BLUE
            assert parse_color("green") != Color.RED
            assert isinstance(parse_color("red"), Color)
            assert list(Color) == [Color.RED, Color.GREEN, Color.BLUE]


        def test_methods_and_properties():
            assert parse_color("red").describe() == "red"
            assert parse_color("red").warm
            assert not Color.BLUE.warm


        def test_member_goes_back():
            assert is_warm(Color.RED)
            assert not is_warm(Color.GREEN)
    """,
    "mixins": """
        def test_int_enum():
            assert level_of(9) == 2
            assert level_of(1) < level_of(9)
            assert sorted([level_of(9), level_of(1)]) == [1, 2]


        def test_str_enum():
            assert shade("light") == "light"
            assert str(shade("light")) == "light"
            assert {"light": 1}[shade("light")] == 1
    """,
    "flags": """
        import pytest

        from solution import Perm


        def test_flag():
            assert perms("rw") == Perm.R | Perm.W
            assert Perm.W in perms("rw")
            assert Perm.X not in perms("rw")


        @pytest.mark.parametrize("a, b, want", [(True, False, 1), (True, True, 3)])
        def test_int_flag(a, b, want):
            assert mode(a, b) == want
    """,
}

CALLABLES = {
    "ok": """
        import operator


        def pick(name):
            return {"max": max, "len": len, "add": operator.add, "upper": str.upper,
                    "neg": operator.neg, "sorted": sorted}[name]
    """,
    "wrong": """
        import operator


        def pick(name):
            return {"max": min, "len": len, "add": operator.sub, "upper": str.lower,
                    "neg": abs, "sorted": list}[name]
    """,
}
CALLABLE_TESTS = {
    "apply": """
        def test_apply():
            assert pick("max")([3, 9, 2]) == 9
            assert pick("add")(2, 3) == 5
            assert pick("upper")("ab") == "AB"


        def test_map_and_key():
            assert list(map(pick("neg"), [1, -2])) == [-1, 2]
            assert sorted(["bb", "a", "ccc"], key=pick("len")) == ["a", "bb", "ccc"]
            assert pick("sorted")([3, 1, 2]) == [1, 2, 3]
    """,
}

NAMEDTUPLES = {
    "ok": """
        from typing import NamedTuple


        class Point(NamedTuple):
            x: int
            y: int = 0

            def norm2(self):
                return self.x ** 2 + self.y ** 2

            @property
            def swapped(self):
                return Point(self.y, self.x)


        def midpoint(a, b):
            return Point((a.x + b.x) // 2, (a.y + b.y) // 2)


        def origin():
            return Point(0)
    """,
    "wrong": """
        from typing import NamedTuple


        class Point(NamedTuple):
            x: int
            y: int = 0

            def norm2(self):
                return self.x + self.y

            @property
            def swapped(self):
                return self


        def midpoint(a, b):
            return Point(a.x, b.y)


        def origin():
            return Point(0, 1)
    """,
}
NAMEDTUPLE_TESTS = {
    "compare": """
        def test_equal_to_tuples():
            m = midpoint(Point(0, 0), Point(4, 6))
            assert m == (2, 3)
            assert m == Point(2, 3)
            assert isinstance(m, Point) and isinstance(m, tuple)
            assert origin() == (0, 0)


        def test_methods():
            m = midpoint(Point(0, 0), Point(4, 6))
            assert m.norm2() == 13
            assert m.swapped == (3, 2)
            assert m._replace(x=9) == (9, 3)
            assert m._asdict() == {"x": 2, "y": 3}
    """,
    "sorting": """
        def test_sorted_and_unpacked():
            pts = [midpoint(Point(2, 2), Point(4, 4)), origin()]
            assert sorted(pts) == [(0, 0), (3, 3)]
            x, y = pts[0]
            assert (x, y) == (3, 3)
    """,
}

SUBCLASSES = {
    "ok": """
        class MyInt(int):
            def double(self):
                return MyInt(self * 2)


        class Celsius(float):
            def __new__(cls, value):
                if value < -273.15:
                    raise ValueError("below absolute zero")
                return super().__new__(cls, value)

            def to_f(self):
                return self * 9 / 5 + 32


        class Name(str):
            def initials(self):
                return "".join(w[0] for w in self.split())


        class Bag(list):
            def total(self):
                return sum(self)

            def add(self, x):
                self.append(x)


        class Index(dict):
            def keys_sorted(self):
                return sorted(self)


        def as_int(n):
            return MyInt(n)


        def name(text):
            return Name(text.title())


        def bag(items):
            return Bag(items)


        def index(words):
            return Index((w, len(w)) for w in words)
    """,
    "wrong": """
        class MyInt(int):
            def double(self):
                return MyInt(self + 2)


        class Celsius(float):
            def to_f(self):
                return self + 32


        class Name(str):
            def initials(self):
                return self[:2]


        class Bag(list):
            def total(self):
                return len(self)

            def add(self, x):
                pass


        class Index(dict):
            def keys_sorted(self):
                return list(self)


        def as_int(n):
            return MyInt(n + 1)


        def name(text):
            return Name(text)


        def bag(items):
            return Bag(items[1:])


        def index(words):
            return Index((w, 0) for w in words)
    """,
}
SUBCLASS_TESTS = {
    "immutable": """
        import pytest


        def test_int():
            assert as_int(5) == 5
            assert as_int(5) + 1 == 6
            assert as_int(5).double() == 10
            assert isinstance(as_int(5), int)


        def test_float_and_str():
            assert Celsius(100).to_f() == 212
            with pytest.raises(ValueError):
                Celsius(-300)
            assert name("ada lovelace") == "Ada Lovelace"
            assert name("ada lovelace").initials() == "AL"
    """,
    "mutable": """
        def test_list():
            b = bag([1, 2])
            assert b == [1, 2] and [1, 2] == b
            assert b.total() == 3
            b.add(5)
            assert b == [1, 2, 5]
            assert len(b) == 3


        def test_dict():
            ix = index(["bb", "a"])
            assert ix == {"bb": 2, "a": 1}
            assert ix.keys_sorted() == ["a", "bb"]
            assert ix["bb"] == 2
    """,
}

EXCEPTIONS = {
    "ok": """
        class NotFound(LookupError):
            code = 404

            def __init__(self, key):
                super().__init__(f"no such key: {key}")
                self.key = key

            @property
            def info(self):
                return {"key": self.key, "code": self.code}


        class Invalid(ValueError):
            code = 422


        def get(table, key):
            if key not in table:
                raise NotFound(key)
            return table[key]


        def check(n):
            if n < 0:
                raise Invalid("negative: %d" % n)
            return n
    """,
    "wrong": """
        class NotFound(LookupError):
            code = 400

            def __init__(self, key):
                super().__init__("missing")
                self.key = None

            @property
            def info(self):
                return {}


        class Invalid(ValueError):
            code = 500


        def get(table, key):
            if key not in table:
                raise NotFound(key)
            return table[key]


        def check(n):
            if n < 0:
                raise ValueError("negative: %d" % n)
            return n
    """,
}
EXCEPTION_TESTS = {
    "attributes": """
        import pytest


        def test_class_attribute_and_property():
            with pytest.raises(NotFound, match="no such key: b") as excinfo:
                get({"a": 1}, "b")
            assert excinfo.value.code == 404
            assert excinfo.value.key == "b"
            assert excinfo.value.info == {"key": "b", "code": 404}
            assert NotFound.code == 404 and excinfo.value.code == NotFound.code


        def test_caught_by_base():
            try:
                get({}, "x")
            except LookupError as exc:
                assert exc.code == 404
            else:
                pytest.fail("no exception")
    """,
    "subclass": """
        import pytest


        def test_invalid():
            with pytest.raises(Invalid) as excinfo:
                check(-1)
            assert excinfo.value.code == 422
            assert str(excinfo.value) == "negative: -1"
    """,
}

BIG_VALUES = {
    "ok": """
        def nest(n):
            out = []
            for _ in range(n):
                out = [out]
            return out


        def tree(n):
            node = {"leaf": True}
            for i in range(n):
                node = {"depth": i, "child": node}
            return node


        def power(base, exp):
            return base ** exp


        def shout(text, times):
            return (text + "!") * times


        def digits(n):
            return len(str(n))
    """,
    "wrong": """
        def nest(n):
            out = []
            for _ in range(n - 1):
                out = [out]
            return out


        def tree(n):
            return {"leaf": True}


        def power(base, exp):
            return base ** exp + 1


        def shout(text, times):
            return text * times


        def digits(n):
            return len(str(n)) - 1
    """,
}
BIG_TESTS = {
    "deep": """
        def test_nested_lists():
            want = []
            for _ in range(400):
                want = [want]
            assert nest(400) == want


        def test_nested_dicts():
            got = tree(300)
            depth = 0
            while "child" in got:
                got = got["child"]
                depth += 1
            assert depth == 300 and got == {"leaf": True}
    """,
    "big_int": """
        def test_big_power():
            got = power(7, 5000)
            assert got == 7 ** 5000
            assert got % 1000 == pow(7, 5000, 1000)
            assert got.bit_length() == (7 ** 5000).bit_length()


        def test_many_digits():
            assert digits(10 ** 4000) == 4001
    """,
    "text": """
        def test_long_non_ascii():
            got = shout("héllo 😀 世界 ", 3000)
            assert got == ("héllo 😀 世界 !") * 3000
            assert got.count("😀") == 3000
    """,
}

STD_VALUES = {
    "ok": """
        from collections import ChainMap, Counter, OrderedDict, defaultdict, deque
        from datetime import datetime, time, timedelta, timezone
        from decimal import Decimal
        from fractions import Fraction


        def meeting(hour):
            return datetime(2024, 5, 1, hour, 30, tzinfo=timezone.utc)


        def in_zone(dt, hours):
            return dt.astimezone(timezone(timedelta(hours=hours), "Local"))


        def alarm():
            return time(7, 0, tzinfo=timezone(timedelta(hours=2)))


        def ratio(a, b):
            return Fraction(a, b)


        def price(text):
            return Decimal(text).quantize(Decimal("0.01"))


        def tally(words):
            return Counter(words)


        def groups(words):
            out = defaultdict(list)
            for w in words:
                out[w[0]].append(w)
            return out


        def recent(items, n):
            return deque(items, maxlen=n)


        def ordered(pairs):
            return OrderedDict(pairs)


        def layered(a, b):
            return dict(ChainMap(a, b))
    """,
    "wrong": """
        from collections import Counter, OrderedDict, defaultdict, deque
        from datetime import datetime, time, timedelta, timezone
        from decimal import Decimal
        from fractions import Fraction


        def meeting(hour):
            return datetime(2024, 5, 1, hour, 30)


        def in_zone(dt, hours):
            return dt


        def alarm():
            return time(7, 0)


        def ratio(a, b):
            return a / b


        def price(text):
            return Decimal(text)


        def tally(words):
            return dict(Counter(words))


        def groups(words):
            return {w[0]: [w] for w in words}


        def recent(items, n):
            return deque(items)


        def ordered(pairs):
            return OrderedDict(reversed(pairs))


        def layered(a, b):
            return {**a, **b}
    """,
}
STD_VALUE_TESTS = {
    "time": """
        from datetime import datetime, timedelta, timezone


        def test_aware_datetimes():
            m = meeting(9)
            assert m.tzinfo is timezone.utc
            assert m == datetime(2024, 5, 1, 11, 30, tzinfo=timezone(timedelta(hours=2)))
            local = in_zone(m, -4)
            assert local.hour == 5 and local.tzname() == "Local"
            assert local.utcoffset() == timedelta(hours=-4)


        def test_aware_time():
            assert alarm().utcoffset() == timedelta(hours=2)
    """,
    "numbers": """
        from decimal import Decimal
        from fractions import Fraction

        import pytest


        def test_fraction():
            assert ratio(1, 3) == Fraction(1, 3)
            assert isinstance(ratio(1, 3), Fraction)
            assert ratio(2, 4) + Fraction(1, 2) == 1


        def test_decimal():
            assert price("2.345") == Decimal("2.35") or price("2.345") == Decimal("2.34")
            assert str(price("1.5")) == "1.50"
            assert price("1.5") == pytest.approx(Decimal("1.50"))
    """,
    "collections": """
        from collections import Counter, OrderedDict, defaultdict, deque


        def test_counter_and_groups():
            t = tally(["a", "b", "a"])
            assert t == Counter(a=2, b=1) and t.most_common(1) == [("a", 2)]
            assert isinstance(t, Counter)
            g = groups(["apple", "avocado", "banana"])
            assert g["a"] == ["apple", "avocado"] and g["z"] == []
            assert isinstance(g, defaultdict)


        def test_deque_and_ordered():
            assert recent([1, 2, 3, 4], 2) == deque([3, 4])
            assert recent([1, 2, 3, 4], 2).maxlen == 2
            assert list(ordered([("b", 1), ("a", 2)])) == ["b", "a"]
            assert ordered([("b", 1), ("a", 2)]) == OrderedDict([("b", 1), ("a", 2)])
            assert layered({"a": 1}, {"a": 2, "b": 3}) == {"a": 1, "b": 3}
    """,
}

MORE_VALUES = {
    "ok": """
        import array
        import ipaddress
        import uuid
        from collections import ChainMap
        from types import MappingProxyType, SimpleNamespace


        def config(**kw):
            return SimpleNamespace(debug=False, **kw)


        def layered(user, defaults):
            return ChainMap(user, defaults)


        def frozen(d):
            return MappingProxyType(dict(d))


        def ident(text):
            return uuid.UUID(text)


        def network(cidr):
            return ipaddress.ip_network(cidr)


        def samples(xs):
            return array.array("d", xs)


        def parse_day(text):
            import time
            return time.strptime(text, "%Y-%m-%d")


        def word_pattern(word):
            import re
            return re.compile(rf"\\b{word}\\b", re.IGNORECASE)
    """,
    "wrong": """
        import array
        import ipaddress
        import uuid
        from collections import ChainMap
        from types import MappingProxyType, SimpleNamespace


        def config(**kw):
            return SimpleNamespace(**kw)


        def layered(user, defaults):
            return ChainMap(defaults, user)


        def frozen(d):
            return MappingProxyType({})


        def ident(text):
            return uuid.uuid4()


        def network(cidr):
            return ipaddress.ip_network("10.0.0.0/8")


        def samples(xs):
            return array.array("f", xs[:1])


        def parse_day(text):
            import time
            return time.localtime(0)


        def word_pattern(word):
            import re
            return re.compile(word)
    """,
}
MORE_TESTS = {
    "objects": """
        from collections import ChainMap
        from types import SimpleNamespace


        def test_namespace():
            c = config(level=3)
            assert c == SimpleNamespace(debug=False, level=3)
            assert c.level == 3 and not c.debug


        def test_chainmap():
            got = layered({"a": 1}, {"a": 0, "b": 2})
            assert got["a"] == 1 and got["b"] == 2
            assert got == {"a": 1, "b": 2}
            assert isinstance(got, ChainMap)


        def test_mappingproxy():
            assert frozen({"k": 1})["k"] == 1
            assert dict(frozen({"k": 1})) == {"k": 1}
    """,
    "scalars": """
        import array
        import ipaddress
        import uuid


        def test_uuid_and_network():
            text = "12345678-1234-5678-1234-567812345678"
            assert ident(text) == uuid.UUID(text)
            assert ident(text).version == 5 or ident(text).hex.startswith("1234")
            assert network("192.168.0.0/16") == ipaddress.IPv4Network("192.168.0.0/16")
            assert ipaddress.ip_address("192.168.3.4") in network("192.168.0.0/16")


        def test_array():
            got = samples([1.5, 2.5])
            assert got == array.array("d", [1.5, 2.5])
            assert got.typecode == "d" and sum(got) == 4.0
    """,
    "records": """
        import re
        import time


        def test_struct_time():
            day = parse_day("2024-03-01")
            assert day == time.strptime("2024-03-01", "%Y-%m-%d")
            assert day.tm_year == 2024 and day[1] == 3
            assert tuple(day)[:3] == (2024, 3, 1)


        def test_pattern():
            p = word_pattern("cat")
            assert p == re.compile(r"\\bcat\\b", re.IGNORECASE)
            assert p.findall("Cat concat CAT") == ["Cat", "CAT"]
    """,
}

LOOKUP_ENUMS = {
    "ok": """
        from enum import Enum


        class Suit(str, Enum):
            HEARTS = "hearts"
            SPADES = "spades"

            @classmethod
            def _missing_(cls, value):
                if isinstance(value, str):
                    for member in cls:
                        if member.value == value.lower():
                            return member
                return None


        def suit(text):
            return Suit(text)
    """,
    "wrong": """
        from enum import Enum


        class Suit(str, Enum):
            HEARTS = "hearts"
            SPADES = "spades"


        def suit(text):
            return Suit.HEARTS
    """,
}
LOOKUP_TESTS = {
    "lookup": """
        import pytest


        def test_case_insensitive():
            assert suit("SPADES") == "spades"
            assert suit("Spades") is Suit.SPADES


        def test_lookup_in_the_test():
            assert Suit("HEARTS") == Suit.HEARTS
            with pytest.raises(ValueError):
                Suit("clubs")
    """,
}

TYPING = {
    "ok": """
        from typing import Any, Dict, List, Optional, TypeVar

        T = TypeVar("T")


        def first(xs: List[T]) -> Optional[T]:
            return xs[0] if xs else None


        def schema() -> Dict[str, Any]:
            return {"x": Any, "t": T, "n": first.__annotations__["xs"]}
    """,
    "wrong": """
        from typing import Any, Dict, List, Optional, TypeVar

        T = TypeVar("T")


        def first(xs: List[T]) -> Optional[T]:
            return xs[-1] if xs else 0


        def schema() -> Dict[str, Any]:
            return {"x": object, "t": None, "n": None}
    """,
}
TYPING_TESTS = {
    "forms": """
        import typing


        def test_first():
            assert first([3, 4]) == 3
            assert first([]) is None


        def test_typing_values():
            got = schema()
            assert got["x"] is typing.Any
            assert got["t"] is T
            assert typing.get_type_hints(first)["return"] == typing.Optional[T]
    """,
}

# The candidate's own module as one of its values, and named time zones (the jail reads the
# system's time-zone database).
OWN_MODULE = {
    "ok": """
        import sys
        from datetime import datetime
        from zoneinfo import ZoneInfo

        me = sys.modules[__name__]
        TOTAL = 0


        def add(a, b):
            me.TOTAL += 1
            return a + b


        def noon_in(zone):
            return datetime(2020, 7, 1, 12, tzinfo=ZoneInfo(zone))
    """,
    "wrong": """
        import sys
        from datetime import datetime, timezone

        me = sys.modules[__name__]
        TOTAL = 0


        def add(a, b):
            return a - b


        def noon_in(zone):
            return datetime(2020, 7, 1, 12, tzinfo=timezone.utc)
    """,
}
OWN_MODULE_TESTS = {
    "through-itself": """
        import solution

        assert me is solution
        assert me.add(1, 2) == 3
        assert solution.TOTAL == 1
    """,
    "zones": """
        from zoneinfo import ZoneInfo


        def test_paris_is_two_hours_ahead_in_summer():
            assert noon_in("Europe/Paris").utcoffset().total_seconds() == 7200
            assert noon_in("Europe/Paris").tzinfo == ZoneInfo("Europe/Paris")
    """,
}

PAIRS = (family("bv-std-enums", STD_ENUMS, STD_ENUM_TESTS)
         + family("bv-own-enums", OWN_ENUMS, OWN_ENUM_TESTS)
         + family("bv-callables", CALLABLES, CALLABLE_TESTS)
         + family("bv-namedtuples", NAMEDTUPLES, NAMEDTUPLE_TESTS)
         + family("bv-subclasses", SUBCLASSES, SUBCLASS_TESTS)
         + family("bv-exceptions", EXCEPTIONS, EXCEPTION_TESTS)
         + family("bv-big", BIG_VALUES, BIG_TESTS)
         + family("bv-std-values", STD_VALUES, STD_VALUE_TESTS)
         + family("bv-more-values", MORE_VALUES, MORE_TESTS)
         + family("bv-lookup-enums", LOOKUP_ENUMS, LOOKUP_TESTS)
         + family("bv-typing", TYPING, TYPING_TESTS)
         + family("bv-own-module", OWN_MODULE, OWN_MODULE_TESTS))
