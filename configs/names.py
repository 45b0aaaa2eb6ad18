"""The names every layer shares: the five chain stages, the two roles and the rewards.

Defined once, at the bottom of the import graph (``configs`` imports nothing else of the
project but ``sandbox.result``, whose ``Limits`` hold the sandbox's defaults; ``sandbox``
imports nothing of the project), so the config schema, the Parquet schemas, the reward
registry, the models and the pipeline's step catalogue (``pipeline.catalogue``) all read the
same tuples.
"""

STAGES = (1, 2, 3, 4, 5)
"""Chain stages: informal reasoning, structured reasoning, pseudocode, constraints, code."""

CODE_STAGE = STAGES[-1]
"""The stage whose output is the executable Python the sandbox runs."""

ROLES = ("generator", "discriminator")
"""The generator writes the chain; the discriminator writes tests for each stage of it."""

REWARDS = (
    ("pass_rate", "generator"),
    ("shifted_pass_rate", "generator"),
    ("adversarial_validity", "discriminator"),
    ("valid_invalid_bugcatch", "discriminator"),
    ("mutation_kill", "discriminator"),
    ("baseline_pass_rate", "generator"),
    ("progressive", "discriminator"),
    ("all_pass", "generator"),
    ("baseline_all_pass", "generator"),
)
"""Every reward function, by name, and the role it scores. The names select rewards in a
config (``rewards.generator: {pass_rate: 1.0}``), name the function in ``rewards.functions``
that computes each one, and are columns of the rewards table in this order
(``artifacts.schemas.REWARDS``). A new reward goes at the end, with its function of the same
name and a new version of the rewards table."""

REWARD_NAMES = tuple(name for name, _ in REWARDS)
GENERATOR_REWARDS = tuple(name for name, role in REWARDS if role == "generator")
DISCRIMINATOR_REWARDS = tuple(name for name, role in REWARDS if role == "discriminator")
