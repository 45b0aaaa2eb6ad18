"""What execution says about one generator sample: the input type of every reward function.

The sandbox runs each accumulated test three ways (against the sample's final code, against
the problem's reference solution and against AST mutants of the reference); the caller folds
those results into one :class:`SampleOutcome` per sample. Rewards read nothing else, so they
stay plain functions over execution results, with no model, table or sandbox in sight.

A verdict with status :data:`INFRA` came from the harness, not from the code (a dead worker, a
jail that did not start, a process starved on an overloaded host). It is neither a pass nor a
fail and no reward ever scores it: a sample whose rewards would read one is *masked*
(:attr:`SampleOutcome.masked`, the one place the rule lives) and enters no update, for either
role.

    from rewards import SampleOutcome, TestVerdict, normalise_test
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from configs.names import CODE_STAGE

ORIGINS = ("baseline", "discriminator", "peer")
PASSED = "passed"
TIMEOUT = "timeout"
INFRA = "infra"
"""Sandbox status of a verdict the harness produced (the code was not judged): unknown."""


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
    """``baseline`` (the problem's own tests), ``discriminator`` (written for this sample's
    chain) or ``peer`` (written for another sample of the problem, ``rewards.peer_tests``: it
    judges the generator only)."""
    stage: int
    """Chain stage that emitted it (``configs.names.STAGES``); 0 for baseline tests."""
    duplicate: bool
    """Same test as an earlier one of this sample: it counts once, so this copy is ignored."""
    valid: bool | None
    """The reference solution passes it. Invalid tests never count against the generator.
    ``None``: unknown, the reference's verdict was :data:`INFRA`; such a test is neither valid
    nor invalid (it never counts as invalid against the discriminator) and masks its sample."""
    candidate_status: str
    """Outcome on the sample's final code: ``passed``, ``failed``, ``error``, ``timeout``...
    Anything but ``passed`` is a failure (a test that was not run because there was no code
    included), except :data:`INFRA`: unknown, never scored (see :attr:`unknown`)."""
    mutants_killed: tuple[bool | None, ...] = ()
    """Per reference mutant: this test fails on that mutant; ``None``: unknown (that run's
    verdict was :data:`INFRA`). Empty: not run against mutants (counts as killing none)."""

    def killed(self, mutant: int) -> bool:
        """Known to kill ``mutant`` (an unknown verdict is not a kill)."""
        return bool(self.mutants_killed) and self.mutants_killed[mutant] is True

    def __post_init__(self) -> None:
        if self.origin not in ORIGINS:
            raise ValueError(f"TestVerdict.origin={self.origin!r}: must be one of {ORIGINS}")
        if not 0 <= self.stage <= CODE_STAGE:
            raise ValueError(f"TestVerdict.stage={self.stage!r}: must be 0 (baseline) to "
                             f"{CODE_STAGE}")

    @property
    def passed(self) -> bool:
        return self.candidate_status == PASSED

    @property
    def counts(self) -> bool:
        """Counts towards rewards: known valid and the first copy of its test."""
        return self.valid is True and not self.duplicate

    @property
    def unknown(self) -> bool:
        """A verdict that some reward reads came from the harness (:data:`INFRA`).

        Read verdicts of a test (duplicates have none: they count through their first copy):
        the reference's always (it decides validity, which every reward reads), and once the
        test is known valid, the candidate's (pass rate, bug catch) and each mutant's (mutation
        kill). A known-invalid test's other verdicts are read by no reward, so they mask
        nothing.

        >>> v = TestVerdict("t", "discriminator", 1, False, True, "passed", (True, None))
        >>> v.unknown, v.killed(0), v.killed(1)       # mutant 1: kill credit unknown
        (True, True, False)
        >>> TestVerdict("t", "baseline", 0, False, None, "passed").unknown   # validity unknown
        True
        >>> TestVerdict("t", "discriminator", 1, False, False, INFRA).unknown  # invalid anyway
        False
        """
        if self.duplicate:
            return False
        if self.valid is None:
            return True
        return self.valid and (self.candidate_status == INFRA or None in self.mutants_killed)


@dataclass(frozen=True)
class SampleOutcome:
    """Everything the rewards of one generator sample (and its discriminator) depend on."""

    code_ok: bool
    """The code stage's output parsed to code that defines the entry point."""
    tests: tuple[TestVerdict, ...] = ()
    """All accumulated tests of this sample, baseline included, in emission order."""
    n_mutants: int = 0
    """Number of reference mutants every test was run against."""
    stage: int = CODE_STAGE
    """The training stage: the chain stage whose discriminator tests the stage-aware rewards
    (``progressive``) score against the suite of the stages before it."""

    def __post_init__(self) -> None:
        if not 1 <= self.stage <= CODE_STAGE:
            raise ValueError(f"SampleOutcome.stage={self.stage!r}: must be 1 to {CODE_STAGE}")
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
        """The discriminator's own tests, deduplicated, known valid or known invalid (a test of
        unknown validity is neither)."""
        return tuple(t for t in self.tests if t.origin == "discriminator" and not t.duplicate
                     and t.valid is not None)

    @property
    def valid_discriminator_tests(self) -> tuple[TestVerdict, ...]:
        return tuple(t for t in self.discriminator_tests if t.valid)

    # --- the masking rule ----------------------------------------------------------------
    @property
    def infra_tests(self) -> tuple[TestVerdict, ...]:
        """Tests with a verdict that a reward would read and the harness produced
        (:attr:`TestVerdict.unknown`)."""
        return tuple(t for t in self.tests if t.unknown)

    @property
    def masked(self) -> bool:
        """No reward of this sample may be computed: one of its counted tests has an
        :data:`INFRA` verdict on the candidate, on the reference (validity unknown) or on a
        mutant (kill credit unknown).

        Scoring it as a pass or as a fail would reward or punish the model for the sandbox's
        trouble, so both roles' rewards of a masked sample are left out: ``compute_rewards``
        gives ``None`` totals, the rewards table marks the row ``masked``, and the update drops
        the sample before group-relative advantages are computed (it is not in its group).

        >>> ok = TestVerdict("a", "discriminator", 1, False, True, "failed")
        >>> SampleOutcome(True, (ok,)).masked
        False
        >>> SampleOutcome(True, (ok, TestVerdict("b", "baseline", 0, False, True, INFRA))).masked
        True
        >>> SampleOutcome(True, (ok, TestVerdict("c", "discriminator", 1, False, None, "passed"))
        ...               ).discriminator_tests == (ok,)  # masked, and "c" is not invalid
        True
        """
        return bool(self.infra_tests)

    @property
    def all_timeouts(self) -> bool:
        """Every test that judges the generator timed out."""
        tests = self.generator_tests
        return bool(tests) and all(t.candidate_status == TIMEOUT for t in tests)
