"""Red team at the call boundary: what the candidate process says about a value is never taken
for what the value is, and a ``StopIteration`` out of a candidate call means what PEP 479 makes
it mean inside generators.

- A candidate class that calls itself a standard-library type (``Decimal``, ``Fraction``,
  ``datetime``, ``deque``...), even one it installs in the module it imitates so that the
  candidate process names it so, is not that type in the test process: ``pytest.approx`` does
  no arithmetic with it, ``isinstance`` says no, and a wrong answer fails.
- ``assert all(map(lambda x: f(x) == 2 * x, xs))`` fails for ``def f(x): raise
  StopIteration``. Real pytest passes it (the ``StopIteration`` ends ``map`` early and
  ``all([])`` holds): a deliberate deviation, so these cases live here and not in the
  differential corpus. ``next()`` on a candidate's iterator still ends iteration.
"""

from __future__ import annotations

import textwrap

import pytest

from sandbox import execute


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def outcome(code: str, test: str):
    return execute(src(code), [src(test)], timeout_s=5.0).outcomes[0]


def status(code: str, test: str) -> str:
    return outcome(code, test).status


# A number-like class that agrees with whatever it is compared to through arithmetic
# (``abs(expected - actual)`` is 0), installed where the real type lives and named so.
IMPOSTOR = """
    import {module}

    class {name}:
        def __init__(self, *a, **k):
            pass
        def __rsub__(self, other):
            return 0
        def __sub__(self, other):
            return 0
        def __abs__(self):
            return 0
        def __eq__(self, other):
            return True
        __hash__ = object.__hash__

    {name}.__module__ = {module!r}
    {name}.__qualname__ = {name!r}
    {module}.{name} = {name}

    def total():
        return {name}()
"""
IMPOSTORS = [("decimal", "Decimal", "Decimal('3.5')"),
             ("fractions", "Fraction", "Fraction(7, 2)"),
             ("datetime", "datetime", "datetime(2024, 1, 2)"),
             ("datetime", "timedelta", "timedelta(days=1)"),
             ("collections", "deque", "deque([1, 2])"),
             ("collections", "Counter", "Counter('aab')"),
             ("collections", "OrderedDict", "OrderedDict(a=1)")]


@pytest.mark.parametrize("module, name, expected", IMPOSTORS,
                         ids=[f"{m}.{n}" for m, n, _ in IMPOSTORS])
def test_a_class_named_like_a_standard_type_is_not_taken_for_it(module, name, expected):
    code = IMPOSTOR.format(module=module, name=name)
    test = f"""
        import pytest
        from {module} import {name}

        def test_approx():
            assert total() == pytest.approx({expected})

        def test_isinstance():
            assert isinstance(total(), {name})

        def test_equal():
            assert total() == {expected}
    """
    result = outcome(code, test)
    assert [i.outcome for i in result.items] == ["failed"] * 3, result.items


@pytest.mark.parametrize("module, name, expected", IMPOSTORS[:2],
                         ids=[f"{m}.{n}" for m, n, _ in IMPOSTORS[:2]])
def test_the_real_standard_type_still_passes(module, name, expected):
    code = f"from {module} import {name}\n\ndef total():\n    return {expected}\n"
    test = f"""
        import pytest
        from {module} import {name}

        def test_approx():
            assert total() == pytest.approx({expected})
            assert isinstance(total(), {name})
    """
    assert status(code, test) == "passed"


# ----- StopIteration at the call boundary (PEP 479) -------------------------------------------
RAISES_STOP = "def f(x):\n    raise StopIteration\n"
DOUBLE = "def f(x):\n    return 2 * x\n"
STOP_TESTS = {
    "map": "assert all(map(lambda x: f(x) == 2 * x, [1, 2, 3]))\n",
    "zip": "assert all(a == b for a, b in zip(map(f, [1, 2]), [2, 4]))\n",
    "generator": "def test_g():\n    assert all(f(x) == 2 * x for x in [1, 2, 3])\n",
    "list-of-map": "def test_l():\n    assert list(map(f, [1, 2])) == [2, 4] or True\n"
                   "    assert len(list(map(f, [1, 2]))) == 2\n",
}


@pytest.mark.parametrize("test", list(STOP_TESTS.values()), ids=list(STOP_TESTS))
def test_a_stopiteration_from_a_candidate_call_does_not_end_the_tests_iteration(test):
    assert status(RAISES_STOP, test) in ("failed", "error")
    assert status(DOUBLE, test) == "passed"


def test_the_stopiteration_becomes_a_runtimeerror_chained_from_it():
    test = """
        import pytest

        def test_it():
            with pytest.raises(RuntimeError, match="StopIteration") as info:
                f(1)
            assert isinstance(info.value.__cause__, StopIteration)
    """
    assert status(RAISES_STOP, test) == "passed"


def test_methods_and_constructors_are_calls_too():
    code = """
        class Box:
            def __init__(self, stop=False):
                if stop:
                    raise StopIteration
            def get(self, x):
                raise StopIteration
    """
    test = """
        def test_method():
            b = Box()
            assert all(map(lambda x: b.get(x) == x, [1, 2]))

        def test_constructor():
            assert all(map(lambda x: Box(True) is not None, [1, 2]))
    """
    result = outcome(code, test)
    assert [i.outcome for i in result.items] == ["failed", "failed"], result.items


def test_next_on_a_candidate_iterator_still_ends_iteration():
    code = """
        class Countdown:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                return self
            def __next__(self):
                if self.n == 0:
                    raise StopIteration
                self.n -= 1
                return self.n + 1

        def gen(n):
            yield from range(n)
    """
    test = """
        import pytest

        def test_iter():
            assert list(Countdown(3)) == [3, 2, 1]
            assert list(zip(Countdown(2), gen(5))) == [(2, 0), (1, 1)]

        def test_next():
            g = gen(1)
            assert next(g) == 0
            with pytest.raises(StopIteration):
                next(g)
            assert next(gen(0), "end") == "end"
            c = Countdown(1)
            assert c.__next__() == 1
            with pytest.raises(StopIteration):
                c.__next__()

        def test_send():
            g = gen(1)
            assert g.send(None) == 0
            with pytest.raises(StopIteration):
                g.send(None)
    """
    result = outcome(code, test)
    assert result.status == "passed", result


# ----- value classes: what the candidate says about them grants nothing ----------------------
def test_a_value_class_compares_as_its_builtin_type_whatever_it_defines():
    # A subclass that overrides ``__eq__`` stays a handle (identity against the test's values);
    # one that crosses as a value compares as ``int``/``str``/``tuple`` do, never by its code.
    code = """
        from enum import Enum
        from typing import NamedTuple

        class Liar(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__

        class Shade(str, Enum):
            RED = "red"

        class Pair(NamedTuple):
            a: int
            b: int
            def total(self):
                return self.a + self.b

        def liar():
            return Liar(1)

        def shade():
            return Shade.RED

        def pair():
            return Pair(1, 2)
    """
    test = """
        def test_liar():
            assert liar() == 2

        def test_shade():
            assert shade() == "blue"

        def test_pair():
            assert pair() == (2, 1)

        def test_pair_total():
            assert pair().total() == 3
    """
    result = outcome(code, test)
    assert [i.outcome for i in result.items] == ["failed", "failed", "failed", "passed"], \
        result.items


def test_methods_of_a_value_class_run_in_the_candidate():
    code = """
        class Money(int):
            def cents(self):
                return int(self) * 100 + 1   # wrong on purpose

        def money(n):
            return Money(n)
    """
    test = "def test_cents():\n    assert money(2).cents() == 200\n"
    assert status(code, test) == "failed"


def test_a_value_too_deep_to_copy_is_a_clear_error_naming_its_type():
    code = "def deep(n):\n    x = []\n    for _ in range(n):\n        x = [x]\n    return x\n"
    test = "def test_deep():\n    assert deep(5000) is not None\n"
    result = outcome(code, test)
    assert result.status == "error", result
    assert "list nested more than" in result.items[0].message


def test_a_returned_builtin_is_the_candidates_object_not_the_tests():
    # Deviation: a builtin the candidate returns is a handle (its name is the candidate's
    # claim), so it behaves as ``max`` but is not the test's ``max``.
    code = "def pick():\n    return max\n"
    test = """
        def test_calls():
            assert pick()([1, 3]) == 3

        def test_identity():
            assert pick() is max
    """
    result = outcome(code, test)
    assert [i.outcome for i in result.items] == ["passed", "failed"], result.items


# ----- names the candidate process forges ----------------------------------------------------
# The candidate rewrites its own process's encoder to send a standard-library name where its
# value should be: the test process takes by name only modules, exception classes and
# ``typing``'s forms, so an object that equals everything (``unittest.mock.ANY``) never stands
# in for a result.
FORGED_NAME = """
    import sys

    _MARK = object()
    for _name, _mod in list(sys.modules.items()):
        if _name.endswith("jailside.encode"):
            _orig = _mod.Encoder.enc

            def _enc(self, x, depth, _orig=_orig):
                if x is _MARK:
                    return {{"x": {name!r}}}
                return _orig(self, x, depth)

            _mod.Encoder.enc = _enc


    def add(a, b):
        return _MARK
"""
FORGED = [["unittest.mock", "ANY"], ["unittest.mock", "DEFAULT"], ["unittest.mock", "sentinel"],
          ["builtins", "max"], ["decimal", "Decimal"], ["sys", "modules"]]


@pytest.mark.parametrize("name", FORGED, ids=[".".join(n) for n in FORGED])
def test_a_forged_standard_library_name_is_refused(name):
    test = "def test_add():\n    assert add(2, 2) == 4\n    assert add(1, 2) == 3\n"
    result = outcome(FORGED_NAME.format(name=name), test)
    assert result.status in ("failed", "error"), result


def test_a_number_subclass_with_its_own_arithmetic_is_no_number_to_approx():
    # ``approx`` computes ``expected - actual``: the candidate's ``__rsub__`` would see the
    # expected value and answer 0. Such a class stays a handle, which ``approx`` refuses.
    code = """
        class Near(float):
            def __sub__(self, other):
                return 0.0
            def __rsub__(self, other):
                return 0.0
            def __abs__(self):
                return 0.0

        def area(r):
            return Near(r)
    """
    test = """
        import pytest

        def test_area():
            assert area(2) == pytest.approx(12.566, rel=1e-3)
    """
    assert status(code, test) == "failed"


def test_a_forged_value_class_description_grants_no_comparison():
    # The candidate makes its own process describe a class with ``__eq__``/``__rsub__`` as a
    # value class forwarding them: the test process builds its copy from ``int`` and forwards
    # only the special methods it lists itself, so equality and arithmetic stay ``int``'s.
    code = """
        import sys

        class Liar(int):
            def __eq__(self, other):
                return True
            def __rsub__(self, other):
                return 0
            __hash__ = int.__hash__

        _FORGED = {"k": "int", "mt": ["__eq__"], "at": ["__class__"],
                  "fw": ["__eq__", "__ne__", "__rsub__", "__hash__"], "f": None, "df": None}
        for _name, _module in list(sys.modules.items()):
            if _name.endswith(("jailside.codec", "jailside.describe")):
                _real = _module.value_class
                _module.value_class = lambda cls, real=_real: _FORGED if cls is Liar else real(cls)

        def liar():
            return Liar(1)
    """
    test = """
        import pytest

        def test_equal():
            assert liar() == 2

        def test_approx():
            assert liar() == pytest.approx(2)

        def test_is_an_int_copy():
            assert liar() == 1 and isinstance(liar(), int)
    """
    result = outcome(code, test)
    assert [i.outcome for i in result.items] == ["failed", "failed", "passed"], result.items
