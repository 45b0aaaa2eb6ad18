"""What the encoding (``encode``) and the decoding (``decode``) of values share: their limits,
the value types both know by class, and how a value whose layout is more than its content (a
set's iteration order, a namedtuple's class) is rebuilt the same on the receiving side.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import collections
import enum
import inspect
import ipaddress
import pathlib
import sys

MAX_DEPTH = 1000         # nesting of a value (deeper values cannot cross: ``TooDeep``)
OUTLINE = 100            # JSON nesting of one piece of a value (see ``encode``)
MAX_HANDLES = 200_000    # objects one side may hand out in a session
PATH_TYPES = (pathlib.PosixPath, pathlib.PurePosixPath, pathlib.Path, pathlib.PurePath)
DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))
IP_TYPES = (ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network,
            ipaddress.IPv6Network, ipaddress.IPv4Interface, ipaddress.IPv6Interface)


class TooDeep(Exception):
    """A value nested deeper than ``MAX_DEPTH``: it cannot cross, and the call that would
    carry it fails with this (never a stand-in that compares as something else)."""


class NotEncodable(Exception):
    """A value whose structure cannot be copied (a cycle through an immutable);
    the caller sends it as a handle instead."""


def table_size(s: set | frozenset) -> int:
    """Slots of a set's hash table (its iteration order follows them)."""
    extra = sys.getsizeof(s) - sys.getsizeof(set())
    return 8 if extra <= 0 else extra // 16


def rebuild_set(items: list, size: int, kind: type) -> set | frozenset:
    """A set of ``items`` that iterates in their order where CPython's layout allows: built
    plainly, else in a table of the sender's size (``set(dict)`` allocates for twice the
    dict's keys and inserts them in order; placeholders after the items only set the size)."""
    made = kind(items)
    if _same_order(made, items) or not isinstance(size, int) or not 8 < size <= 1 << 22:
        return made
    need = max(size // 4, len(items))
    if 2 * need >= size:
        return made
    keys = dict.fromkeys(items)
    placeholders = [object() for _ in range(need - len(items))]
    keys.update(dict.fromkeys(placeholders))
    laid = set(keys)
    for p in placeholders:
        laid.discard(p)
    if _same_order(laid, items):
        return laid if kind is set else frozenset(laid)
    return made


def _same_order(s, items: list) -> bool:
    return len(s) == len(items) and all(a is b for a, b in zip(s, items, strict=False))


def is_namedtuple_class(cls: type) -> bool:
    """A class made by ``collections.namedtuple`` (or ``typing.NamedTuple``) with nothing
    added: pure data, so the receiver may rebuild it."""
    fields = cls.__dict__.get("_fields")
    if cls.__bases__ != (tuple,) or not isinstance(fields, tuple) or "_make" not in cls.__dict__:
        return False
    if not all(type(f) is str for f in fields):
        return False
    plain = collections.namedtuple("_probe", fields)
    extra = set(cls.__dict__) - set(plain.__dict__) - {"__annotations__", "__orig_bases__",
                                                      "_field_defaults", "__match_args__"}
    return not extra


_NAMEDTUPLES: dict[tuple, type] = {}


def namedtuple_class(name: str, qualname: str, module: str, fields: list,
                     defaults: list) -> type:
    """The receiver's copy of a pure namedtuple class (one per distinct definition)."""
    key = (name, qualname, module, tuple(fields), len(defaults))
    cls = _NAMEDTUPLES.get(key)
    if cls is None:
        cls = collections.namedtuple(name, fields, defaults=defaults or None, module=module)
        cls.__qualname__ = qualname
        _NAMEDTUPLES[key] = cls
    return cls


def namedtuple_meta(cls: type) -> list:
    defaults = list(getattr(cls, "_field_defaults", {}).values())
    return [list(cls._fields), defaults]


# ----- the candidate's value classes -------------------------------------------------------------
# A class of the candidate's whose instances *are* values of a builtin type, with methods
# around them: a subclass of ``int``, ``float``, ``str`` or ``tuple`` (a ``NamedTuple`` with
# methods), or an ``Enum`` whose members' values are plain data. Its instances cross as copies
# of that value (so ``MyInt(5) == 5``, ``Point(1, 2) == (1, 2)`` and ``Shade.RED == "red"`` hold
# as in one process) in a class the test process builds itself from that builtin type; its own
# methods, properties and the special methods in ``FORWARDED`` go back to the candidate. A class
# that defines comparisons, hashing, attribute hooks or any other special method stays a
# handle (its comparisons with the test's values are then identity, see ``mirror``).
VALUE_BASES = {"int": int, "float": float, "str": str, "tuple": tuple}
ENUM_KINDS = {"IntFlag": enum.IntFlag, "IntEnum": enum.IntEnum, "StrEnum": enum.StrEnum,
              "Flag": enum.Flag, "Enum": enum.Enum}  # most derived first
ENUM_MIXINS = {"object": None, "int": int, "str": str, "float": float}
# Special methods that go back to the owner: none of them is given a value of the test's to
# answer about (``__getitem__`` and ``__format__`` get an index or a format). A class with its
# own arithmetic or ``in`` is no value class: ``pytest.approx`` would compute ``expected -
# actual`` with the owner's ``__rsub__``, which sees the expected value (a handle is no number
# to ``approx``).
FORWARDED = frozenset({
    "__str__", "__repr__", "__format__", "__len__", "__iter__", "__reversed__", "__getitem__",
    "__bool__", "__int__", "__float__", "__index__", "__neg__", "__pos__", "__abs__",
    "__invert__"})
_PLAIN_DUNDERS = frozenset({
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__",
    "__orig_bases__", "__slots__", "__match_args__", "__parameters__", "__new__", "__init__",
    "__getnewargs__", "__init_subclass__"})
_STDLIB_FILES = frozenset(getattr(m, "__file__", None) for m in (enum, collections)) | {"<string>"}
_ENUM_PLAIN = frozenset({"_generate_next_value_", "_order_", "_ignore_"})
_DATA = (int, float, str, bool, type(None))
_VALUE_CLASSES: dict[type, dict | None] = {}
_STDLIB_MODULES = frozenset(sys.stdlib_module_names) | {"builtins"}


def value_class(cls: type) -> dict | None:
    """What the test process needs to build its copy of ``cls`` when it is a value class (see
    above), else None: ``k`` the builtin type (or ``enum``), ``mt``/``at`` the names that go
    back to the owner as methods/attributes, ``fw`` the special methods that do; for a
    ``NamedTuple`` ``f``/``df`` its fields and defaults; for an ``Enum`` ``ek`` its kind,
    ``mx`` its data type and ``em`` its members. Decided by the owner (the candidate process)
    over its own class: what it says only shapes the copy, whose comparisons are always the
    builtin type's own."""
    if cls not in _VALUE_CLASSES:
        try:
            _VALUE_CLASSES[cls] = _classify(cls)
        except Exception:  # whatever the class does when looked at: not a value class
            _VALUE_CLASSES[cls] = None
    return _VALUE_CLASSES[cls]


def _classify(cls: type) -> dict | None:
    if not isinstance(cls, type) or cls.__module__.partition(".")[0] in _STDLIB_MODULES:
        return None  # the standard library's own: by name (``encode``) or as a handle
    if issubclass(cls, enum.Enum):
        return _classify_enum(cls)
    own = [k for k in cls.__mro__ if k.__module__ != "builtins"]
    builtin = [k for k in cls.__mro__ if k.__module__ == "builtins"]
    kind = next((n for n, b in VALUE_BASES.items() if builtin == list(b.__mro__)), None)
    if kind is None:
        return None
    out = {"k": kind, "mt": [], "at": [], "fw": [], "f": None, "df": None}
    skip: set = set()
    if kind == "tuple" and "_fields" in cls.__dict__:
        fields = cls.__dict__["_fields"]
        if not (type(fields) is tuple and all(type(f) is str for f in fields)):
            return None
        out["f"], out["df"] = list(fields), list(getattr(cls, "_field_defaults", {}).values())
        skip = set(collections.namedtuple("_probe", fields).__dict__) | {"_field_defaults"}
    for klass in own:
        if not _sort_names(klass, skip, out):
            return None
    return out


def _sort_names(klass: type, skip: set, out: dict, members: frozenset = frozenset()) -> bool:
    """Files each name ``klass`` defines under ``out``'s methods, attributes or forwarded
    special methods; False for a name that makes it no value class."""
    for name, value in list(vars(klass).items())[:500]:
        if name in members or (name in skip and not _user_code(value)):
            continue
        if name.startswith("__") and name.endswith("__"):
            if not _user_code(value):  # made by ``enum``/``namedtuple``, or a builtin's own
                continue
            if name in FORWARDED:
                if name not in out["fw"]:
                    out["fw"].append(name)
            elif name not in _PLAIN_DUNDERS:
                return False
        elif name.startswith("_") and name.endswith("_") and members:
            if name == "_missing_" and _user_code(value):
                out["at"].append(name)  # ``Color("red")`` asks the owner for a lookup miss
            elif name not in _ENUM_PLAIN and _user_code(value):
                return False  # another hook of ``enum``'s: the class is the owner's own
        elif name not in out["mt"] and name not in out["at"]:
            out["mt" if inspect.isfunction(value) else "at"].append(name)
    return True


def _user_code(value) -> bool:
    """``value`` (a function, or a property/classmethod/staticmethod of one) was written by
    the class's author, not made by ``enum``/``namedtuple``."""
    for attr in ("fget", "__func__"):
        value = getattr(value, attr, value)
    code = getattr(value, "__code__", None)
    return code is not None and code.co_filename not in _STDLIB_FILES


def _classify_enum(cls: type) -> dict | None:
    kind = next((n for n, k in ENUM_KINDS.items() if issubclass(cls, k)), None)
    mixin = next((n for n, t in ENUM_MIXINS.items() if cls._member_type_ is (t or object)),
                 None)
    own = [k for k in cls.__mro__ if k.__module__ not in ("builtins", "enum")]
    if kind is None or mixin is None or own != [cls]:
        return None
    members = []
    for name, member in cls.__members__.items():
        if not (type(member._value_) in _DATA or type(member._value_) is tuple
                and all(type(i) in _DATA for i in member._value_)) or member.__dict__.keys() \
                - {"_value_", "_name_", "__objclass__", "_sort_order_", "__init__"}:
            return None
        members.append([name, member._value_])
    out = {"k": "enum", "ek": kind, "mx": mixin, "em": members, "mt": [], "at": [], "fw": []}
    if not _sort_names(cls, set(), out, frozenset(cls.__members__)):
        return None
    return out


CONTENT_BASES = {"list": list, "dict": dict, "set": set}
_COMPARISONS = frozenset({"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__"})


def content_base(cls: type) -> str | None:
    """``list``/``dict``/``set`` when ``cls`` is the candidate's subclass of that type that
    compares as it (defines no comparison of its own): its instances stay handles (their
    methods change them in place, on the owner's side), and compare with the test's values of
    that type by their content, as in one process (see ``decode``)."""
    try:
        builtin = [k for k in cls.__mro__ if k.__module__ == "builtins"]
        kind = next((n for n, b in CONTENT_BASES.items() if builtin == list(b.__mro__)), None)
        if kind is None or any(_COMPARISONS & set(vars(k)) for k in cls.__mro__
                               if k.__module__ != "builtins"):
            return None
        return kind
    except Exception:
        return None
