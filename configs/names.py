"""The names every layer shares: the five chain stages and the two roles.

Defined once, at the bottom of the import graph (``configs`` imports nothing else of the
project), so the config schema, the Parquet schemas, the models and the pipeline's step
catalogue (``pipeline.catalogue``) all read the same tuples.
"""

STAGES = (1, 2, 3, 4, 5)
"""Chain stages: informal reasoning, structured reasoning, pseudocode, constraints, code."""

CODE_STAGE = STAGES[-1]
"""The stage whose output is the executable Python the sandbox runs."""

ROLES = ("generator", "discriminator")
"""The generator writes the chain; the discriminator writes tests for each stage of it."""
