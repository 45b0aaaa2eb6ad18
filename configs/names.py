"""The names every layer shares: the chain's stages and the two roles.

Defined once, at the bottom of the import graph (``configs`` imports nothing else of the
project at import time; the sandbox's limits are declared in ``configs.limits``), so the config
schema, the Parquet schemas, the reward
registry, the models and the pipeline's step catalogue (``pipeline.catalogue``) all read the
same tuples. Reward names are not here: each reward registers its own
(``rewards.functions.reward``).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class StageSpec:
    """One chain stage: what the generator writes at it and what the discriminator tests."""

    name: str
    description: str
    instruction: str
    """The generator's instruction, after ``Stage k of N: <name>.``; ``{entry_point}`` is
    filled in."""
    focus: str
    """The kind of test the discriminator writes at this stage (one line)."""
    names_edge_cases: bool = False
    """Whether the generator's text here names the edge cases the code must handle (held-out
    coherence reads these stages: ``pipeline.evaluation.coherence``)."""


STAGE_TABLE = (
    StageSpec(
        name="informal reasoning",
        description="Conversational, intuitive understanding of the problem and an approach.",
        instruction=("In a few plain sentences, explain what `{entry_point}` must do and which "
                     "approach would work. Do not write code yet."),
        focus="basic cases: the happy path, typical inputs, an empty or single-element input "
              "where it makes sense",
    ),
    StageSpec(
        name="structured reasoning",
        description="An organised breakdown: the problem, the approach, the steps, edge cases.",
        instruction=("As a numbered list, state the problem, the approach, the steps, and the "
                     "edge cases `{entry_point}` must handle. No code yet."),
        focus="edge cases: boundary values, empty inputs, duplicates, no-solution inputs named "
              "in the reasoning",
        names_edge_cases=True,
    ),
    StageSpec(
        name="pseudocode",
        description="The algorithm in language-neutral pseudocode.",
        instruction="Write the algorithm for `{entry_point}` as indented pseudocode (not Python).",
        focus="algorithmic corner cases: loop boundaries, off-by-one errors, repeated elements, "
              "ordering",
    ),
    StageSpec(
        name="constraints and invariants",
        description="Time and space complexity, invariants, and the inputs that must be handled.",
        instruction=("State the time and space complexity of your algorithm for `{entry_point}`, "
                     "its loop invariants, and the input ranges and special values it must "
                     "handle."),
        focus="constraints and stress: negative numbers, extreme values, large inputs that "
              "expose slow or overflowing solutions",
        names_edge_cases=True,
    ),
    StageSpec(
        name="executable code",
        description="The final Python implementation.",
        instruction=("Write the complete Python implementation of `{entry_point}` following "
                     "your reasoning, in exactly one ```python fenced block that defines "
                     "`{entry_point}` with the given signature. No explanation, no tests, no "
                     "example usage."),
        focus="adversarial cases: tricky inputs and unexpected combinations that this "
              "particular code is most likely to get wrong",
    ),
)
"""The chain, in order, one entry per stage; the last is the code stage, whose output the
sandbox runs. Adding, removing or reordering a stage is an edit here: every layer derives the
stage ids, their count and the code stage from this table, and ``models.stages`` builds each
stage's prompts from its entry."""

STAGES = tuple(range(1, len(STAGE_TABLE) + 1))
"""Chain stage ids, 1 to the table's length, in chain order."""

CODE_STAGE = STAGES[-1]
"""The stage whose output is the executable Python the sandbox runs."""

ROLES = ("generator", "discriminator")
"""The generator writes the chain; the discriminator writes tests for each stage of it."""
