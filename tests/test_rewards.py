"""Reward functions, the registries, ``compute_rewards`` and ``group_signal``."""

from __future__ import annotations

import pytest

from configs import ConfigError, load_config
from configs.names import ROLES
from configs.schema import RewardConfig
from rewards import (
    REGISTRY,
    SampleOutcome,
    TestVerdict,
    compute_rewards,
    group_signal,
    normalise_test,
    registered,
    reward,
)

GENERATOR_REWARDS, DISCRIMINATOR_REWARDS = registered("generator"), registered("discriminator")


def verdict(origin="discriminator", valid=True, status="passed", kills=(), duplicate=False,
            key="t", stage=None) -> TestVerdict:
    return TestVerdict(test_key=key, origin=origin,
                       stage=(0 if origin == "baseline" else 2) if stage is None else stage,
                       duplicate=duplicate, valid=valid, candidate_status=status,
                       mutants_killed=kills)


CFG = RewardConfig()


def test_every_reward_is_registered_under_its_own_name_for_one_role():
    assert set(GENERATOR_REWARDS) == {"pass_rate", "shifted_pass_rate", "baseline_pass_rate",
                                      "all_pass", "baseline_all_pass"}
    assert set(DISCRIMINATOR_REWARDS) == {"adversarial_validity", "valid_invalid_bugcatch",
                                          "mutation_kill", "progressive"}
    assert all(r.fn.__name__ == name and r.role in ROLES for name, r in REGISTRY.items())


def test_a_taken_name_or_an_unknown_role_is_refused_at_registration():
    def pass_rate(outcome, cfg):  # another function under a registered name
        return 1.0

    with pytest.raises(ValueError, match=r"'pass_rate' \(.*\) is already registered by "
                                         r"rewards\.functions\.pass_rate"):
        reward("generator")(pass_rate)
    with pytest.raises(ValueError, match="role 'critic' is not one of generator, discriminator"):
        reward("critic")(pass_rate)
    assert REGISTRY["pass_rate"].fn is GENERATOR_REWARDS["pass_rate"]


def test_a_config_names_registered_rewards_of_its_role_only():
    assert load_config(None, ["rewards.generator={pass_rate: 1.0}"]).rewards.generator == {
        "pass_rate": 1.0}
    with pytest.raises(ConfigError, match=r"rewards\.generator\.nope=1\.0: unknown reward; "
                                          r"choose from pass_rate, .*baseline_all_pass"):
        load_config(None, ["rewards.generator={nope: 1.0}"])
    with pytest.raises(ConfigError, match=r"rewards\.discriminator\.all_pass=1\.0: a generator "
                                          r"reward; choose from adversarial_validity"):
        load_config(None, ["rewards.discriminator={all_pass: 1.0}"])


def test_generator_counts_valid_baseline_and_discriminator_tests_once():
    tests = (verdict("baseline"), verdict("baseline", status="failed"),
             verdict(status="error"), verdict(),
             verdict(valid=False, status="failed"),            # invalid: never counts
             verdict(status="failed", duplicate=True))         # duplicate: counts once
    out = SampleOutcome(True, tests)
    assert GENERATOR_REWARDS["pass_rate"](out, CFG) == pytest.approx(2 / 4)
    assert GENERATOR_REWARDS["shifted_pass_rate"](out, CFG) == pytest.approx(0.0)


@pytest.mark.parametrize("status", ["failed", "error", "timeout", "not_run"])
def test_anything_but_passed_is_a_failure(status):
    out = SampleOutcome(True, (verdict(), verdict(status=status)))
    assert GENERATOR_REWARDS["pass_rate"](out, CFG) == 0.5


def test_generator_edge_cases_no_code_timeouts_no_tests():
    no_code = SampleOutcome(False, (verdict(), verdict()))
    timeouts = SampleOutcome(True, (verdict(status="timeout"), verdict("baseline",
                                                                       status="timeout")))
    only_invalid = SampleOutcome(True, (verdict(valid=False, status="failed"),))
    cfg = RewardConfig(neutral=0.3)
    assert timeouts.all_timeouts and not no_code.all_timeouts
    for name, shift in (("pass_rate", 0.0), ("shifted_pass_rate", -0.5)):
        fn = GENERATOR_REWARDS[name]
        assert fn(no_code, cfg) == pytest.approx(0.0 + shift)
        assert fn(timeouts, cfg) == pytest.approx(0.0 + shift)
        # Nothing valid to judge by: the configured neutral value.
        assert fn(only_invalid, cfg) == pytest.approx(0.3 + shift)


@pytest.mark.parametrize("name", ["all_pass", "baseline_all_pass"])
def test_all_pass_is_the_suites_verdict(name):
    fn = GENERATOR_REWARDS[name]
    cfg = RewardConfig(neutral=0.3)
    passing = (verdict("baseline"), verdict(), verdict(valid=False, status="failed"),
               verdict(status="passed", duplicate=True))   # invalid and duplicates never count
    assert fn(SampleOutcome(True, passing), cfg) == 1.0
    for status in ("failed", "error", "timeout", "not_run"):  # anything but passed fails it
        assert fn(SampleOutcome(True, (verdict("baseline", status=status), verdict())),
                  cfg) == 0.0
    assert fn(SampleOutcome(False, passing), cfg) == 0.0      # no code
    assert fn(SampleOutcome(True, (verdict(valid=False, status="failed"),)), cfg) == 0.3


def test_baseline_all_pass_ignores_the_discriminator_and_all_pass_does_not():
    rejected = SampleOutcome(True, (verdict("baseline"), verdict("baseline"),
                                    verdict(status="failed")))
    assert GENERATOR_REWARDS["baseline_all_pass"](rejected, CFG) == 1.0
    assert GENERATOR_REWARDS["all_pass"](rejected, CFG) == 0.0
    assert GENERATOR_REWARDS["baseline_pass_rate"](rejected, CFG) == 1.0


def test_all_pass_lets_a_discriminator_test_decide_the_sign_of_an_advantage():
    """The reason ``all_pass`` exists: in a group where other samples fail baseline tests, a
    sample that passes every baseline test but one of ten valid discriminator tests still ranks
    above its group's mean under the pass rate (it is reinforced); under ``all_pass`` it ranks
    with the failures (its advantage is negative), and under the baseline-only twin, the
    ablation's reward, it ranks with the full pass."""
    import torch

    from models.ppo import group_advantages

    def base(ok: int) -> TestVerdict:
        return verdict("baseline", status="passed" if ok else "failed")

    def disc(ok: int) -> TestVerdict:
        return verdict(status="passed" if ok else "failed")

    group = [SampleOutcome(True, (base(1), base(1)) + (disc(1),) * 10),       # right
             SampleOutcome(True, (base(1), base(1)) + (disc(1),) * 9 + (disc(0),)),  # caught
             SampleOutcome(True, (base(1), base(0)) + (disc(0),) * 10),
             SampleOutcome(True, (base(0), base(0)) + (disc(0),) * 10)]

    def advantage_of_caught(name: str) -> float:
        rewards = torch.tensor([GENERATOR_REWARDS[name](o, CFG) for o in group])
        adv, live = group_advantages(rewards, torch.zeros(4, dtype=torch.long))
        assert bool(live.all())
        return float(adv[1])

    assert advantage_of_caught("pass_rate") > 0
    assert advantage_of_caught("all_pass") < 0
    assert advantage_of_caught("baseline_all_pass") > 0


def test_adversarial_validity_matches_the_seed_examples():
    # Seed 001: generator passes 8/10, tests pass 10/10 ground truth -> 0.2 * 1.0.
    tests = tuple(verdict(status="passed" if i < 8 else "failed") for i in range(10))
    assert DISCRIMINATOR_REWARDS["adversarial_validity"](
        SampleOutcome(True, tests), CFG) == pytest.approx(0.2)
    # Invalid tests lower validity and are left out of the pass rate on valid tests.
    tests = tests[:6] + tuple(verdict(valid=False, status="failed") for _ in range(4))
    assert DISCRIMINATOR_REWARDS["adversarial_validity"](
        SampleOutcome(True, tests), CFG) == pytest.approx(0.0)
    tests = (verdict(status="failed"),) * 3 + (verdict(),) * 3 + (verdict(valid=False),) * 4
    assert DISCRIMINATOR_REWARDS["adversarial_validity"](
        SampleOutcome(True, tests), CFG) == pytest.approx(0.5 * 0.6)


def test_validity_floor_stops_two_trivial_tests_paying_in_full():
    two = SampleOutcome(True, (verdict(status="failed"), verdict(status="failed")))
    fn = DISCRIMINATOR_REWARDS["adversarial_validity"]
    assert fn(two, RewardConfig(validity_floor=3)) == pytest.approx(2 / 3)
    assert fn(two, RewardConfig(validity_floor=1)) == pytest.approx(1.0)


def test_discriminator_rewards_ignore_baseline_tests_and_duplicates():
    fn = DISCRIMINATOR_REWARDS["adversarial_validity"]
    base = (verdict(status="failed", key="a"), verdict(key="b"), verdict(key="c"))
    with_baseline = base + (verdict("baseline", status="failed"),) * 3
    with_dupes = base + (verdict(status="failed", key="a", duplicate=True),) * 5
    assert fn(SampleOutcome(True, with_baseline), CFG) == fn(SampleOutcome(True, base), CFG)
    assert fn(SampleOutcome(True, with_dupes), CFG) == fn(SampleOutcome(True, base), CFG)


def test_valid_invalid_bugcatch_formula_and_range():
    fn = DISCRIMINATOR_REWARDS["valid_invalid_bugcatch"]
    cfg = RewardConfig(validity_floor=1)
    # 3 valid (2 caught) + 1 invalid: 0.4*0.75 - 0.6*0.25 + 0.6*(2/3)
    tests = (verdict(status="failed"), verdict(status="error"), verdict(),
             verdict(valid=False))
    assert fn(SampleOutcome(True, tests), cfg) == pytest.approx(0.3 - 0.15 + 0.4)
    all_caught = (verdict(status="failed"),) * 5
    assert fn(SampleOutcome(True, all_caught), cfg) == pytest.approx(1.0)  # the maximum
    assert fn(SampleOutcome(True, (verdict(valid=False),)), cfg) == pytest.approx(-0.6)
    assert fn(SampleOutcome(True, ()), cfg) == 0.0
    # The floor lowers the shares of a too-short suite too.
    assert fn(SampleOutcome(True, (verdict(),)), RewardConfig(validity_floor=4)) == \
        pytest.approx(0.1)


def test_mutation_kill_counts_mutants_killed_by_a_valid_discriminator_test():
    fn = DISCRIMINATOR_REWARDS["mutation_kill"]
    tests = (verdict(kills=(True, False, False, False)),
             verdict(kills=(True, False, True, False)),
             verdict(valid=False, kills=(False, True, False, False)),
             verdict("baseline", kills=(False, True, False, True)),
             verdict(kills=()))  # not run against mutants: kills none
    out = SampleOutcome(True, tests, n_mutants=4)
    assert fn(out, CFG) == pytest.approx(2 / 4)
    # The signal survives a generator that passes every test.
    assert all(t.candidate_status == "passed" for t in tests)
    assert fn(SampleOutcome(True, (verdict(),), n_mutants=0), CFG) == 0.0


def test_outcome_rejects_inconsistent_input():
    with pytest.raises(ValueError, match="n_mutants=3"):
        SampleOutcome(True, (verdict(kills=(True,)),), n_mutants=3)
    with pytest.raises(ValueError, match="'oracle'"):
        verdict(origin="oracle")
    with pytest.raises(ValueError, match="stage=7"):
        verdict(stage=7)


def test_compute_rewards_weights_and_components():
    cfg = RewardConfig(generator={"shifted_pass_rate": 2.0},
                       discriminator={"valid_invalid_bugcatch": 1.0, "mutation_kill": 0.5},
                       validity_floor=1)
    tests = (verdict("baseline"), verdict(status="failed", kills=(True, False)),
             verdict(kills=(False, False)), verdict(valid=False, kills=(True, True)),
             verdict(duplicate=True, kills=(False, False)))
    r = compute_rewards(SampleOutcome(True, tests, n_mutants=2), cfg)
    c = r.components
    assert (c["n_tests"], c["n_passed"], c["n_disc_tests"]) == (3, 2, 3)
    assert (c["n_valid"], c["n_invalid"], c["n_duplicates"]) == (2, 1, 1)
    assert c["pass_rate"] == pytest.approx(2 / 3)
    assert c["validity"] == pytest.approx(2 / 3)
    assert c["bug_catch"] == pytest.approx(1 / 2)
    assert c["mutation_kill"] == pytest.approx(1 / 2)
    vib = 0.4 * 2 / 3 - 0.6 * 1 / 3 + 0.6 * 0.5
    assert c["reward/valid_invalid_bugcatch"] == pytest.approx(vib)
    assert c["reward/adversarial_validity"] == pytest.approx(0.5 * 2 / 3)
    assert r.generator == pytest.approx(2.0 * (2 / 3 - 0.5))
    assert r.discriminator == pytest.approx(vib + 0.5 * 0.5)
    assert all(isinstance(v, float) for v in c.values())
    # Same columns whatever the config selects, so the rewards table keeps one schema.
    assert set(compute_rewards(SampleOutcome(False), RewardConfig()).components) == set(c)


def test_normalise_test_ignores_layout_only():
    assert normalise_test("assert f([1,2]) == 3") == normalise_test("assert f([1, 2])==3  # sum")
    assert normalise_test("assert f([1,2]) == 3") != normalise_test("assert f([2,1]) == 3")


def test_group_signal_reports_groups_without_spread():
    s = group_signal([0.5, 0.5, 0.5, 1.0, 0.0, 0.2, 0.2 + 1e-12, 0.9],
                     [7, 7, 7, 3, 3, 4, 4, 5])
    assert s.mask == (False, False, False, True, True, False, False, False)
    assert s.dead_groups == (7, 4, 5) and s.n_dead == 3
    with pytest.raises(ValueError, match="3 rewards but 2"):
        group_signal([1.0, 2.0, 3.0], [1, 1])
