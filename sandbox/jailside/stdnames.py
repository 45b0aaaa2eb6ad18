"""Objects of the standard library by name: ``[module, qualname]`` that the receiver resolves
to its own copy of the same object (``math``, ``math.gcd``, ``collections.Counter``,
``typing.List``).

A name is a claim by the sender. Which names the receiver takes from which sender is decided
by ``codec.Codec`` (see ``behaves``): the candidate process controls every name it sends.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import enum
import importlib
import io
import itertools
import sys
import types
import typing

_STDLIB = frozenset(sys.stdlib_module_names) | {"builtins"}


def is_stdlib_module(name: object) -> bool:
    return isinstance(name, str) and name.partition(".")[0] in _STDLIB


def _inert_typing() -> dict[int, object]:
    """``typing``'s special forms that nothing can be run with: they are subscripted, and
    calling one raises (``Optional``, ``Union``, ``Literal``, ``List``, ``Dict``, the aliases
    of abstract classes such as ``Sequence`` and ``Callable``, ``Any``); not ``Counter``,
    ``DefaultDict``... whose call builds a real object."""
    found = {id(typing.Any): typing.Any}
    for name in typing.__all__:
        obj = getattr(typing, name, None)
        if isinstance(obj, typing._SpecialForm) or isinstance(obj, typing._SpecialGenericAlias) \
                and (not obj._inst or getattr(obj.__origin__, "__abstractmethods__", None)):
            found[id(obj)] = obj
    return found


_INERT = _inert_typing()


def behaves(obj: object) -> bool:
    """Whether ``obj`` is something a test would *run* (a function, a class), not a value, a
    module, an exception class (which a test only matches ``raises`` against) or one of
    ``typing``'s special forms that cannot be run (``Optional``, ``List``: type hints)."""
    if _INERT.get(id(obj)) is obj:
        return False
    if isinstance(obj, type):
        return not issubclass(obj, BaseException)
    return callable(obj)


def inert(obj: object) -> bool:
    """Whether ``obj``, named by the candidate process, may stand for itself in the test
    process: a module, an exception class (which a test only raises or matches), or one of
    ``typing``'s inert forms or type variables (a hint). Nothing else is taken by name from
    it: a named *value* could be anything of the test process's standard library, among
    them objects that behave (``unittest.mock.ANY`` equals everything, so ``f(2) == 4``
    would hold for any ``f``); the candidate's values travel as copies or handles."""
    if isinstance(obj, type(sys)) or _INERT.get(id(obj)) is obj:  # ``typing.Any`` is a class
        return True
    if isinstance(obj, type):
        return issubclass(obj, BaseException)
    return type(obj) is typing.TypeVar


def external_name(obj: object, callables: bool = True) -> list | None:
    """``[module, qualname]`` when ``obj`` is an importable object of the standard library
    (the same object the receiver gets by importing it), else None. Only modules, classes,
    functions and objects of standard-library types are looked at: an object of the
    candidate's own class is never asked for attributes here. ``callables=False``: never for
    what ``behaves`` (the candidate process sends those as handles, see ``Codec``)."""
    if not callables and behaves(obj):
        return None
    if not (isinstance(obj, type | type(sys)) or callable(obj) and hasattr(obj, "__qualname__")
            or is_stdlib_module(getattr(type(obj), "__module__", None))):
        return None
    if isinstance(obj, type(sys)):
        name = getattr(obj, "__name__", None)
        return ["", name] if is_stdlib_module(name) and sys.modules.get(name) is obj else None
    module = getattr(obj, "__module__", None)
    if not is_stdlib_module(module):
        return None
    for attr in ("__qualname__", "_name", "__name__"):
        try:
            qualname = getattr(obj, attr, None)
            # A name that does not resolve (``builtins.generator``, ``functools.CacheInfo``,
            # whose class is ``_CacheInfo``) is no name: the object travels otherwise.
            if isinstance(qualname, str) and qualname \
                    and resolve_external(module, qualname) is obj:
                return [module, qualname]
        except Exception:
            continue
    return None


def resolve_external(module: str, qualname: str) -> object:
    """The object ``external_name`` names; ``ValueError`` when it does not exist here."""
    if not (isinstance(module, str) and isinstance(qualname, str)):
        raise ValueError("malformed external name")
    try:
        if not module:
            if not is_stdlib_module(qualname):
                raise ValueError(f"module {qualname!r} is not in the standard library")
            return importlib.import_module(qualname)
        if not is_stdlib_module(module):
            raise ValueError(f"module {module!r} is not in the standard library")
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            if part.startswith("__") or part == "<locals>":
                raise ValueError(f"cannot name {module}.{qualname}")
            obj = getattr(obj, part)
        return obj
    except ValueError:
        raise
    except Exception as exc:  # ImportError, AttributeError
        raise ValueError(f"cannot resolve {module}.{qualname}: {type(exc).__name__}") from None


def _claimable() -> frozenset:
    """The standard-library classes a proxy of the candidate's may answer ``isinstance`` for:
    iterators, generators, streams and the ``Enum`` bases. Nothing here is a number, a
    container, a date or any type whose ``isinstance`` makes the standard library or pytest
    treat the object as a value (``pytest.approx`` does arithmetic on a ``Decimal``,
    ``Fraction`` or any ``numbers.Number``): a proxy claiming one of those would be believed
    by name alone."""
    found = {types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType, map, filter,
             zip, enumerate, reversed, enum.Enum, enum.Flag, io.StringIO, io.BytesIO,
             io.TextIOWrapper, io.BufferedReader, io.BufferedWriter}
    found.update(v for v in vars(itertools).values() if isinstance(v, type))
    return frozenset(found)


_CLAIMABLE = _claimable()


def claimable(name: object) -> bool:
    """Whether a proxy may stand for the standard-library class ``name`` (``[module,
    qualname]``, as ``describe`` sends it): resolved here, and one of ``_claimable``'s."""
    if type(name) is not list or len(name) != 2:
        return False
    try:
        return resolve_external(*name) in _CLAIMABLE
    except (ValueError, TypeError):
        return False
