"""Reward functions: plain functions over one sample's execution results, chosen by name.

A reward is one function ``fn(outcome: SampleOutcome, cfg: RewardConfig) -> float`` decorated
with ``@reward(role)``: the decorator registers it under its own name (``REGISTRY``), a config
picks it with a weight (``rewards.generator: {pass_rate: 1.0}``) and the rewards table stores
its raw value under that name (the ``reward`` map column), so adding one touches nothing else.
:func:`compute_rewards` applies the weights and returns every component for the rewards table.

Conventions shared by all rewards:

* A test is **valid** when the reference solution passes it. Invalid tests never count
  against the generator, and duplicates count once (``TestVerdict.duplicate``).
* Only discriminator-origin tests count for discriminator rewards; baseline failures are not
  the discriminator's doing.
* Validity divides by ``max(n_tests, cfg.validity_floor)`` so that emitting one or two trivial
  (valid, toothless) tests does not earn full validity.
* An ``infra`` verdict (the harness failed, not the code) is never scored: a sample whose
  rewards would read one is masked (``SampleOutcome.masked``). :func:`compute_rewards` gives it
  no totals, and the components every reward is built from refuse it (``ValueError``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from configs.names import ROLES
from configs.schema import RewardConfig
from rewards.outcome import INFRA, SampleOutcome, TestVerdict

RewardFn = Callable[[SampleOutcome, RewardConfig], float]


@dataclass(frozen=True)
class Reward:
    """A registered reward: the role it scores and the function that computes it."""

    role: str
    fn: RewardFn


REGISTRY: dict[str, Reward] = {}
"""Every reward by name, in the order registered: what a config's ``rewards.generator`` and
``rewards.discriminator`` may name (``configs.learning.RewardConfig`` checks against it)."""


def reward(role: str) -> Callable[[RewardFn], RewardFn]:
    """Register the decorated function as a reward of ``role`` under its own name.

    A name already registered to another function is refused, so two rewards cannot share a
    name in configs and in the rewards table; registering the same function again (a module
    reloaded) replaces it.

    >>> @reward("critic")
    ... def anything(outcome, cfg): return 0.0
    Traceback (most recent call last):
    ValueError: reward 'anything': role 'critic' is not one of generator, discriminator
    """
    def register(fn: RewardFn) -> RewardFn:
        name = fn.__name__
        if role not in ROLES:
            raise ValueError(f"reward {name!r}: role {role!r} is not one of {', '.join(ROLES)}")
        old = REGISTRY.get(name)
        if old is not None and _origin(old.fn) != _origin(fn):
            raise ValueError(f"reward {name!r} ({_origin(fn)}) is already registered by "
                             f"{_origin(old.fn)}")
        REGISTRY[name] = Reward(role, fn)
        return fn

    return register


def _origin(fn: Callable[..., object]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def registered(role: str) -> dict[str, RewardFn]:
    """The rewards of ``role``, name -> function, in the order registered.

    >>> list(registered("discriminator"))
    ['adversarial_validity', 'valid_invalid_bugcatch', 'mutation_kill', 'progressive']
    """
    return {name: r.fn for name, r in REGISTRY.items() if r.role == role}


def _v(origin: str = "discriminator", valid: bool = True, passed: bool = True,
       kills: tuple[bool, ...] = (), duplicate: bool = False, status: str = "") -> TestVerdict:
    """A terse verdict for the doctests below."""
    return TestVerdict(test_key=f"t{id(object())}", origin=origin,
                       stage=0 if origin == "baseline" else 1, duplicate=duplicate,
                       valid=valid, candidate_status=status or ("passed" if passed else "failed"),
                       mutants_killed=kills)


def _scorable(outcome: SampleOutcome, what: str) -> None:
    """Refuse a masked outcome: an ``infra`` verdict is neither a pass nor a fail."""
    if outcome.masked:
        t = outcome.infra_tests[0]
        raise ValueError(f"{what}: the outcome is masked (test {t.test_key[:60]!r} has an "
                         f"{INFRA!r} verdict); masked samples are never scored")


# --- components --------------------------------------------------------------------------
def _judged(outcome: SampleOutcome, cfg: RewardConfig, what: str, baseline_only: bool,
            verdict: Callable[[list[bool]], float]) -> float:
    """The generator's rewards share one rule: ``verdict`` of the passes of the valid,
    deduplicated tests that judge it (the problem's own only when ``baseline_only``); no code:
    0; no test to judge by: ``cfg.neutral``. A masked outcome is refused (``_scorable``)."""
    _scorable(outcome, what)
    if not outcome.code_ok:
        return 0.0
    passed = [t.passed for t in outcome.generator_tests
              if not baseline_only or t.origin == "baseline"]
    return verdict(passed) if passed else cfg.neutral


def _share(passed: list[bool]) -> float:
    return sum(passed) / len(passed)


def _every(passed: list[bool]) -> float:
    return float(all(passed))


def generator_pass_rate(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Share of valid, deduplicated tests (baseline + discriminator) the final code passes.

    No code, or every test timed out: 0. No test to judge by: ``cfg.neutral``.
    """
    # All timeouts score 0 here (a timeout is not a pass); the test suite pins that case.
    return _judged(outcome, cfg, "generator_pass_rate", False, _share)


def validity(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Valid discriminator tests over ``max(n_discriminator_tests, validity_floor)``."""
    _scorable(outcome, "validity")
    tests = outcome.discriminator_tests
    n_valid = sum(t.valid for t in tests)
    return n_valid / max(len(tests), cfg.validity_floor)


def bug_catch(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Share of the valid discriminator tests that the final code fails (0 with none)."""
    _scorable(outcome, "bug_catch")
    valid = outcome.valid_discriminator_tests
    return sum(not t.passed for t in valid) / len(valid) if valid else 0.0


# --- generator rewards -------------------------------------------------------------------
@reward("generator")
def pass_rate(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Generator: pass rate over valid tests, in [0, 1].

    >>> cfg = RewardConfig()
    >>> pass_rate(SampleOutcome(True, (_v(passed=True), _v(passed=False),
    ...                                _v(valid=False, passed=False))), cfg)  # invalid ignored
    0.5
    >>> pass_rate(SampleOutcome(True, (_v("baseline"), _v(passed=False, duplicate=True))), cfg)
    1.0
    >>> pass_rate(SampleOutcome(True, (_v(status="timeout"), _v(status="timeout"))), cfg)
    0.0
    >>> pass_rate(SampleOutcome(False, (_v(),)), cfg), pass_rate(SampleOutcome(True, ()), cfg)
    (0.0, 0.5)
    """
    return generator_pass_rate(outcome, cfg)


@reward("generator")
def baseline_pass_rate(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Generator: pass rate over the problem's own (baseline) tests only, the discriminator's
    ignored: the non-adversarial control of ``benchmarks/learning.py``'s ablation.

    >>> cfg = RewardConfig()
    >>> baseline_pass_rate(SampleOutcome(True, (_v("baseline"), _v(passed=False))), cfg)
    1.0
    >>> baseline_pass_rate(SampleOutcome(True, (_v(passed=False),)), cfg)  # none: neutral
    0.5
    """
    return _judged(outcome, cfg, "baseline_pass_rate", True, _share)


@reward("generator")
def all_pass(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Generator: 1 when the final code passes every valid, deduplicated test (baseline and
    discriminator), else 0: the suite's verdict, as held-out pass@1 judges a solution.

    Under group-relative advantages the pass rate lets a sample that one discriminator test
    rejects still rank above its group's mean (0.9 among 1.0, 0.3, 0.0); here a test that
    rejects it takes it to the level of code that fails everything, so the discriminator's
    tests decide the sign of its advantage, not a tenth of it.

    >>> cfg = RewardConfig()
    >>> all_pass(SampleOutcome(True, (_v("baseline"), _v(), _v(valid=False, passed=False))), cfg)
    1.0
    >>> all_pass(SampleOutcome(True, (_v("baseline"), _v(passed=False))), cfg)
    0.0
    >>> all_pass(SampleOutcome(False, (_v(),)), cfg), all_pass(SampleOutcome(True, ()), cfg)
    (0.0, 0.5)
    """
    return _judged(outcome, cfg, "all_pass", False, _every)


@reward("generator")
def baseline_all_pass(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Generator: :func:`all_pass` over the problem's own (baseline) tests only, the
    discriminator's ignored: the ablation's control when the generator is paid by ``all_pass``.

    >>> cfg = RewardConfig()
    >>> baseline_all_pass(SampleOutcome(True, (_v("baseline"), _v(passed=False))), cfg)
    1.0
    >>> baseline_all_pass(SampleOutcome(True, (_v("baseline", passed=False), _v())), cfg)
    0.0
    """
    return _judged(outcome, cfg, "baseline_all_pass", True, _every)


@reward("generator")
def shifted_pass_rate(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Generator: ``pass_rate - 0.5``, in [-0.5, 0.5].

    The shift keeps a non-zero signal at 0% pass rate when rewards are used without a
    baseline (group advantages subtract the group mean anyway).

    >>> cfg = RewardConfig()
    >>> shifted_pass_rate(SampleOutcome(True, (_v(passed=False), _v(), _v(), _v())), cfg)
    0.25
    >>> shifted_pass_rate(SampleOutcome(False, ()), cfg)  # no code
    -0.5
    >>> shifted_pass_rate(SampleOutcome(True, ()), cfg)  # no tests: neutral, shifted
    0.0
    """
    return generator_pass_rate(outcome, cfg) - 0.5


# --- discriminator rewards ---------------------------------------------------------------
@reward("discriminator")
def adversarial_validity(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Discriminator: ``(1 - pass_rate_on_valid) * validity``, in [0, 1].

    ``1 - pass_rate_on_valid`` is :func:`bug_catch` over the discriminator's valid tests.

    >>> cfg = RewardConfig(validity_floor=3)
    >>> tests = (_v(passed=False), _v(), _v(), _v(valid=False, passed=False))
    >>> adversarial_validity(SampleOutcome(True, tests), cfg)  # (1 - 2/3) * 3/4
    0.25
    >>> adversarial_validity(SampleOutcome(True, (_v(passed=False),)), cfg)  # floor: 1/3
    0.3333333333333333
    >>> adversarial_validity(SampleOutcome(True, (_v("baseline", passed=False),)), cfg)
    0.0
    """
    return bug_catch(outcome, cfg) * validity(outcome, cfg)


@reward("discriminator")
def valid_invalid_bugcatch(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Discriminator: ``0.4*valid - 0.6*invalid + 0.6*bug_catch``, clamped to [-1, 1].

    ``valid`` and ``invalid`` are shares of the discriminator's deduplicated tests, both over
    the same floored denominator as :func:`validity`; ``bug_catch`` is the share of its valid
    tests the final code fails. No discriminator test scores 0. The clamp is a bound only:
    since ``valid + invalid <= 1`` the raw value already lies in [-0.6, 1].

    >>> cfg = RewardConfig(validity_floor=1)
    >>> tests = (_v(passed=False), _v(), _v(valid=False), _v(valid=False))
    >>> round(valid_invalid_bugcatch(SampleOutcome(True, tests), cfg), 6)  # .2 - .3 + .3
    0.2
    >>> valid_invalid_bugcatch(SampleOutcome(True, (_v(valid=False),) * 2), cfg)
    -0.6
    >>> valid_invalid_bugcatch(SampleOutcome(True, ()), cfg)
    0.0
    """
    _scorable(outcome, "valid_invalid_bugcatch")
    tests = outcome.discriminator_tests
    if not tests:
        return 0.0
    denom = max(len(tests), cfg.validity_floor)
    n_valid = sum(t.valid for t in tests)
    raw = 0.4 * n_valid / denom - 0.6 * (len(tests) - n_valid) / denom \
        + 0.6 * bug_catch(outcome, cfg)
    return min(1.0, max(-1.0, raw))


@reward("discriminator")
def mutation_kill(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Discriminator: share of reference mutants killed by at least one valid discriminator
    test, in [0, 1]; 0 when there are no mutants.

    It keeps a signal when the generator passes everything: strong tests still separate the
    reference from its near-miss mutants.

    >>> cfg = RewardConfig()
    >>> tests = (_v(kills=(True, False, False)), _v(kills=(True, True, False)),
    ...          _v(valid=False, kills=(True, True, True)),        # invalid: ignored
    ...          _v("baseline", kills=(False, False, True)))       # baseline: ignored
    >>> round(mutation_kill(SampleOutcome(True, tests, n_mutants=3), cfg), 6)
    0.666667
    """
    _scorable(outcome, "mutation_kill")
    if outcome.n_mutants == 0:
        return 0.0
    killed = [any(t.killed(m) for t in outcome.valid_discriminator_tests)
              for m in range(outcome.n_mutants)]
    return sum(killed) / outcome.n_mutants


@reward("discriminator")
def progressive(outcome: SampleOutcome, cfg: RewardConfig) -> float:
    """Discriminator: what the training stage's valid tests add to the suite of the stages
    before it (baseline tests included), in [0, 1].

    Stage ``k = outcome.stage`` is paid for the targets that only its tests reject: the share
    of reference mutants that one of its valid tests kills and no counted test of a stage
    ``< k`` kills, averaged with whether it rejects the sample's own code while every earlier
    test passes it; times the stage's validity (its valid tests over ``max(n,
    validity_floor)``). A test the earlier stages already wrote is a duplicate and counts
    nothing, and a new test that rejects only what was already rejected earns nothing either:
    repeating an earlier stage is worth 0, finding what it missed is what pays. The other
    discriminator rewards (``adversarial_validity``, ``mutation_kill``) score every stage's
    tests alike.

    >>> cfg = RewardConfig(validity_floor=1)
    >>> early = _v(kills=(True, False))                 # stage 1 already kills mutant 0
    >>> late = TestVerdict("late", "discriminator", 2, False, True, "failed", (True, True))
    >>> out = SampleOutcome(True, (early, late), n_mutants=2, stage=2)
    >>> progressive(out, cfg)  # mutant 1 only: 1/2; the code: caught first here, 1
    0.75
    >>> progressive(SampleOutcome(True, (early, late), n_mutants=2, stage=1), cfg)
    0.25
    >>> copy = TestVerdict("late", "discriminator", 3, True, True, "failed")
    >>> progressive(SampleOutcome(True, (early, late, copy), 2, stage=3), cfg)  # a repeat: 0
    0.0
    """
    _scorable(outcome, "progressive")
    mine = [t for t in outcome.discriminator_tests if t.stage == outcome.stage]
    if not mine:
        return 0.0
    valid = [t for t in mine if t.valid]
    earlier = [t for t in outcome.tests if t.counts and t.stage < outcome.stage]
    new_kills = sum(any(t.killed(m) for t in valid) and not any(t.killed(m) for t in earlier)
                    for m in range(outcome.n_mutants))
    caught = (outcome.code_ok and any(not t.passed for t in valid)
              and all(t.passed for t in earlier))
    added = (float(caught) if outcome.n_mutants == 0
             else (new_kills / outcome.n_mutants + caught) / 2)
    return added * len(valid) / max(len(mine), cfg.validity_floor)


@dataclass(frozen=True)
class RewardBreakdown:
    """Weighted totals for both roles and every component, flat, for the rewards table.

    A masked sample (``SampleOutcome.masked``) has ``None`` totals and ``None`` shares: no
    reward value exists for it, so none can reach an update or a mean by accident."""

    generator: float | None
    discriminator: float | None
    components: dict[str, float | None] = field(default_factory=dict)

    @property
    def masked(self) -> bool:
        return self.generator is None


def compute_rewards(outcome: SampleOutcome, cfg: RewardConfig) -> RewardBreakdown:
    """Weighted generator and discriminator rewards of one sample, plus every component.

    ``components`` always has the same keys whatever the config selects (counts, shares and
    the raw value of every registered reward as ``reward/<name>``); the rewards table keeps
    the configured rewards' raw values (``pipeline.scoring.reward_rows``).

    >>> cfg = RewardConfig(generator={"pass_rate": 1.0},
    ...                    discriminator={"adversarial_validity": 1.0, "mutation_kill": 0.5})
    >>> out = SampleOutcome(True, (_v("baseline"), _v(passed=False, kills=(True, False)),
    ...                            _v(kills=(False, False)), _v(kills=(False, False))), 2)
    >>> r = compute_rewards(out, cfg)
    >>> r.generator, round(r.discriminator, 6)  # 3/4; (1/3 * 3/3) + 0.5 * 1/2
    (0.75, 0.583333)
    >>> r.components["n_valid"], r.components["reward/mutation_kill"]
    (3.0, 0.5)

    A masked outcome (an ``infra`` verdict some reward would read) is never scored: no totals,
    no shares; the counts only cover known verdicts (a test of unknown validity is neither
    valid nor invalid).

    >>> masked = SampleOutcome(True, out.tests + (_v(status=INFRA),), 2)
    >>> m = compute_rewards(masked, cfg)
    >>> m.masked, m.generator, m.discriminator, m.components["reward/pass_rate"]
    (True, None, None, None)
    >>> m.components["masked"], m.components["n_valid"], m.components["n_infra_tests"]
    (1.0, 4.0, 1.0)
    """
    disc = outcome.discriminator_tests
    n_valid = sum(t.valid for t in disc)
    gen_tests = outcome.generator_tests
    masked = outcome.masked
    components: dict[str, float | None] = {
        "code_ok": float(outcome.code_ok),
        "masked": float(masked),
        "n_infra_tests": float(len(outcome.infra_tests)),
        "n_tests": float(len(gen_tests)),
        "n_passed": float(sum(t.passed for t in gen_tests) if outcome.code_ok else 0),
        "all_timeouts": float(outcome.all_timeouts),
        "n_disc_tests": float(len(disc)),
        "n_valid": float(n_valid),
        "n_invalid": float(len(disc) - n_valid),
        "n_duplicates": float(sum(t.duplicate for t in outcome.tests)),
        "n_mutants": float(outcome.n_mutants),
    }
    if masked:
        components |= dict.fromkeys(("pass_rate", "validity", "bug_catch", "mutation_kill"))
        components |= {f"reward/{name}": None for name in REGISTRY}
        components |= {"generator_reward": None, "discriminator_reward": None}
        return RewardBreakdown(generator=None, discriminator=None, components=components)
    raw = {name: r.fn(outcome, cfg) for name, r in REGISTRY.items()}
    components |= {
        "pass_rate": generator_pass_rate(outcome, cfg),
        "validity": validity(outcome, cfg),
        "bug_catch": bug_catch(outcome, cfg),
        "mutation_kill": mutation_kill(outcome, cfg),
    }
    components |= {f"reward/{name}": float(value) for name, value in raw.items()}
    generator = sum(w * raw[name] for name, w in cfg.generator.items())
    discriminator = sum(w * raw[name] for name, w in cfg.discriminator.items())
    components["generator_reward"] = generator
    components["discriminator_reward"] = discriminator
    return RewardBreakdown(generator=generator, discriminator=discriminator,
                           components=components)
