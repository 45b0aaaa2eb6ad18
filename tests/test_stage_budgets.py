"""Per-stage token budgets and stop rules (``sampling.stage_max_new_tokens``,
``sampling.test_max_new_tokens``, ``sampling.stop_early``): each output gets its stage's
budget, a stop rule ends a response with the token that completes its stop text and changes
none of the tokens before it, and bad budgets are refused by key."""

from __future__ import annotations

import pytest

from configs.errors import ConfigError
from configs.schema import LoraConfig, ModelConfig, SamplingConfig
from models.generation import generate, stop_length
from models.policy import Policies
from models.prompts import generator_prompt
from models.stages import StopRule, stop_rule
from pipeline.chains import sample_stage
from problems.model import Problem

PROBLEM = Problem(id="p", description="Add two numbers.", function_signature="def add(a, b):",
                  entry_point="add", reference_solution="def add(a, b):\n    return a + b\n",
                  baseline_tests=["assert add(1, 2) == 3"])


def test_each_role_and_stage_gets_its_budget():
    s = SamplingConfig(max_new_tokens=200, stage_max_new_tokens={1: 40, 5: 200},
                       test_max_new_tokens=90)
    assert [s.budget("generator", k) for k in (1, 2, 5)] == [40, 200, 200]
    assert {s.budget("discriminator", k) for k in (1, 2, 3, 4, 5)} == {90}
    plain = SamplingConfig(max_new_tokens=50)
    assert {plain.budget(r, k) for r in ("generator", "discriminator") for k in (1, 5)} == {50}


@pytest.mark.parametrize("kwargs, message", [
    ({"stage_max_new_tokens": {7: 10}}, "stage_max_new_tokens=7: is not a chain stage"),
    ({"stage_max_new_tokens": {2: 0}}, r"stage_max_new_tokens.2=0: must be in \[1"),
    ({"stage_max_new_tokens": {2: 101}}, r"stage_max_new_tokens.2=101"),
    ({"test_max_new_tokens": 500}, "test_max_new_tokens=500"),
])
def test_a_budget_outside_the_cap_is_refused_by_key(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SamplingConfig(max_new_tokens=100, **kwargs)


@pytest.mark.parametrize("text, role, stage, ends", [
    ("Use a loop over the list.", "generator", 1, False),
    ("Use a loop.\n### Stage 2: structured", "generator", 1, True),
    ("Sum it.\nStage 3 of 5: pseudocode", "generator", 2, True),
    ("```\nfor x in xs: total += x\n", "generator", 3, False),
    ("```python\ndef add(a, b):\n    return a + b\n", "generator", 5, False),
    ("```python\ndef add(a, b):\n    return a + b\n```", "generator", 5, True),
    ("Here:\n```python\nassert add(1, 2) == 3\n```\nMore", "discriminator", 1, True),
    ("```python\nassert add(1, 2) == 3\n", "discriminator", 4, False),
])
def test_the_stop_rule_ends_where_the_stage_work_ends(text, role, stage, ends):
    assert stop_rule(role, stage).hit(text) is ends


@pytest.fixture(scope="module")
def policies(tiny_model_dir, one_thread):
    return Policies.load(ModelConfig(generator=str(tiny_model_dir)), LoraConfig(r=4, alpha=8))


def test_a_stopped_response_is_the_unstopped_one_cut_at_its_stop_text(policies):
    tok = policies.tokenizer
    prompt = generator_prompt(tok, PROBLEM, 1, [], 512).ids
    sampling = SamplingConfig(max_new_tokens=40, temperature=1.0, batch_size=4)
    prompts = [prompt] * 4
    free = generate(policies.model_for("generator"), tok, prompts, sampling, seed=3)
    # a stop text the random model writes early: the most common character of its outputs
    text = "".join(g.text for g in free.generations)
    common = max(set(text) - {" "}, key=text.count)
    rule = StopRule(strings=(common,))
    cut = generate(policies.model_for("generator"), tok, prompts, sampling, seed=3, stop=rule)
    stopped = 0
    for a, b in zip(free.generations, cut.generations, strict=True):
        assert a.response_ids[:len(b.response_ids)] == b.response_ids
        assert a.logprobs[:len(b.logprobs)] == b.logprobs
        length = stop_length(tok, a.response_ids, rule)
        if length is not None:
            stopped += 1
            assert len(b.response_ids) == length and b.finished and rule.hit(b.text)
            assert not rule.hit(tok.decode(b.response_ids[:-1], skip_special_tokens=True))
        else:
            assert b.response_ids == a.response_ids and b.finished == a.finished
    assert stopped > 0 and cut.new_tokens < free.new_tokens


class Recorder:
    """A sampler that records the budget and the stop rule each call gets."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def tokenizer_for(self, role):
        return self.inner.tokenizer_for(role)

    def adapter_version(self, role):
        return self.inner.adapter_version(role)

    def sample(self, role, prompts, sampling, seed, *, stop=None):
        self.calls.append((role, sampling.max_new_tokens, stop))
        return self.inner.sample(role, prompts, sampling, seed, stop=stop)


@pytest.mark.parametrize("stop_early", [True, False])
def test_a_chain_stage_samples_with_its_roles_budget_and_rule(policies, stop_early):
    sampler = Recorder(policies)
    sampling = SamplingConfig(max_new_tokens=12, stage_max_new_tokens={2: 5},
                              test_max_new_tokens=7, stop_early=stop_early, batch_size=4)
    samples = [(PROBLEM, 0), (PROBLEM, 1)]
    texts = {}
    for stage in (1, 2):
        rows, _ = sample_stage(sampler, "generator", samples, stage, texts, sampling=sampling,
                               max_context_tokens=512, seed=stage)
        for r in rows:
            texts.setdefault((r["problem_id"], r["sample_idx"]), []).append(r["output_text"])
            assert r["output_tokens"] <= sampling.budget("generator", stage)
        sample_stage(sampler, "discriminator", samples, stage, texts, sampling=sampling,
                     max_context_tokens=512, seed=10 + stage)
    rules = [stop_rule(r, k) if stop_early else None
             for k in (1, 2) for r in ("generator", "discriminator")]
    assert sampler.calls == [(r, b, rule) for (r, b), rule in zip(
        [("generator", 12), ("discriminator", 7), ("generator", 5), ("discriminator", 7)],
        rules, strict=True)]
