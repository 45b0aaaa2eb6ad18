"""AST mutants of reference solutions (``rewards.mutants``), checked on the demo problems.

Mutants are exec'd in-process here: they derive from trusted reference code, and an interval
timer bounds the ones that loop forever (a flipped loop condition, a deleted ``i += 1``).
"""

from __future__ import annotations

import ast
import signal
from collections import Counter

import pytest

from problems import load_problems
from rewards.mutants import KINDS, make_mutants

MUTANTS_PER_PROBLEM = 6  # the RewardConfig default
TIME_LIMIT_S = 0.25      # per mutant, all baseline tests together; references take < 1 ms


class _Timeout(BaseException):
    """BaseException so a mutant's ``except Exception`` cannot swallow it."""


def _on_alarm(signum, frame):
    raise _Timeout


def killed_by_baseline(program: str, tests: tuple[str, ...]) -> bool:
    """True when some baseline test fails (or errors, or hangs) on ``program``."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
    try:
        env: dict = {}
        exec(compile(program, "<mutant>", "exec"), env)
        for test in tests:
            exec(compile(test, "<test>", "exec"), dict(env))
    except _Timeout:
        return True
    except Exception:
        return True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return False


@pytest.fixture(scope="module")
def demo():
    return load_problems("demo")


@pytest.fixture(scope="module")
def demo_mutants(demo):
    return {p.id: make_mutants(p.reference_program, p.entry_point, MUTANTS_PER_PROBLEM, seed=0)
            for p in demo}


def test_every_mutant_compiles_defines_the_entry_point_and_differs(demo, demo_mutants):
    for p in demo:
        original = ast.dump(ast.parse(p.reference_program))
        codes = [m.code for m in demo_mutants[p.id]]
        assert len(codes) == len(set(codes)), p.id
        assert len(codes) <= MUTANTS_PER_PROBLEM
        for m in demo_mutants[p.id]:
            tree = ast.parse(m.code)
            compile(m.code, "<mutant>", "exec")
            assert ast.dump(tree) != original, (p.id, m.description)
            assert any(isinstance(s, ast.FunctionDef) and s.name == p.entry_point
                       for s in tree.body), (p.id, m.description)
            assert m.kind in KINDS and m.description.startswith(m.kind)


def test_most_references_yield_three_mutants_spread_over_kinds(demo, demo_mutants):
    enough = [p.id for p in demo if len(demo_mutants[p.id]) >= 3]
    assert len(enough) >= 0.8 * len(demo), sorted(set(p.id for p in demo) - set(enough))
    kinds = Counter(m.kind for ms in demo_mutants.values() for m in ms)
    assert len(kinds) >= 6, kinds  # the sampler spreads across kinds, not just constants


def test_most_mutants_fail_a_baseline_test(demo, demo_mutants):
    # The reference itself must pass, or a "kill" would mean nothing.
    for p in demo:
        assert not killed_by_baseline(p.reference_program, p.baseline_tests), p.id
    results = [killed_by_baseline(m.code, p.baseline_tests)
               for p in demo for m in demo_mutants[p.id]]
    assert sum(results) >= 0.8 * len(results), f"{sum(results)}/{len(results)} killed"


def test_selection_is_deterministic_and_seeded(demo):
    p = next(p for p in demo if p.id == "binary_search")
    a = make_mutants(p.reference_program, p.entry_point, 4, seed=1)
    assert a == make_mutants(p.reference_program, p.entry_point, 4, seed=1)
    b = make_mutants(p.reference_program, p.entry_point, 4, seed=2)
    assert [m.code for m in a] != [m.code for m in b]
    # The seed picks which sites of a kind are used, not only the order of kinds.
    code = "def f(x):\n    return x[1] + x[2] + x[3] + x[4]\n"
    picks = {frozenset(m.code for m in make_mutants(code, "f", 3, seed=s) if m.kind == "constant")
             for s in range(8)}
    assert len(picks) > 2
    # A larger n extends the pool; n = 0 asks for none.
    assert len(make_mutants(p.reference_program, p.entry_point, 50, seed=1)) > 4
    assert make_mutants(p.reference_program, p.entry_point, 0, seed=1) == []


@pytest.mark.parametrize("code, expected", [
    ("def f(a, b):\n    return a < b\n", {"a <= b", "a >= b", "None"}),
    ("def f(x):\n    return x + 1\n", {"x - 1", "x * 1", "x + 2", "x + 0", "None"}),
    ("def f(a, b):\n    return a and not b\n", {"a or not b", "a and b", "None"}),
    ("def f(xs):\n    return max(xs)\n", {"min(xs)", "None"}),
])
def test_single_point_kinds(code, expected):
    got = {ast.unparse(ast.parse(m.code).body[0].body[0].value)
           for m in make_mutants(code, "f", 50, seed=0)}
    assert got == expected


def test_syntactic_no_ops_and_broken_input_are_skipped():
    # Operands of a commutative op are not swapped; x - 0 does not become x + 0.
    got = {m.code for m in make_mutants("def f(x):\n    return x * x - 0\n", "f", 50)}
    assert "def f(x):\n    return x * x + 0\n" not in got
    assert all("x * x" in c or "x + x" in c or "x // x" in c or "None" in c for c in got)
    assert make_mutants("def f(:\n", "f", 5) == []
    # Annotations do nothing at run time: they are never mutated.
    annotated = make_mutants("def f(x: Tuple[int, 3]) -> 2:\n    return x\n", "f", 50)
    assert [m.kind for m in annotated] == ["return"]
    # A mutant that would no longer define the entry point is dropped.
    got = [m.code for m in make_mutants("g = 2\nf = lambda: g\n", "f", 50)]
    assert "pass\nf = lambda: g\n" in got  # statement deletion is on...
    assert all("f = lambda: g" in c for c in got)  # ...but never deletes the entry point
    with pytest.raises(ValueError, match="n=-1"):
        make_mutants("def f():\n    return 1\n", "f", -1)
