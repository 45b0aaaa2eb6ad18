"""Stage definitions, stage prompts, and the context-length drop policy."""

from __future__ import annotations

import pytest

from models.prompts import (
    PromptTooLongError,
    direct_prompt,
    discriminator_prompt,
    generator_prompt,
    render_messages,
)
from models.stages import (
    critique_messages,
    direct_messages,
    discriminator_messages,
    generator_messages,
    get_all_stages,
    get_stage,
)
from problems.model import Problem

PROBLEM = Problem(
    id="add", description="Return the sum of two integers a and b.",
    function_signature="def add(a: int, b: int) -> int:", entry_point="add",
    baseline_tests=("assert add(1, 2) == 3",),
    reference_solution="def add(a, b):\n    return a + b\n")


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from models.policy import load_tokenizer

    return load_tokenizer(str(tiny_model_dir))


def test_stages_in_order_with_focus():
    stages = get_all_stages()
    assert [s.id for s in stages] == [1, 2, 3, 4, 5]
    focus = [s.discriminator_focus.split(":")[0] for s in stages]
    assert focus == ["basic cases", "edge cases", "algorithmic corner cases",
                     "constraints and stress", "adversarial cases"]
    assert get_stage(3) is stages[2]


@pytest.mark.parametrize("bad", [0, 6, -1, "2", 2.0, True, None])
def test_get_stage_rejects_bad_ids(bad):
    with pytest.raises(ValueError, match="must be an integer from 1 to 5"):
        get_stage(bad)


def test_generator_messages_hold_problem_signature_and_previous_stages():
    previous = ["think informally", "1. steps", "for x in y", "O(n)"]
    messages = generator_messages(PROBLEM, 5, previous)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert PROBLEM.description in user and PROBLEM.function_signature in user
    assert all(text in user for text in previous)
    assert user.index("think informally") < user.index("O(n)")
    assert "```python" in user and "fenced block" in user and "`add`" in user
    assert "previous" not in generator_messages(PROBLEM, 1, [])[1]["content"].lower()
    with pytest.raises(ValueError, match="needs the outputs of 2"):
        generator_messages(PROBLEM, 3, ["only one"])


def test_direct_messages_are_the_code_stage_without_a_chain():
    messages = direct_messages(PROBLEM)
    assert messages[0] == generator_messages(PROBLEM, 1, [])[0]  # the generator's system text
    user = messages[1]["content"]
    assert PROBLEM.function_signature in user and "fenced block" in user
    assert "reasoning so far" not in user.lower()
    assert user.endswith(get_stage(5).generator_prompt_template.format(entry_point="add"))


def test_a_shorter_chain_shows_only_its_own_stages():
    messages = generator_messages(PROBLEM, 5, ["plan", "steps"], chain=(2, 4, 5))
    user = messages[1]["content"]
    assert "### Stage 2: structured reasoning\nplan" in user
    assert "### Stage 4: constraints and invariants\nsteps" in user
    assert "Stage 1:" not in user and "Stage 3:" not in user
    # the code stage of a code-only chain is exactly what a model asked for code directly sees
    assert generator_messages(PROBLEM, 5, [], chain=(5,)) == direct_messages(PROBLEM)
    tests = discriminator_messages(PROBLEM, 3, ["idea", "pseudo"], stages=(1, 3, 5))
    assert "### Stage 3: pseudocode\npseudo" in tests[1]["content"]
    with pytest.raises(ValueError, match=r"needs the outputs of 1 stage output\(s\), of "
                                         r"stages \[1\], got 2"):
        generator_messages(PROBLEM, 3, ["a", "b"], chain=(1, 3, 5))
    with pytest.raises(ValueError, match="not one of the chain's stages"):
        generator_messages(PROBLEM, 2, ["a"], chain=(1, 3, 5))


def test_discriminator_messages_ask_for_asserts_with_the_stage_focus():
    messages = discriminator_messages(PROBLEM, 2, ["informal", "structured"])
    user = messages[1]["content"]
    assert "assert add(" in user and "edge cases" in user and "structured" in user
    with pytest.raises(ValueError, match=r"tests read the generator's 2 stage output\(s\), "
                                         r"of stages \[1, 2\], got 1"):
        discriminator_messages(PROBLEM, 2, ["informal"])
    assert "VERDICT" in critique_messages(PROBLEM, "def add(a, b): return 0")[1]["content"]


def test_render_uses_chat_template_and_falls_back_to_plain_text(tokenizer):
    messages = generator_messages(PROBLEM, 1, [])
    text = render_messages(tokenizer, messages)
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")

    class NoTemplate:
        chat_template = None

    plain = render_messages(NoTemplate(), messages)
    assert plain.startswith("System: ") and plain.endswith("Assistant:")


def test_prompt_that_fits_drops_nothing(tokenizer):
    prompt = generator_prompt(tokenizer, PROBLEM, 3, ["a", "b"], max_context_tokens=2048)
    assert prompt.dropped == () and prompt.n_tokens == len(prompt.ids) <= 2048
    assert prompt.ids == tokenizer(prompt.text, add_special_tokens=False)["input_ids"]


def test_drop_policy_drops_oldest_stages_first(tokenizer):
    previous = [f"stage {i} " + "reasoning words " * 60 for i in (1, 2, 3, 4)]
    # Exactly the room for stages 3 and 4 with 1 and 2 omitted.
    limit = len(tokenizer(render_messages(tokenizer, generator_messages(
        PROBLEM, 5, [None, None, *previous[2:]])))["input_ids"])
    prompt = generator_prompt(tokenizer, PROBLEM, 5, previous, limit)
    assert prompt.dropped == ("stage_1", "stage_2")
    assert prompt.n_tokens <= limit
    assert "stage 1 reasoning" not in prompt.text and "stage 4 reasoning" in prompt.text
    assert prompt.text.count("[omitted to fit the context window]") == 2


def test_drop_policy_then_truncates_the_description(tokenizer):
    long_problem = Problem(**{**PROBLEM.__dict__, "description": "Add a and b. " * 200})
    short = generator_prompt(tokenizer, PROBLEM, 2, ["x " * 100], 4096)
    prompt = generator_prompt(tokenizer, long_problem, 2, ["x " * 100], short.n_tokens + 40)
    assert prompt.dropped[0] == "stage_1"
    assert prompt.dropped[1].startswith("description:") and prompt.n_tokens <= short.n_tokens + 40
    assert "...[truncated]" in prompt.text and PROBLEM.function_signature in prompt.text


def test_discriminator_keeps_the_stage_under_test_longest(tokenizer):
    chain = ["old " * 150, "code under test " * 150]
    full = discriminator_prompt(tokenizer, PROBLEM, 2, chain, 4096)
    prompt = discriminator_prompt(tokenizer, PROBLEM, 2, chain, full.n_tokens - 100)
    assert prompt.dropped == ("stage_1",) and "code under test" in prompt.text
    limit = len(tokenizer(render_messages(tokenizer, discriminator_messages(
        PROBLEM, 2, [None, "code under test " * 20])))["input_ids"])
    tight = discriminator_prompt(tokenizer, PROBLEM, 2, chain, limit)
    assert tight.dropped[0] == "stage_1" and tight.dropped[1].startswith("description:")
    assert tight.dropped[2].startswith("stage_2:") and tight.n_tokens <= limit
    assert "code under test" in tight.text


def test_prompt_too_long_is_a_clear_error(tokenizer):
    with pytest.raises(PromptTooLongError, match="max_context_tokens=64"):
        generator_prompt(tokenizer, PROBLEM, 1, [], 64)
    with pytest.raises(PromptTooLongError, match="direct prompt for problem 'add'"):
        direct_prompt(tokenizer, PROBLEM, 64)


def test_direct_prompt_fits_by_cutting_only_the_description(tokenizer):
    long_problem = Problem(**{**PROBLEM.__dict__, "description": "Add a and b. " * 200})
    short = direct_prompt(tokenizer, PROBLEM, 4096)
    assert short.dropped == () and "Stage 5 of 5" in short.text
    prompt = direct_prompt(tokenizer, long_problem, short.n_tokens + 40)
    assert len(prompt.dropped) == 1 and prompt.dropped[0].startswith("description:")
    assert prompt.n_tokens <= short.n_tokens + 40 and PROBLEM.function_signature in prompt.text
