"""A stdlib-only stand-in for the parts of ``pytest`` that model-written tests use.

The jail installs this source as ``sys.modules["pytest"]`` (exec'd into a fresh module), so it
imports only the standard library. It follows pytest 9 except where noted:

- ``Failed`` (``fail()``, DID NOT RAISE, DID NOT WARN) is an ``AssertionError``, so the sandbox
  counts it as a failed test like any failed assert; pytest's derives from ``BaseException``.
  ``raises`` still lets a ``Failed`` through unless ``Failed``/``BaseException`` is expected, so
  ``with raises(Exception): fail()`` fails as under pytest; ``except Exception`` does catch it.
- ``Skipped`` is a ``BaseException`` (``except Exception`` does not swallow it): "not run".
  ``xfail()`` raises ``XFailed``, a ``Skipped`` (pytest: a ``Failed``).
- marks are recorded, never enforced: ``__pytest_params__`` lists ``(argnames, argvalues, ids)``
  per ``parametrize`` (innermost decorator first), ``__pytest_marks__`` the other ``Mark``s;
  ``expand_params`` drops the cases that ``param(..., marks=...)`` skips or xfails.
- ``approx`` compares ``numbers.Complex`` values (int, float, complex, Fraction; not bool, not
  Decimal, datetime or numpy) with tolerances; anything else with ``==``.
"""

from __future__ import annotations

import itertools
import math
import re
import sys
import warnings
from collections import namedtuple
from collections.abc import Collection, Mapping
from numbers import Complex

__all__ = ["ExceptionInfo", "Failed", "Mark", "MarkDecorator", "ParameterSet", "Skipped",
           "XFailed", "approx", "deprecated_call", "expand_params", "fail", "fixture",
           "importorskip", "mark", "param", "raises", "skip", "warns", "xfail"]
MAX_CASES = 1000  # expand_params refuses a larger product
Mark = namedtuple("Mark", "name args kwargs")


class Failed(AssertionError):
    """A test failure from fail(), raises() or warns(); an AssertionError (see above)."""


class Skipped(BaseException):
    """The test did not run: skip(), importorskip(), xfail()."""


class XFailed(Skipped):
    """xfail() was called: an expected failure, treated as not run."""


def fail(reason: str = "", pytrace: bool = True, *, msg: str | None = None):
    raise Failed(reason if msg is None else msg)


def skip(reason: str = "", *, allow_module_level: bool = False, msg: str | None = None):
    raise Skipped(reason if msg is None else msg)


def xfail(reason: str = ""):
    raise XFailed(reason)


def importorskip(modname: str, minversion=None, reason=None, *, exc_type=ImportError):
    """Import and return ``modname``; raise Skipped if that raises ``exc_type``."""
    try:
        __import__(modname)
    except exc_type as exc:
        raise Skipped(reason or f"could not import {modname!r}: {exc}") from None
    have, number = getattr(sys.modules[modname], "__version__", None), re.compile(r"\d+")
    if minversion is not None and (have is None or [int(p) for p in number.findall(str(have))]
                                   < [int(p) for p in number.findall(str(minversion))]):
        raise Skipped(f"module {modname!r} has __version__ {have!r}, required is: {minversion!r}")
    return sys.modules[modname]


def _message(exc: BaseException) -> str:
    return "\n".join([str(exc), *getattr(exc, "__notes__", [])])


def _no_match(pattern, text: str) -> str:
    hint = "\n Did you mean to `re.escape()` the regex?" if pattern == text else ""
    return (f"Regex pattern did not match.\n  Expected regex: {pattern!r}\n"
            f"  Actual message: {text!r}{hint}")


class ExceptionInfo:
    """What ``with raises(...) as excinfo`` binds; filled in when the block exits."""

    _excinfo: tuple | None = None

    def _get(self, i: int):  # raise, not assert: this must hold under python -O as well
        if self._excinfo is None:
            raise AssertionError("can only be used after the context manager exits")
        return self._excinfo[i]

    type, value, tb = (property(lambda self, i=i: self._get(i)) for i in range(3))
    typename = property(lambda self: self._get(0).__name__)

    def errisinstance(self, exc) -> bool:
        return isinstance(self.value, exc)

    def match(self, regexp) -> bool:
        if not re.search(regexp, _message(self.value)):
            raise AssertionError(_no_match(regexp, _message(self.value)))
        return True


def _types(expected, base: type, what: str) -> tuple:
    types = expected if isinstance(expected, tuple) else (expected,)
    if not all(isinstance(t, type) and issubclass(t, base) for t in types):
        raise TypeError(f"Expected {what} or a tuple of them, but got {expected!r}")
    return types


class RaisesContext:
    def __init__(self, expected_exception=None, *, match=None) -> None:
        if expected_exception is None and match is None:
            raise ValueError("You must specify at least one parameter to match on.")
        self.expected = () if expected_exception is None else _types(
            expected_exception, BaseException, "an exception type")
        try:
            self.match = re.compile(match) if isinstance(match, str) else match
        except re.error as err:
            fail(f"Invalid regex pattern provided to 'match': {err}")
        self.excinfo = ExceptionInfo()

    def __enter__(self) -> ExceptionInfo:
        return self.excinfo

    def __exit__(self, exc_type, exc, tb) -> bool:
        names = [t.__name__ for t in self.expected]
        if exc_type is None:
            fail("DID NOT RAISE " + (f"any of ({', '.join(names)})" if len(names) > 1 else
                                     names[0] if names else "any exception"))
        if self.expected and (not isinstance(exc, self.expected) or isinstance(exc, Failed) and
                              not any(t is BaseException or issubclass(t, Failed)
                                      for t in self.expected)):
            return False  # propagate (pytest's Failed is no Exception: raises(Exception) misses it)
        if self.match is not None and not re.search(self.match, _message(exc)):
            pattern = self.match.pattern if self.match.flags == re.UNICODE else self.match
            raise AssertionError(_no_match(pattern, _message(exc))) from None
        self.excinfo._excinfo = (exc_type, exc, tb)
        return True


def raises(expected_exception=None, *args, **kwargs):
    """``with raises(E, match=...) as excinfo:`` or ``raises(E, func, *args, **kwargs)``."""
    if not args:  # unknown keywords: TypeError, as in pytest
        return RaisesContext(expected_exception, **kwargs)
    if not expected_exception or not callable(args[0]):
        raise TypeError(f"raises({expected_exception!r}, {args[0]!r}): need a type and callable")
    with RaisesContext(expected_exception) as excinfo:
        args[0](*args[1:], **kwargs)
    return excinfo


fail.Exception, skip.Exception, xfail.Exception, raises.Exception = Failed, Skipped, XFailed, Failed


class ApproxScalar:
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, expected, rel=None, abs=None, nan_ok=False) -> None:
        self.expected, self.rel, self.abs, self.nan_ok = expected, rel, abs, nan_ok

    def _scalar(self, x) -> ApproxScalar:
        return ApproxScalar(x, self.rel, self.abs, self.nan_ok)

    def __bool__(self):
        raise AssertionError("approx() is not supported in a boolean context.\n"
                             "Did you mean: `assert a == approx(b)`?")

    @property
    def tolerance(self) -> float:
        absolute = 1e-12 if self.abs is None else self.abs
        if math.isnan(absolute) or absolute < 0:
            raise ValueError(f"absolute tolerance can't be negative or NaN: {absolute}")
        if self.rel is None and self.abs is not None:
            return absolute
        relative = (1e-6 if self.rel is None else self.rel) * abs(self.expected)
        if math.isnan(relative) or relative < 0:
            raise ValueError(f"relative tolerance can't be negative or NaN: {relative}")
        return max(relative, absolute)

    def __eq__(self, actual) -> bool:
        expected = self.expected
        if isinstance(expected, bool) and not isinstance(actual, bool):
            return False  # approx(True) != 1, though True == approx(1), as in pytest
        if actual == expected:
            return True
        if isinstance(expected, bool) or not (isinstance(expected, Complex)
                                              and isinstance(actual, Complex)):
            return False
        if math.isnan(abs(expected)):
            return self.nan_ok and math.isnan(abs(actual))
        return not math.isinf(abs(expected)) and abs(expected - actual) <= self.tolerance

    def __repr__(self) -> str:
        e = self.expected
        if isinstance(e, bool) or not isinstance(e, Complex) or math.isinf(abs(e)):
            return str(e)
        try:
            tol = self.tolerance
            text = f"{tol:n}" if 1e-3 <= tol < 1e3 else f"{tol:.1e}"
            text += " \u2220 \u00b1180\u00b0" if e.imag and not math.isinf(tol) else ""
        except ValueError:
            text = "???"
        return f"{e} \u00b1 {text}"


class ApproxContainer(ApproxScalar):
    """approx() of a mapping (same keys, values approx) or a sequence (same length, in order)."""

    def __eq__(self, actual) -> bool:
        e = self.expected
        try:
            if isinstance(e, Mapping):
                same = set(actual.keys()) == set(e)
                pairs = [(actual[k], v) for k, v in e.items()] if same else None
            else:
                pairs = zip(actual, e, strict=True) if len(actual) == len(e) else None
        except (AttributeError, TypeError):
            return False
        return pairs is not None and all(a == self._scalar(x) for a, x in pairs)

    def __repr__(self) -> str:
        e = self.expected
        if isinstance(e, Mapping):
            return f"approx({ {k: self._scalar(v) for k, v in e.items()}!r})"
        return f"approx({(type(e) if type(e) in (list, tuple) else list)(map(self._scalar, e))!r})"


def _nested(value) -> bool:
    return isinstance(value, Collection) and not isinstance(value, str | bytes | bytearray)


def approx(expected, rel=None, abs=None, nan_ok=False) -> ApproxScalar:
    """``actual == approx(expected)`` within ``max(rel * |expected|, abs)`` (1e-6, 1e-12)."""
    for name, tol in (("relative", rel), ("absolute", abs)):
        if tol is not None and not isinstance(tol, int | float):
            raise TypeError(f"{name} tolerance must be an int or float, got {type(tol).__name__}")
    container = isinstance(expected, Mapping) or hasattr(expected, "__getitem__") and hasattr(
        expected, "__len__") and not isinstance(expected, str | bytes)
    if not container and _nested(expected):
        raise TypeError(f"pytest.approx() only supports ordered sequences, but got: {expected!r}")
    values = expected.values() if isinstance(expected, Mapping) else expected if container else ()
    if any(_nested(value) for value in values):
        raise TypeError(f"pytest.approx() does not support nested data structures: {expected!r}")
    return (ApproxContainer if container else ApproxScalar)(expected, rel, abs, nan_ok)


def _parametrize(argnames, argvalues, indirect=False, ids=None, scope=None) -> tuple:
    """``(names, one values tuple or ParameterSet per case, ids)``; "x" takes values whole."""
    values = list(itertools.islice(argvalues, MAX_CASES + 1))  # expand_params refuses more
    if isinstance(argnames, str):
        argnames = [n.strip() for n in argnames.split(",") if n.strip()]
        if len(argnames) == 1:  # as in pytest: only a single name *string* is not unpacked
            values = [v if isinstance(v, ParameterSet) else (v,) for v in values]
    return tuple(argnames), values, ids


class MarkDecorator:
    """``mark.NAME`` / ``mark.NAME(*args, **kwargs)``; applied to a function or class, it records
    itself in ``__pytest_marks__`` (``parametrize``: in ``__pytest_params__``)."""

    def __init__(self, name: str, args: tuple = (), kwargs: dict | None = None) -> None:
        self.mark = Mark(name, args, dict(kwargs or {}))
        self.name, self.args, self.kwargs = self.mark

    def with_args(self, *args, **kwargs) -> MarkDecorator:
        return MarkDecorator(self.name, self.args + args, {**self.kwargs, **kwargs})

    def __call__(self, *args, **kwargs):
        obj = args[0] if len(args) == 1 and not kwargs else None
        if not (isinstance(obj, type) or callable(obj) and getattr(obj, "__name__", "<lambda>")
                != "<lambda>"):
            return self.with_args(*args, **kwargs)
        if self.name == "parametrize":  # fresh lists: never append to one a base class holds
            params = _parametrize(*self.args, **self.kwargs)
            obj.__pytest_params__ = [*getattr(obj, "__pytest_params__", []), params]
        else:
            obj.__pytest_marks__ = [*getattr(obj, "__pytest_marks__", []), self.mark]
        return obj


class _MarkGenerator:
    def __getattr__(self, name: str) -> MarkDecorator:
        if name.startswith("_"):
            raise AttributeError(name)
        return MarkDecorator(name)


mark = _MarkGenerator()
ParameterSet = namedtuple("ParameterSet", "values marks id")


def param(*values, marks=(), id=None) -> ParameterSet:
    marks = [marks] if isinstance(marks, MarkDecorator | Mark) else marks
    return ParameterSet(values, [getattr(m, "mark", m) for m in marks], id)


def _not_run(m: Mark) -> bool:
    default = m.args[0] if m.args and m.name != "skip" else True  # skip's first arg: a reason
    return m.name in ("skip", "skipif", "xfail") and bool(m.kwargs.get("condition", default))


def expand_params(func) -> list[dict[str, object]]:
    """The keyword arguments of each case to call ``func`` with; ``[{}]`` if not parametrized."""
    layers, seen, per_layer = getattr(func, "__pytest_params__", []), set(), []
    if math.prod(len(values) for _, values, _ in layers) > MAX_CASES:
        raise ValueError(f"more than {MAX_CASES} parametrized cases")
    for names, values, _ in layers:
        if seen & set(names):
            raise ValueError(f"duplicate parametrization of {sorted(seen & set(names))}")
        seen.update(names)
        cases = []
        for value in values:
            marks = value.marks if isinstance(value, ParameterSet) else []
            value = value.values if isinstance(value, ParameterSet) else value
            if not isinstance(value, Collection) or len(value) != len(names):
                raise ValueError(f"{list(names)}: wrong number of values in {value!r}")
            if not any(_not_run(m) for m in marks):
                cases.append(dict(zip(names, value, strict=True)))
        per_layer.append(cases)
    return [{k: v for case in combo for k, v in case.items()}
            for combo in itertools.product(*per_layer)]


def fixture(fixture_function=None, *, scope="function", params=None, autouse=False, ids=None,
            name=None):
    """Sets ``__pytest_fixture__``, ``__pytest_fixture_name__`` and ``..._options__``."""
    def mark_fixture(func):
        func.__pytest_fixture__, func.__pytest_fixture_name__ = True, name or func.__name__
        func.__pytest_fixture_options__ = dict(scope=scope, params=params, autouse=autouse,
                                               ids=ids)
        return func
    return mark_fixture if fixture_function is None else mark_fixture(fixture_function)


class WarningsChecker(list):
    """``with warns(W, match=...) as record``: ``record`` lists the warnings.WarningMessage."""

    def __init__(self, expected_warning=Warning, match=None) -> None:
        super().__init__()
        self.expected = _types(expected_warning, Warning, "a Warning type")
        self.match, self._cm = match, warnings.catch_warnings()

    def __enter__(self) -> WarningsChecker:
        self._cm.__enter__()
        warnings.simplefilter("always")
        warnings.showwarning = lambda *args, **kwargs: self.append(warnings.WarningMessage(
            *args, **kwargs))  # catch_warnings restores it on exit
        return self

    def _matches(self, w) -> bool:
        return issubclass(w.category, self.expected) and (
            self.match is None or bool(re.search(self.match, str(w.message))))

    def __exit__(self, exc_type, exc, tb) -> None:
        self._cm.__exit__(exc_type, exc, tb)
        if exc is not None and (not isinstance(exc, Exception) or isinstance(exc, Failed)):
            return
        found = [w.message for w in self]
        try:
            if not any(issubclass(w.category, self.expected) for w in self):
                fail(f"DID NOT WARN. No warnings of type {self.expected} were emitted.\n"
                     f" Emitted warnings: {found}.")
            if not any(self._matches(w) for w in self):
                fail(f"Regex pattern did not match any of the {len(self)} warnings emitted.\n"
                     f" Regex: {self.match!r}\n Emitted warnings: {found}.")
        finally:
            for w in self:  # as pytest does, pass on the warnings that were not expected
                if not self._matches(w):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def warns(expected_warning=Warning, *args, match=None, **kwargs):
    """``with warns(W, match=...) as record:`` or ``warns(W, func, *args, **kwargs)``."""
    if not args:  # unknown keywords: TypeError, as in pytest
        return WarningsChecker(expected_warning, match, **kwargs)
    with WarningsChecker(expected_warning):
        return args[0](*args[1:], **kwargs)


def deprecated_call(func=None, *args, **kwargs):
    categories = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
    return warns(categories, *(() if func is None else (func,)), *args, **kwargs)
