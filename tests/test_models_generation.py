"""Batched generation and teacher-forced log-probs agree with each other and with the naive
full-vocabulary computation, values and gradients.

Numerics. Each equality here sets two computations of the same numbers against each other whose
summation orders differ legitimately: KV-cached generation vs teacher forcing, micro-batches
padded to their own width vs one batch, chunks of rows vs the whole vocabulary-sized tensor. In
float32 those orders alone move the tiny model's adapter gradients by up to ~1.6e-4 on entries
of size ~50 and log-probs by up to ~5e-6 (measured over 5 adapters), so any tolerance tight enough
to catch a bug lies within a factor ~2 of the noise, and the side a run lands on depends on the
CPU's kernels and on the random adapter. So the model runs in float64 here: the decoder, every
matmul and every gradient accumulation then agree to ~1e-13 between the paths. What stays
float32 is what ``models/logprobs.py`` and the generation recorder do on purpose: they cast the
logits with ``.float()`` and take ``log_softmax`` in float32, each path in its own reduction
order. The tolerances are derived from that one step (see ``LOGPROB_ATOL``).
"""

from __future__ import annotations

import math

import pytest
import torch

from configs.schema import LoraConfig, ModelConfig, SamplingConfig
from models.generation import draw, generate
from models.logprobs import naive_response_logprobs, response_logprobs
from models.policy import Policies
from models.prompts import discriminator_prompt, generator_prompt
from models.tiny import TinySpec
from problems.model import Problem

PROBLEMS = [
    Problem(id=f"p{i}", description=desc, function_signature=sig, entry_point=ep,
            baseline_tests=(), reference_solution="")
    for i, (desc, sig, ep) in enumerate([
        ("Return the sum of a and b.", "def add(a: int, b: int) -> int:", "add"),
        ("Return s reversed.", "def rev(s: str) -> str:", "rev"),
        ("Return True when n is a prime number and False otherwise; 0 and 1 are not prime.",
         "def is_prime(n: int) -> bool:", "is_prime"),
    ])
]
# Short outputs keep the suite fast on 2 CPU cores; agreement does not depend on length.
SAMPLING = SamplingConfig(max_new_tokens=16, temperature=0.7, batch_size=4, seed=3)

EPS32 = torch.finfo(torch.float32).eps  # 2**-23 = 1.19e-7
SCORE_BOUND = 24.0
"""Bound S on |logit / temperature| and |logsumexp| at the response positions, for the tiny
model with or without the tests' adapter at the temperatures used here (>= 0.7). Checked in
``test_chunked_gradients_and_entropy_equal_naive``; measured over 12 random adapters: at most
17.3."""
LOGPROB_ATOL = 2 * (2 * SCORE_BOUND + math.log2(TinySpec().vocab_size) + 2) * EPS32  # 1.45e-5
"""Two paths that start from the same float64 logits (equal to ~1e-15) differ in a log-prob
``score - logsumexp`` only by float32 rounding. Each path is within (2 S + log2 V + 2) eps32
of the exact value: the score rounded at most twice (cast, division by the temperature: eps32 S
together), logsumexp's cascade sum over V terms (relative error <= (log2 V + 2) eps32, passed on
as an absolute one by the log) and its rounding, and the subtraction's (eps32 S together). Two
paths: twice that. Measured over 12 adapters: at most 1.4e-6."""
ENTROPY_ATOL = (LOGPROB_ATOL / 2 * (1 + SCORE_BOUND)
                + (math.log2(TinySpec().vocab_size) + 2) * EPS32 * SCORE_BOUND)  # 2.2e-4
"""Entropy ``logsumexp - sum(p * score)`` in float32 against float64. An error d in logsumexp
scales every probability by (1 - d) and so moves the entropy by d (1 + sum(p * score)), d <=
LOGPROB_ATOL / 2 (one path's share): at most LOGPROB_ATOL / 2 (1 + S). The cascade sum over V
adds (log2 V + 2) eps32 relative to sum(p * |score|) <= S. Measured over 12 adapters: at most
8e-6."""


def assert_gradients_close(ours, naive) -> None:
    """Gradients of summed log-probs from the two paths. An entry is a sum over tokens and
    vocabulary of ``(onehot - p) * d score / d param``; the Jacobians are float64 and equal in
    both paths, and each probability ``p = exp(score - logsumexp)`` differs by a relative
    <= ``LOGPROB_ATOL`` because its exponent does. So an entry moves by at most
    ``LOGPROB_ATOL`` times the size of its summands, for which the tensor's largest entry
    stands. Hence a tolerance per tensor, not per element: an entry whose summands cancel to
    near zero keeps their absolute error (in float32 that was the failure: entries ~0.8 off by
    5e-5, beyond atol=1e-5 + rtol=1e-4 * 0.8). Measured over 12 adapters: at most 4% of it."""
    for a, b in zip(ours, naive, strict=True):
        scale = b.abs().max().item()
        torch.testing.assert_close(a, b, rtol=0.0, atol=LOGPROB_ATOL * scale)


pytestmark = pytest.mark.usefixtures("one_thread")

@pytest.fixture(scope="module")
def policies(tiny_model_dir) -> Policies:
    policies = Policies.load(ModelConfig(generator=str(tiny_model_dir)), LoraConfig(r=4, alpha=8))
    # float64 (see the module docstring); in place, so trainable_parameters() stays valid
    policies.model_for("generator").double()
    with torch.no_grad():  # a non-zero adapter, so "with adapters" differs from the base
        for p in policies.trainable_parameters("generator"):
            p.add_(0.05 * torch.randn_like(p))
    return policies


@pytest.fixture(scope="module")
def prompts(policies) -> list[list[int]]:
    """Prompts of different lengths (left padding matters) from both roles."""
    tok = policies.tokenizer
    out = [generator_prompt(tok, p, 1, [], 1024).ids for p in PROBLEMS]
    out.append(generator_prompt(tok, PROBLEMS[0], 3, ["add them", "1. add"], 1024).ids)
    out.append(discriminator_prompt(tok, PROBLEMS[1], 1, ["reverse it"], 1024).ids)
    assert len({len(p) for p in out}) > 1
    return out


def run(policies, prompts, sampling=SAMPLING, **kwargs):
    return generate(policies.model_for("generator"), policies.tokenizer, prompts, sampling,
                    **kwargs)


def padded(generations) -> torch.Tensor:
    width = max(len(g.logprobs) for g in generations)
    out = torch.zeros(len(generations), width)
    for row, g in enumerate(generations):
        out[row, :len(g.logprobs)] = torch.tensor(g.logprobs)
    return out


def teacher_forced(policies, generations, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return response_logprobs(
            policies.model_for("generator"), [g.prompt_ids for g in generations],
            [g.response_ids for g in generations], pad_token_id=policies.tokenizer.pad_token_id,
            **kwargs)


def test_generation_is_reproducible_with_a_seed(policies, prompts):
    state = torch.random.get_rng_state()
    first = run(policies, prompts)
    assert torch.equal(torch.random.get_rng_state(), state)  # caller's RNG untouched
    second = run(policies, prompts)
    other = run(policies, prompts, seed=SAMPLING.seed + 1)
    ids = [g.response_ids for g in first.generations]
    assert ids == [g.response_ids for g in second.generations]
    assert [g.text for g in first.generations] == [g.text for g in second.generations]
    assert ids != [g.response_ids for g in other.generations]
    assert len(first.generations) == len(prompts) and len(first.chunk_seconds) == 2
    assert first.new_tokens == sum(len(i) for i in ids) and first.tokens_per_second > 0
    assert all(g.prompt_ids == p for g, p in zip(first.generations, prompts, strict=True))


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 1.0), (1.3, 0.9)])
def test_generation_logprobs_equal_chunked_and_naive(policies, prompts, temperature, top_p):
    sampling = SamplingConfig(max_new_tokens=16, temperature=temperature, top_p=top_p,
                              batch_size=4, seed=5)
    gens = run(policies, prompts, sampling).generations
    # Chunks of 4 rows: several chunks per micro-batch, micro-batches of 2 sequences.
    ours = teacher_forced(policies, gens, temperature=temperature, top_p=top_p,
                          micro_batch_size=2, chunk_tokens=4)
    assert ours.mask.sum().item() == sum(len(g.response_ids) for g in gens)
    assert torch.allclose(ours.logprobs, padded(gens), atol=LOGPROB_ATOL)
    if top_p == 1.0:
        with torch.no_grad():
            naive = naive_response_logprobs(
                policies.model_for("generator"), [g.prompt_ids for g in gens],
                [g.response_ids for g in gens], temperature=temperature,
                pad_token_id=policies.tokenizer.pad_token_id)
        assert torch.allclose(ours.logprobs, naive.logprobs, atol=LOGPROB_ATOL)
    # The wrong temperature gives different numbers: the argument is not ignored.
    wrong = teacher_forced(policies, gens, temperature=temperature * 2, top_p=top_p)
    assert not torch.allclose(wrong.logprobs, ours.logprobs, atol=1e-3)


def test_model_generation_defaults_do_not_change_the_distribution(policies, prompts):
    """Qwen2.5's generation_config.json sets top_k, top_p, temperature and a repetition
    penalty; sampling must use SamplingConfig's distribution only."""
    model = policies.model_for("generator")
    saved = model.generation_config.to_dict()
    base = model.get_base_model()
    try:
        for target in (model, base):
            target.generation_config.update(top_k=5, top_p=0.5, temperature=0.3,
                                            repetition_penalty=1.5, no_repeat_ngram_size=2)
        gens = run(policies, prompts).generations
    finally:
        for target in (model, base):
            target.generation_config.update(**saved)
    ours = teacher_forced(policies, gens, temperature=SAMPLING.temperature)
    assert torch.allclose(ours.logprobs, padded(gens), atol=LOGPROB_ATOL)


def test_draw_follows_the_distribution_and_never_draws_a_zero_probability_token(monkeypatch):
    """The inverse-CDF draw against the distribution it is given: 200k rows of a 6-token
    distribution whose mass sums to 0.99 (a float32 softmax's sum is not exactly 1 either),
    with zero-probability tokens first, inside and last."""
    probs = torch.tensor([0.0, 0.099, 0.0, 0.594, 0.297, 0.0])
    rows = 200_000
    torch.manual_seed(0)
    drawn = draw(probs.repeat(rows, 1))
    counts = torch.bincount(drawn, minlength=6)
    assert counts[probs == 0].sum() == 0
    share = counts.double() / rows
    expected = probs.double() / probs.sum()
    # A share of n draws has standard deviation sqrt(p(1 - p) / n) <= 0.0012 here; six of
    # them leave the mark for a draw that is right at 5 deviations with probability ~3e-6.
    bound = 5 * torch.sqrt(expected * (1 - expected) / rows)
    assert ((share - expected).abs() <= bound).all(), (share, expected)

    # A uniform that lands on the row's total (a uniform just below 1 times the total can
    # round up to it): still a token with mass, never the zero-probability one after it.
    monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.ones(shape, **kw))
    assert draw(probs[None]).tolist() == [4]
    monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.zeros(shape, **kw))
    assert draw(probs[None]).tolist() == [1]

    with pytest.raises(ValueError, match="NaN or infinite"):
        draw(torch.tensor([[0.5, float("nan")]]))


def test_early_stop_at_eos_is_trimmed_and_consistent(policies, prompts):
    base = policies.model_for("generator").get_base_model()
    eos = policies.tokenizer.eos_token_id
    plain_head = base.lm_head
    # A head with a bias on EOS (same tied weight), so rows finish at different steps. A biased
    # head also takes the general (checkpointed) log-prob path instead of the fused one.
    biased = torch.nn.Linear(plain_head.in_features, plain_head.out_features,
                             dtype=plain_head.weight.dtype)
    biased.weight = plain_head.weight
    with torch.no_grad():
        biased.bias.zero_()
        biased.bias[eos] = 6.0
    base.lm_head = biased
    try:
        gens = run(policies, prompts).generations
        ours = teacher_forced(policies, gens, temperature=SAMPLING.temperature, chunk_tokens=3)
    finally:
        base.lm_head = plain_head
    finished = [g for g in gens if g.finished]
    assert finished and any(len(g.response_ids) < SAMPLING.max_new_tokens for g in finished)
    for g in gens:
        assert (g.response_ids[-1] == eos) == g.finished
        assert eos not in g.response_ids[:-1]
        assert "<|im_end|>" not in g.text
    assert torch.allclose(ours.logprobs, padded(gens), atol=LOGPROB_ATOL)


def test_chunked_gradients_and_entropy_equal_naive(policies, prompts):
    from models.logprobs import pack

    gens = run(policies, prompts).generations
    model = policies.model_for("generator")
    params = policies.trainable_parameters("generator")
    args = ([g.prompt_ids for g in gens], [g.response_ids for g in gens])
    pad = policies.tokenizer.pad_token_id

    with torch.no_grad():  # the full distribution: entropy reference and the scores' size
        input_ids, attention, targets, mask, p_len = pack(*args, pad, torch.device("cpu"))
        position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=input_ids, attention_mask=attention,
                       position_ids=position_ids).logits[:, p_len - 1:-1] / 0.7
        full = torch.distributions.Categorical(logits=logits).entropy()
    assert logits.dtype == torch.float64
    size = max(logits[mask].abs().max().item(), logits[mask].logsumexp(-1).abs().max().item())
    assert size <= SCORE_BOUND, f"scores reach {size:.1f} > SCORE_BOUND: re-derive LOGPROB_ATOL"

    naive = naive_response_logprobs(model, *args, temperature=0.7, pad_token_id=pad)
    naive_grad = torch.autograd.grad(naive.logprobs.sum(), params)
    # Without entropy a plain head takes the fused path; with it, the checkpointed one.
    for with_entropy in (False, True):
        ours = response_logprobs(model, *args, temperature=0.7, pad_token_id=pad,
                                 micro_batch_size=3, chunk_tokens=5, with_entropy=with_entropy)
        assert torch.allclose(ours.logprobs, naive.logprobs, atol=LOGPROB_ATOL)
        ours_grad = torch.autograd.grad(ours.logprobs.sum(), params)
        assert_gradients_close(ours_grad, naive_grad)

    # Entropy against the full distribution
    assert torch.allclose(ours.entropy[mask], full[mask].float(), atol=ENTROPY_ATOL)
    assert torch.equal(ours.entropy[~mask], torch.zeros_like(ours.entropy[~mask]))


def test_value_head_reads_the_states_before_each_response_token(policies, prompts):
    """Values are the head applied to the decoder's final hidden state at the position that
    predicts each response token; log-probs are unchanged by asking for them; the value
    gradient reaches both the head and the adapter."""
    from models.ppo import ValueHead

    gens = run(policies, prompts).generations
    model = policies.model_for("generator")
    args = ([g.prompt_ids for g in gens], [g.response_ids for g in gens])
    pad = policies.tokenizer.pad_token_id
    head = ValueHead(model.config.hidden_size)
    torch.nn.init.normal_(head.proj.weight, generator=torch.Generator().manual_seed(0))
    plain = response_logprobs(model, *args, temperature=0.7, pad_token_id=pad)
    out = response_logprobs(model, *args, temperature=0.7, pad_token_id=pad,
                            micro_batch_size=2, with_entropy=True, value_head=head)
    assert plain.values is None and out.values.shape == out.logprobs.shape
    # fused path in one micro-batch vs checkpointed path in micro-batches of their own width
    assert torch.allclose(out.logprobs, plain.logprobs, atol=LOGPROB_ATOL)
    with torch.no_grad():
        from models.logprobs import pack

        input_ids, attention, targets, mask, p_len = pack(*args, pad, torch.device("cpu"))
        position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
        hidden = model(input_ids=input_ids, attention_mask=attention, position_ids=position_ids,
                       output_hidden_states=True).hidden_states[-1][:, p_len - 1:-1]
    # the head is float32 and reads float32 states, as in _micro_batch
    assert torch.allclose(out.values[mask], head(hidden.float())[mask], atol=1e-5)
    assert torch.equal(out.values[~mask], torch.zeros_like(out.values[~mask]))
    lora = policies.trainable_parameters("generator")
    grads = torch.autograd.grad(out.values.sum(), [head.proj.weight, *lora], allow_unused=True)
    assert grads[0].abs().sum() > 0 and any(g is not None and g.abs().sum() > 0
                                            for g in grads[1:])


def test_reference_logprobs_differ_from_the_adapted_policy(policies, prompts):
    gens = run(policies, prompts[:2]).generations
    adapted = teacher_forced(policies, gens, temperature=0.7)
    with policies.reference("generator") as ref, torch.no_grad():
        reference = response_logprobs(ref, [g.prompt_ids for g in gens],
                                      [g.response_ids for g in gens], temperature=0.7,
                                      pad_token_id=policies.tokenizer.pad_token_id)
    assert not torch.allclose(adapted.logprobs, reference.logprobs, atol=1e-4)


def test_bad_arguments_are_rejected(policies):
    model = policies.model_for("generator")
    with pytest.raises(ValueError, match="temperature"):
        response_logprobs(model, [[1]], [[2]], temperature=0.0, pad_token_id=0)
    with pytest.raises(ValueError, match="at least one token"):
        response_logprobs(model, [[]], [[2]], temperature=1.0, pad_token_id=0)
    empty = response_logprobs(model, [[1, 2]], [[]], temperature=1.0, pad_token_id=0)
    assert empty.logprobs.shape == (1, 0) and empty.mask.shape == (1, 0)


def test_fused_path_matches_autograd_with_top_p_and_head_gradients(tiny_model_dir, prompts):
    """Full fine-tuning (the head's weight takes a gradient) and a top-p nucleus: the fused
    backward agrees with plain autograd through the checkpointed path."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    responses = [torch.randint(3, 500, (n,), generator=gen).tolist() for n in (5, 9, 1, 7, 4)]
    results = []
    for with_entropy in (False, True):  # fused, then checkpointed autograd
        out = response_logprobs(model, prompts, responses, temperature=0.8, top_p=0.97,
                                pad_token_id=0, chunk_tokens=6, with_entropy=with_entropy)
        finite = out.logprobs.isfinite()  # random targets may fall outside the nucleus
        assert finite[out.mask].any()
        loss = out.logprobs[finite & out.mask].sum()
        results.append((out.logprobs, torch.autograd.grad(loss, list(model.parameters()))))
    (lp_a, grads_a), (lp_b, grads_b) = results
    assert torch.equal(lp_a.isfinite(), lp_b.isfinite())
    assert torch.allclose(lp_a[lp_a.isfinite()], lp_b[lp_b.isfinite()], atol=LOGPROB_ATOL)
    assert_gradients_close(grads_a, grads_b)


def test_packed_batch_micro_batches_match_response_logprobs(policies, prompts):
    """The tensor form PPO slices into micro-batches gives the same numbers."""
    from models.logprobs import packed_batch, packed_logprobs

    gens = run(policies, prompts).generations
    model = policies.model_for("generator")
    args = ([g.prompt_ids for g in gens], [g.response_ids for g in gens])
    pad = policies.tokenizer.pad_token_id
    whole = response_logprobs(model, *args, temperature=0.7, pad_token_id=pad)
    batch = packed_batch(*args, pad)
    parts = []
    for mb in batch.micro_batches(2):  # row slices, as models.ppo.ppo_update makes them
        parts.append(packed_logprobs(model, mb, temperature=0.7).logprobs)
    assert torch.equal(batch.loss_mask > 0, whole.mask)
    assert torch.allclose(torch.cat(parts), whole.logprobs, atol=LOGPROB_ATOL)


def adapted_model(tiny_model_dir, dtype: torch.dtype) -> tuple[Policies, torch.nn.Module]:
    """Fresh policies whose generator adapter is non-zero, and that model in ``dtype``."""
    model_policies = Policies.load(ModelConfig(generator=str(tiny_model_dir)),
                                   LoraConfig(r=4, alpha=8))
    model = model_policies.model_for("generator").to(dtype)
    with torch.no_grad():
        for p in model_policies.trainable_parameters("generator"):
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0),
                                      dtype=p.dtype))
    return model_policies, model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_shared_prefill_samples_exactly_what_one_prefill_per_row_samples(tiny_model_dir,
                                                                          prompts, dtype):
    """A problem's samples share one prefill of their prompt (``share_prefill``, the default):
    the same tokens and the same log-probs, bit for bit, as prefilling every row, in the
    dtype runs use (float32) too. Groups of three in chunks of eight, so a group is split by a
    chunk boundary and chunks hold prompts of different lengths (left padding)."""
    from dataclasses import replace

    model_policies, model = adapted_model(tiny_model_dir, dtype)
    rows = [p for p in prompts for _ in range(3)]
    prefilled: list[int] = []  # rows of each forward pass over more than one position
    model.register_forward_pre_hook(
        lambda _, args, kwargs: prefilled.append(kwargs["input_ids"].shape[0])
        if kwargs["input_ids"].shape[1] > 1 else None, with_kwargs=True)
    distinct = sum(len({tuple(p) for p in rows[i:i + 8]}) for i in range(0, len(rows), 8))
    for temperature in (0.5, 1.0):
        sampling = replace(SAMPLING, temperature=temperature, batch_size=8)
        prefilled.clear()
        shared = generate(model, model_policies.tokenizer, rows, sampling).generations
        assert sum(prefilled) == distinct < len(rows)
        prefilled.clear()
        each = generate(model, model_policies.tokenizer, rows, sampling,
                        share_prefill=False).generations
        assert sum(prefilled) == len(rows)
        assert [g.response_ids for g in shared] == [g.response_ids for g in each]
        assert [g.logprobs for g in shared] == [g.logprobs for g in each]
        # the rows of a group share the prompt's numbers, not the draw
        assert len({tuple(g.response_ids) for g in shared}) > len(prompts)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_reserved_cache_samples_exactly_what_concatenating_samples(tiny_model_dir, prompts,
                                                                    dtype, monkeypatch):
    """The KV cache reserved up front for the response (``models.generation.reserve``, always
    on) against transformers' own layer, which concatenates at every token: the same tokens
    and log-probs bit for bit, with prompts of different lengths (left padding) and the
    shared prefill's copied rows."""
    from dataclasses import replace

    import models.generation as generation

    model_policies, model = adapted_model(tiny_model_dir, dtype)
    rows = [p for p in prompts for _ in range(2)]
    sampling = replace(SAMPLING, batch_size=8, max_new_tokens=24)
    reserved = generate(model, model_policies.tokenizer, rows, sampling).generations
    monkeypatch.setattr(generation, "reserve", lambda cache, extra: cache)
    concatenated = generate(model, model_policies.tokenizer, rows, sampling).generations
    assert [g.response_ids for g in reserved] == [g.response_ids for g in concatenated]
    assert [g.logprobs for g in reserved] == [g.logprobs for g in concatenated]
    assert {len(g.response_ids) for g in reserved} == {24}  # the reserved room, filled
    # What would rebind a layer away from its buffer is refused, not done wrongly.
    layer = generation._reserved_layer()(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4), 3)
    for call in (lambda: layer.reorder_cache(torch.tensor([0])), lambda: layer.crop(-1)):
        with pytest.raises(NotImplementedError, match="only appends"):
            call()
