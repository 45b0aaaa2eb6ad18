"""Rewards from execution only: outcome types, reward registries and reference mutants.

    from rewards import SampleOutcome, TestVerdict, compute_rewards, group_signal
    breakdown = compute_rewards(outcome, cfg.rewards)   # weighted totals + flat components
    signal = group_signal(rewards, problem_ids)         # groups without spread are skipped
    outcome.masked                                      # an infra verdict: never scored

    python -m pytest --doctest-modules rewards           # every reward's worked example
"""

from rewards.functions import (
    DISCRIMINATOR_REWARDS,
    GENERATOR_REWARDS,
    RewardBreakdown,
    RewardFn,
    adversarial_validity,
    bug_catch,
    compute_rewards,
    generator_pass_rate,
    mutation_kill,
    pass_rate,
    progressive,
    shifted_pass_rate,
    valid_invalid_bugcatch,
    validity,
)
from rewards.groups import GroupSignal, group_signal
from rewards.mutants import KINDS, Mutant, make_mutants
from rewards.outcome import INFRA, SampleOutcome, TestVerdict, normalise_test

__all__ = [
    "DISCRIMINATOR_REWARDS", "GENERATOR_REWARDS", "INFRA", "KINDS", "GroupSignal", "Mutant",
    "RewardBreakdown", "RewardFn", "SampleOutcome", "TestVerdict", "adversarial_validity",
    "bug_catch", "compute_rewards", "generator_pass_rate", "group_signal", "make_mutants",
    "mutation_kill", "normalise_test", "pass_rate", "progressive", "shifted_pass_rate",
    "valid_invalid_bugcatch", "validity",
]
