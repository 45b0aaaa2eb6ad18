"""Render stage messages to a prompt string that fits the model's context window.

Rendering uses the tokenizer's chat template (Qwen's ChatML, the tiny model's copy of it) and
falls back to plain ``System:/User:/Assistant:`` text for tokenizers without one.

When a prompt is longer than ``max_context_tokens`` the drop policy is, in order:

1. replace the oldest earlier-stage texts with an "omitted" marker, one at a time (for the
   discriminator the current stage's text, the one it is testing, is kept);
2. truncate the problem description (its head is kept);
3. truncate the current stage's text (discriminator only; its head is kept);
4. give up with :class:`PromptTooLongError` (the signature and instructions alone do not fit).

Every step taken is recorded in :attr:`Prompt.dropped`, so rollouts can log what a model did not
see.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from configs.names import STAGES
from models.stages import (
    Stage,
    direct_messages,
    discriminator_messages,
    generator_messages,
    get_stage,
)
from problems.model import Problem

TRUNCATION_MARK = " ...[truncated]"


class PromptTooLongError(ValueError):
    """Even with every droppable part dropped the prompt exceeds ``max_context_tokens``."""


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt and what the drop policy removed to make it fit."""

    text: str
    ids: list[int]
    dropped: tuple[str, ...] = ()
    """E.g. ``("stage_1", "description:180->52_tokens")``; empty when nothing was dropped."""

    @property
    def n_tokens(self) -> int:
        return len(self.ids)


def render_messages(tokenizer, messages: Sequence[dict[str, str]]) -> str:
    """Messages -> prompt text ending where the assistant's reply starts."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False,
                                             add_generation_prompt=True)
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(lines) + "\n\nAssistant:"


def encode(tokenizer, text: str) -> list[int]:
    """Token ids of a rendered prompt; the template already holds any special tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _truncate(tokenizer, text: str, n_tokens: int) -> str:
    ids = encode(tokenizer, text)
    return tokenizer.decode(ids[:max(n_tokens, 0)]) + TRUNCATION_MARK


def _fit(tokenizer, build: Callable[[list[str | None], str | None], list[dict[str, str]]],
         texts: Sequence[str], description: str, max_tokens: int, keep_last: bool,
         who: str, stage_ids: Sequence[int] | None = None) -> Prompt:
    """``stage_ids``: the stage id of each of ``texts`` (default 1, 2, ...), for the drop
    labels."""
    labels = list(stage_ids) if stage_ids is not None else list(range(1, len(texts) + 1))
    texts: list[str | None] = list(texts)
    desc: str | None = None
    dropped: list[str] = []

    def render() -> tuple[str, list[int]]:
        text = render_messages(tokenizer, build(texts, desc))
        return text, encode(tokenizer, text)

    text, ids = render()
    # 1. Oldest earlier-stage texts first: later stages summarise and refine earlier ones.
    droppable = len(texts) - 1 if keep_last else len(texts)
    for index in range(droppable):
        if len(ids) <= max_tokens:
            break
        texts[index] = None
        dropped.append(f"stage_{labels[index]}")
        text, ids = render()

    # 2. then the description's tail, 3. then the tail of the text under test. A few rounds
    # because re-tokenising a cut text can merge tokens differently at the seam.
    def shrink(current: str, label: str, assign: Callable[[str], None]) -> None:
        nonlocal text, ids
        original = len(encode(tokenizer, current))
        keep = original
        for _ in range(4):
            if len(ids) <= max_tokens or keep <= 0:
                break
            keep = max(keep - (len(ids) - max_tokens) - len(encode(tokenizer, TRUNCATION_MARK)),
                       0)
            assign(_truncate(tokenizer, current, keep))
            text, ids = render()
        if keep != original:
            dropped.append(f"{label}:{original}->{keep}_tokens")

    def set_desc(value: str) -> None:
        nonlocal desc
        desc = value

    def set_last(value: str) -> None:
        texts[-1] = value

    if len(ids) > max_tokens:
        shrink(description, "description", set_desc)
    if len(ids) > max_tokens and keep_last and texts and texts[-1] is not None:
        shrink(texts[-1], f"stage_{labels[-1]}", set_last)
    if len(ids) > max_tokens:
        raise PromptTooLongError(
            f"{who}: prompt needs {len(ids)} tokens after dropping {dropped}, more than "
            f"model.max_context_tokens={max_tokens}; raise it or shorten the signature")
    return Prompt(text=text, ids=ids, dropped=tuple(dropped))


def generator_prompt(tokenizer, problem: Problem, stage: Stage | int,
                     previous: Sequence[str], max_context_tokens: int,
                     chain: Sequence[int] = STAGES) -> Prompt:
    """The generator's prompt for ``stage``, fitted to ``max_context_tokens`` (``previous``:
    its outputs of the ``chain``'s stages before ``stage``)."""
    stage = stage if isinstance(stage, Stage) else get_stage(stage)
    return _fit(tokenizer,
                lambda texts, desc: generator_messages(problem, stage, texts, description=desc,
                                                       chain=chain),
                previous, problem.description, max_context_tokens, keep_last=False,
                who=f"generator prompt for problem {problem.id!r} stage {stage.id}",
                stage_ids=[s for s in chain if s < stage.id])


def direct_prompt(tokenizer, problem: Problem, max_context_tokens: int) -> Prompt:
    """The single-stage baseline's prompt (:func:`models.stages.direct_messages`): the code
    stage's instruction with no earlier stages, fitted to ``max_context_tokens`` like every
    other prompt. With no chain to drop, only the description can be cut."""
    return _fit(tokenizer, lambda _texts, desc: direct_messages(problem, description=desc),
                [], problem.description, max_context_tokens, keep_last=False,
                who=f"direct prompt for problem {problem.id!r}")


def discriminator_prompt(tokenizer, problem: Problem, stage: Stage | int,
                         chain: Sequence[str], max_context_tokens: int,
                         stages: Sequence[int] = STAGES) -> Prompt:
    """The discriminator's prompt for ``stage`` (``chain`` = the generator's texts of the
    chain ``stages`` up to ``stage``)."""
    stage = stage if isinstance(stage, Stage) else get_stage(stage)
    return _fit(tokenizer,
                lambda texts, desc: discriminator_messages(problem, stage, texts,
                                                           description=desc, stages=stages),
                chain, problem.description, max_context_tokens, keep_last=True,
                who=f"discriminator prompt for problem {problem.id!r} stage {stage.id}",
                stage_ids=[s for s in stages if s <= stage.id])
