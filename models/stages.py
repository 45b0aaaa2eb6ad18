"""The chain's stages and the chat messages both roles see at each of them.

Each stage is one entry of ``configs.names.STAGE_TABLE``; this module turns an entry into that
stage's prompts. With the shipped table the generator writes, per problem, informal
reasoning, structured reasoning, pseudocode, constraints and invariants, then executable
Python (the last stage is always the code); at every stage the discriminator reads the chain
so far and writes unit tests with that stage's focus (basic, edge, algorithmic corner,
constraint/stress, adversarial cases). Tests accumulate across stages into one suite.

This module builds *messages* (a list of ``{"role", "content"}`` dicts); turning them into a
prompt string that fits ``max_context_tokens`` is :mod:`models.prompts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from configs.names import CODE_STAGE, STAGE_TABLE, STAGES, StageSpec
from problems.model import Problem

GENERATOR_SYSTEM = (
    "You are an expert Python programmer. You solve problems step by step, one reasoning stage "
    "at a time, and write only what the current stage asks for."
)
DISCRIMINATOR_SYSTEM = (
    "You are an expert software tester. You write unit tests that expose bugs in solutions to "
    "programming problems. Every test must be correct for a correct solution."
)


@dataclass(frozen=True)
class Stage:
    """One reasoning stage: what the generator writes and what the discriminator tests."""

    id: int
    name: str
    description: str
    generator_prompt_template: str
    """Instruction for the generator; ``{entry_point}`` is filled in."""
    discriminator_prompt_template: str
    """Instruction for the discriminator; ``{entry_point}`` and ``{focus}`` are filled in."""
    discriminator_focus: str
    """The kind of test this stage's discriminator writes (one line)."""
    names_edge_cases: bool = False
    """Whether the generator's text at this stage names edge cases (``StageSpec``)."""

    @property
    def is_code(self) -> bool:
        return self.id == CODE_STAGE


N_STAGES = len(STAGES)  # "Stage k of N" in every prompt

_TEST_FORMAT = (
    "Write between 3 and 8 tests as plain `assert` statements that call `{entry_point}` "
    "directly, one per line, inside one ```python fenced block, for example:\n"
    "```python\nassert {entry_point}(...) == ...\n```\n"
    "Do not define `{entry_point}` yourself and do not print anything."
)

_DISCRIMINATOR_TEMPLATE = (
    f"Stage {{stage_id}} of {N_STAGES}: {{stage_name}}. Focus on {{focus}}.\n" + _TEST_FORMAT
)


def _stage(stage_id: int, spec: StageSpec) -> Stage:
    """The stage with id ``stage_id`` declared by ``spec``: its prompts open with
    ``Stage k of N: <name>.``, then the generator's instruction or the discriminator's focus."""
    return Stage(
        id=stage_id, name=spec.name, description=spec.description,
        generator_prompt_template=f"Stage {stage_id} of {N_STAGES}: {spec.name}. "
                                  + spec.instruction,
        discriminator_prompt_template=_DISCRIMINATOR_TEMPLATE,
        discriminator_focus=spec.focus, names_edge_cases=spec.names_edge_cases)


_STAGES = tuple(_stage(i, spec) for i, spec in zip(STAGES, STAGE_TABLE, strict=True))


@dataclass(frozen=True)
class StopRule:
    """Where an output has done its stage's work (``sampling.stop_early``): at any of
    ``strings``, or with ``after_fence`` once a fenced block has been opened and closed."""

    strings: tuple[str, ...] = ()
    after_fence: bool = False

    def hit(self, text: str) -> bool:
        """Whether ``text`` (an output so far) has reached its end.

        >>> rule = StopRule(after_fence=True)
        >>> [rule.hit(t) for t in ("```python\ndef f(): pass\n", "```python\nx = 1\n```")]
        [False, True]
        >>> StopRule(strings=("### Stage",)).hit("two sums.\n### Stage 2")
        True
        """
        if any(s in text for s in self.strings):
            return True
        if self.after_fence:
            opening = text.find("```")
            body = text.find("\n", opening) if opening >= 0 else -1
            return body >= 0 and "```" in text[body:]
        return False


# A reasoning stage that writes the next stage's heading has moved on to work it was not asked for.
_NEXT_STAGE = ("### Stage", "\nStage ")


def stop_rule(role: str, stage: int) -> StopRule:
    """Where ``role``'s output at chain ``stage`` ends: the tests and the code after their
    fenced block, a reasoning stage at the next stage's heading."""
    if role == "discriminator" or get_stage(stage).is_code:
        return StopRule(strings=_NEXT_STAGE, after_fence=True)
    return StopRule(strings=_NEXT_STAGE)


def get_stage(stage_id: int) -> Stage:
    """The stage with id ``stage_id`` (one of ``STAGES``); anything else raises ``ValueError``."""
    if isinstance(stage_id, bool) or not isinstance(stage_id, int) or stage_id not in STAGES:
        raise ValueError(f"stage_id={stage_id!r}: must be an integer from {STAGES[0]} to "
                         f"{STAGES[-1]}")
    return _STAGES[stage_id - 1]


def get_all_stages() -> list[Stage]:
    """Every stage, in order."""
    return list(_STAGES)


def _problem_block(problem: Problem, description: str | None = None) -> str:
    desc = problem.description if description is None else description
    return (f"Problem:\n{desc.strip()}\n\n"
            f"Function signature:\n```python\n{problem.function_signature.strip()}\n```")


def _chain_block(title: str, texts: Sequence[str | None], ids: Sequence[int]) -> str:
    """Earlier stage outputs, labelled by stage id; ``None`` entries were dropped for length."""
    parts = []
    for stage_id, text in zip(ids, texts, strict=True):
        stage = get_stage(stage_id)
        body = ("[omitted to fit the context window]" if text is None else text.strip())
        parts.append(f"### Stage {stage.id}: {stage.name}\n{body}")
    return f"{title}\n\n" + "\n\n".join(parts) if parts else ""


def _shown(chain: Sequence[int], stage: Stage, texts: Sequence[str | None], upto: bool,
           who: str) -> tuple[int, ...]:
    """The ids of ``chain``'s stages before ``stage`` (``upto``: and ``stage`` itself), checked
    against the number of ``texts`` given for them."""
    if stage.id not in chain:
        raise ValueError(f"stage {stage.id} is not one of the chain's stages {list(chain)}")
    ids = tuple(s for s in chain if s < stage.id or (upto and s == stage.id))
    if len(texts) != len(ids):
        raise ValueError(f"stage {stage.id} {who} {len(ids)} stage output(s), of stages "
                         f"{list(ids)}, got {len(texts)}")
    return ids


def generator_messages(problem: Problem, stage: Stage | int, previous: Sequence[str | None],
                       *, description: str | None = None,
                       chain: Sequence[int] = STAGES) -> list[dict[str, str]]:
    """Chat messages asking the generator for ``stage`` given its ``previous`` stage outputs.

    ``previous`` holds the generator's own outputs of the ``chain``'s stages before ``stage``
    (``configs.ChainConfig.stages``; all of them by default) in order; an entry of ``None``
    renders as omitted (the context-length policy uses it). ``description`` overrides the
    problem text (the policy passes a truncated one). The code stage of a code-only chain
    (``chain=(CODE_STAGE,)``) is :func:`direct_messages`.
    """
    stage = stage if isinstance(stage, Stage) else get_stage(stage)
    ids = _shown(chain, stage, previous, upto=False, who="needs the outputs of")
    return _generator_messages(problem, stage, previous, ids, description)


def direct_messages(problem: Problem, *, description: str | None = None
                    ) -> list[dict[str, str]]:
    """Chat messages of the single-stage baseline: the code stage's instruction with no
    earlier stages, i.e. what a model asked for code directly sees. Evaluation compares the
    chain against it."""
    return _generator_messages(problem, get_stage(CODE_STAGE), [], (), description)


def _generator_messages(problem: Problem, stage: Stage, previous: Sequence[str | None],
                        ids: Sequence[int], description: str | None) -> list[dict[str, str]]:
    parts = [_problem_block(problem, description)]
    chain = _chain_block("Your reasoning so far:", previous, ids)
    if chain:
        parts.append(chain)
    parts.append(stage.generator_prompt_template.format(entry_point=problem.entry_point))
    return [{"role": "system", "content": GENERATOR_SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)}]


def discriminator_messages(problem: Problem, stage: Stage | int, chain: Sequence[str | None],
                           *, description: str | None = None,
                           stages: Sequence[int] = STAGES) -> list[dict[str, str]]:
    """Chat messages asking the discriminator for ``stage``'s tests.

    ``chain`` holds the generator's outputs of the run's chain ``stages`` up to ``stage`` (the
    current one last), so the discriminator tests what the generator has committed to so far.
    """
    stage = stage if isinstance(stage, Stage) else get_stage(stage)
    ids = _shown(stages, stage, chain, upto=True, who="tests read the generator's")
    parts = [_problem_block(problem, description)]
    block = _chain_block("The solver's work so far:", chain, ids)
    if block:
        parts.append(block)
    parts.append(stage.discriminator_prompt_template.format(
        stage_id=stage.id, stage_name=stage.name, focus=stage.discriminator_focus,
        entry_point=problem.entry_point))
    return [{"role": "system", "content": DISCRIMINATOR_SYSTEM},
            {"role": "user", "content": "\n\n".join(parts)}]


def critique_messages(problem: Problem, code: str) -> list[dict[str, str]]:
    """Optional textual critique: ask the discriminator to judge code in words. The reply ends
    with ``VERDICT: correct`` or ``VERDICT: incorrect``, which
    :func:`models.parsing.parse_critique` reads."""
    return [
        {"role": "system", "content": DISCRIMINATOR_SYSTEM},
        {"role": "user", "content": (
            f"{_problem_block(problem)}\n\nCandidate solution:\n```python\n{code.strip()}\n```\n\n"
            "List the bugs you find, one per line starting with '- '. End with one line "
            "'VERDICT: correct' or 'VERDICT: incorrect'.")},
    ]
