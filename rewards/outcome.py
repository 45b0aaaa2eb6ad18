"""What execution says about one generator sample: the input type of every reward function.

The sandbox runs each accumulated test three ways (against the sample's final code, against
the problem's reference solution and against AST mutants of the reference); the caller folds
those results into one :class:`SampleOutcome` per sample. Rewards read nothing else, so they
stay plain functions over execution results, with no model, table or sandbox in sight.

    from rewards import SampleOutcome, TestVerdict, normalise_test
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ORIGINS = ("baseline", "discriminator")
PASSED = "passed"
TIMEOUT = "timeout"


def normalise_test(snippet: str) -> str:
    """A normalised form of a test snippet, equal for tests that differ only in layout.

    Two snippets with the same AST (whitespace, comments, quote style) get the same key, so the
    caller can mark the later one ``duplicate``. Snippets that do not parse fall back to their
    whitespace-collapsed text (they are still tests: they will simply fail everywhere).

    >>> normalise_test("assert f(1)==2  # one") == normalise_test('assert f( 1 ) == 2')
    True
    >>> normalise_test("assert f(1) == 2") == normalise_test("assert f(2) == 2")
    False
    >>> normalise_test("assert f(1 ==")
    'assert f(1 =='
    """
    try:
        return ast.dump(ast.parse(snippet))
    except (SyntaxError, ValueError):
        return " ".join(snippet.split())


@dataclass(frozen=True)
class TestVerdict:
    """One accumulated test of one sample, judged three ways."""

    __test__ = False  # a data record, not a pytest class

    test_key: str
    """Normalised snippet (:func:`normalise_test`), for deduplication and joins."""
    origin: str
    """``baseline`` (the problem's own tests) or ``discriminator``."""
    stage: int
    """Stage 1..5 that emitted it; 0 for baseline tests."""
    duplicate: bool
    """Same test as an earlier one of this sample: it counts once, so this copy is ignored."""
    valid: bool
    """The reference solution passes it. Invalid tests never count against the generator."""
    candidate_status: str
    """Outcome on the sample's final code: ``passed``, ``failed``, ``error``, ``timeout``...
    Anything but ``passed`` is a failure (a test that was not run because there was no code
    included)."""
    mutants_killed: tuple[bool, ...] = ()
    """Per reference mutant: this test fails on that mutant. Empty: not run against mutants
    (counts as killing none)."""

    def killed(self, mutant: int) -> bool:
        return bool(self.mutants_killed) and self.mutants_killed[mutant]

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise ValueError(f"TestVerdict.origin={self.origin!r}: must be one of {ORIGINS}")
        if not 0 <= self.stage <= 5:
            raise ValueError(f"TestVerdict.stage={self.stage!r}: must be 0 (baseline) to 5")

    @property
    def passed(self) -> bool:
        return self.candidate_status == PASSED

    @property
    def counts(self) -> bool:
        """Counts towards rewards: valid and the first copy of its test."""
        return self.valid and not self.duplicate


@dataclass(frozen=True)
class SampleOutcome:
    """Everything the rewards of one generator sample (and its discriminator) depend on."""

    code_ok: bool
    """The stage-5 output parsed to code that defines the entry point."""
    tests: tuple[TestVerdict, ...] = ()
    """All accumulated tests of this sample, baseline included, in emission order."""
    n_mutants: int = 0
    """Number of reference mutants every test was run against."""

    def __post_init__(self) -> None:
        if self.n_mutants < 0:
            raise ValueError(f"SampleOutcome.n_mutants={self.n_mutants!r}: must be >= 0")
        for i, t in enumerate(self.tests):
            if t.mutants_killed and len(t.mutants_killed) != self.n_mutants:
                raise ValueError(
                    f"SampleOutcome.tests[{i}].mutants_killed has {len(t.mutants_killed)} "
                    f"entries; expected n_mutants={self.n_mutants}")

    # --- the counts every reward is built from -------------------------------------------
    @property
    def generator_tests(self) -> tuple[TestVerdict, ...]:
        """Tests that judge the generator: valid, deduplicated, baseline and discriminator."""
        return tuple(t for t in self.tests if t.counts)

    @property
    def discriminator_tests(self) -> tuple[TestVerdict, ...]:
        """The discriminator's own tests, deduplicated (valid or not)."""
        return tuple(t for t in self.tests if t.origin == "discriminator" and not t.duplicate)

    @property
    def valid_discriminator_tests(self) -> tuple[TestVerdict, ...]:
        return tuple(t for t in self.discriminator_tests if t.valid)

    @property
    def all_timeouts(self) -> bool:
        """Every test that judges the generator timed out (the seed's 'timeout' case)."""
        tests = self.generator_tests
        return bool(tests) and all(t.candidate_status == TIMEOUT for t in tests)
