"""Rewards from execution only: outcome types, the reward registry and reference mutants.

    from rewards import SampleOutcome, TestVerdict, compute_rewards, group_signal, reward
    @reward("generator")                                # a new reward: one function
    def compiles(outcome, cfg): return float(outcome.code_ok)
    breakdown = compute_rewards(outcome, cfg.rewards)   # weighted totals + flat components
    signal = group_signal(rewards, problem_ids)         # groups without spread are skipped
    outcome.masked                                      # an infra verdict: never scored

    python -m pytest --doctest-modules rewards           # every reward's worked example
"""

from rewards.functions import (
    REGISTRY,
    Reward,
    RewardBreakdown,
    RewardFn,
    adversarial_validity,
    bug_catch,
    compute_rewards,
    generator_pass_rate,
    mutation_kill,
    pass_rate,
    progressive,
    registered,
    reward,
    shifted_pass_rate,
    valid_invalid_bugcatch,
    validity,
)
from rewards.groups import GroupSignal, group_signal
from rewards.mutants import KINDS, Mutant, make_mutants
from rewards.outcome import INFRA, SampleOutcome, TestVerdict, normalise_test

__all__ = [
    "INFRA", "KINDS", "REGISTRY", "GroupSignal", "Mutant", "Reward", "RewardBreakdown",
    "RewardFn", "SampleOutcome", "TestVerdict", "adversarial_validity", "bug_catch",
    "compute_rewards", "generator_pass_rate", "group_signal", "make_mutants", "mutation_kill",
    "normalise_test", "pass_rate", "progressive", "registered", "reward", "shifted_pass_rate",
    "valid_invalid_bugcatch", "validity",
]
