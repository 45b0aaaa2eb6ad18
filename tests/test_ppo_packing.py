"""``pipeline/update.py``'s PPO batch, packed once, against the list round-trip it replaced,
on the tiny model in float64 (a few seconds): the same log-probs, entropies, values, statistics
and gradients, within tolerances derived below."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import pytest
import torch
from torch import nn

from configs.schema import PPOConfig
from models.ppo import ValueHead, group_advantages, ppo_update
from models.ppobatch import PackedBatch

# --- the update on the tiny model: the batch packed once vs the list round-trip it replaced ---
# tasks/update.py used to turn each micro-batch's rows back into token lists and pack them again
# to the micro-batch's own widths (``models.logprobs.pack`` and ``_micro_batch``, as
# ``response_logprobs`` did), and took the reference log-probs in one pass over the whole batch
# with entropy. Now the batch is packed once (``build_batch``) and every pass reads a row slice
# (``logprob_fn``), the reference pass in micro-batches without entropy (``reference_logprobs``).
#
# Numerics. As in tests/test_models_generation.py the model runs in float64: both paths' decoders
# then agree to ~1e-13 whatever their padding widths and batch shapes, and what can differ is the
# float32 rounding of the steps models/logprobs.py takes in float32 on purpose (logits cast,
# divided by the temperature, logsumexp over V; the value head on float32 states). Each bound
# below is derived from those steps and the batch's own magnitudes (eps = float32 eps = 2**-23,
# u = eps / 2 its unit roundoff):
#   log-prob  L = 2 (2 S + log2 V + 2) eps, S bounding |score| and |logsumexp| at the response
#             positions: per path the score is rounded twice and the subtraction once (eps S
#             together) and the cascade logsumexp over V terms is off by (log2 V + 2) eps; two
#             paths, twice that (the derivation of test_models_generation's LOGPROB_ATOL).
#   entropy   E = L (1 + S) + 2 (log2 V + 2) eps S: an error d in logsumexp moves the entropy by
#             d (1 + sum p |score|) <= (L / 2)(1 + S) per path, the sum over V adds its own.
#   value     (H + 2) eps (sqrt(H) sum_i |w_i g_i| + |b|): the final RMSNorm's output is
#             h_i = g_i x_i / rms(x), |x_i / rms(x)| <= sqrt(H); the two casts to float32 differ
#             by <= eps |h_i|, each path's float32 dot product of H terms plus bias is off by
#             <= (H + 1) u sum |w_i h_i|.
# A PPO statistic is a token mean of f(log-prob, reference, entropy): it moves by
# K L (+ E for the entropy) with K a bound on f's slope over the batch's values, plus the float32
# rounding of the mean itself, <= 2 (n + 1) u max|f| = (n + 1) eps max|f| between two paths
# (n: the micro-batch's b x T elements summed).
# Adam is not compared: its first step is lr g / (|g| + 1e-8), which turns a rounding-level
# difference in a near-zero gradient entry into a step of up to lr, so no rounding tolerance
# exists for it. One SGD step (no clipping) moves the adapter by -lr g exactly, and the optimizer
# code is the same on both paths, so equal SGD steps are equal gradients: equal updates.
TEMPERATURE = 0.7
EPS32 = torch.finfo(torch.float32).eps
PROMPT_LENGTHS, RESPONSE_LENGTHS = (5, 12, 3, 9, 7, 4), (6, 2, 9, 0, 4, 7)


@dataclass(frozen=True)
class IndexedBatch(PackedBatch):
    """A packed batch that knows its rows' indices (sliced with them), for the old path."""

    row_index: torch.Tensor | None = None


def indexed(batch: PackedBatch) -> IndexedBatch:
    return IndexedBatch(**{f.name: getattr(batch, f.name) for f in fields(batch)},
                        row_index=torch.arange(batch.loss_mask.shape[0]))


def old_logprob_fn(model, prompts, responses, width, pad, value_head=None):
    """``pipeline.update.logprob_fn`` before this change: the micro-batch's rows (``row_index``)
    back to token lists, packed again to their own widths, padded back to ``width``."""
    from models.logprobs import _micro_batch, pack

    def fn(mb):
        rows = mb.row_index.tolist()
        ps, rs = [prompts[r] for r in rows], [responses[r] for r in rows]
        t = max(len(r) for r in rs)
        stats = torch.zeros((len(rows), 0, 2 + (value_head is not None)))
        if t:
            input_ids, attention, targets, mask, p_len = pack(ps, rs, pad, torch.device("cpu"))
            stats = _micro_batch(model, input_ids, attention, targets, p_len, TEMPERATURE, 1.0,
                                 True, 256, value_head).masked_fill(~mask[..., None], 0.0)
        stats = nn.functional.pad(stats, (0, 0, 0, width - t))
        return stats[..., 0], stats[..., 1], stats[..., 2] if value_head is not None else None
    return fn


def test_packed_batch_layout_and_row_slices_cut_to_what_packing_them_alone_gives():
    """Left-padded prompts, right-padded responses, position ids counting real tokens only;
    a row slice (consecutive or strided) cut to its used columns is exactly ``pack`` of its
    rows alone: the tensors a micro-batch's forward pass sees do not depend on the batch."""
    from models.logprobs import _cut, pack, packed_batch

    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, 50, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]
    responses = [torch.randint(3, 50, (n,), generator=g).tolist() for n in RESPONSE_LENGTHS]
    batch = packed_batch(prompts, responses, pad_token_id=1, width=11)
    P = batch.prompt_len
    assert P == max(PROMPT_LENGTHS) and batch.loss_mask.shape == (6, 11)
    positions = batch.attention_mask.cumsum(-1) - 1
    for row, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        live = batch.attention_mask[row] == 1
        assert live.tolist() == [False] * (P - len(p)) + [True] * (len(p) + len(r)) + [
            False] * (11 - len(r))
        assert batch.input_ids[row, live].tolist() == p + r
        assert positions[row, live].tolist() == list(range(len(p) + len(r)))
        assert batch.response_ids[row, :len(r)].tolist() == r
        assert batch.loss_mask[row].tolist() == [1.0] * len(r) + [0.0] * (11 - len(r))
    for rows in (slice(0, 2), slice(2, 4), slice(4, 6), torch.tensor([4, 1, 3]),
                 torch.tensor([3])):
        ids = list(range(6))[rows] if isinstance(rows, slice) else rows.tolist()
        alone = pack([prompts[r] for r in ids], [responses[r] for r in ids], 1,
                     torch.device("cpu"))
        cut = _cut(batch.input_ids[rows], batch.attention_mask[rows],
                   batch.response_ids[rows], P)
        for ours, theirs in zip(cut, (*alone[:3], alone[4]), strict=True):
            assert torch.equal(torch.as_tensor(ours), torch.as_tensor(theirs)), ids


@pytest.fixture(scope="module")
def tiny_rollouts(tiny_model_dir):
    """Float64 tiny policy with a small random adapter, and six rollouts of different prompt
    and response lengths (one empty) in two problems, old log-probs near the policy's own."""
    from configs.schema import LoraConfig, ModelConfig
    from models.logprobs import packed_batch, packed_logprobs
    from models.policy import Policies

    policies = Policies.load(ModelConfig(generator=str(tiny_model_dir)), LoraConfig(r=4, alpha=8))
    policies.model_for("generator").double()  # in place: trainable_parameters() stays valid
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in policies.trainable_parameters("generator"):
            p.add_(0.02 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    prompts = [torch.randint(3, 2000, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]
    responses = [torch.randint(3, 2000, (n,), generator=g).tolist() for n in RESPONSE_LENGTHS]
    pad = policies.tokenizer.pad_token_id
    with torch.no_grad():
        lp = packed_logprobs(policies.model_for("generator"),
                             packed_batch(prompts, responses, pad), temperature=TEMPERATURE)
    noise = 0.02 * torch.randn(lp.logprobs.shape, generator=g)
    chains = [{"problem_id": f"p{i % 2}", "sample_idx": i, "prompt_token_ids": p,
               "output_token_ids": r, "output_logprobs": (lp.logprobs[i] + noise[i])[:len(r)]}
              for i, (p, r) in enumerate(zip(prompts, responses, strict=True))]
    rewards = [{"problem_id": f"p{i % 2}", "sample_idx": i, "generator_reward": float(i % 3),
                "discriminator_reward": 0.0} for i in range(6)]
    return policies, prompts, responses, chains, rewards


def _score_bound(model, batch) -> float:
    """S: the largest |score| and |logsumexp| at the batch's response positions."""
    with torch.no_grad():
        att = batch.attention_mask
        logits = model(input_ids=batch.input_ids, attention_mask=att,
                       position_ids=(att.cumsum(-1) - 1).clamp(min=0)).logits
        P, T = batch.prompt_len, batch.loss_mask.shape[1]
        scores = logits[:, P - 1:P - 1 + T][batch.loss_mask > 0] / TEMPERATURE
    return max(scores.abs().max().item(), scores.logsumexp(-1).abs().max().item())


@pytest.mark.usefixtures("one_thread")
def test_packed_micro_batches_give_the_list_round_trips_numbers(tiny_rollouts):
    """Per micro-batch (consecutive, strided) log-probs, entropy and values; the reference
    pass; one pass at the whole batch's width vs each row at its own; any pad id."""
    from models.logprobs import packed_logprobs
    from pipeline.update import build_batch, logprob_fn, reference_logprobs

    policies, prompts, responses, chains, rewards = tiny_rollouts
    model, pad = policies.model_for("generator"), policies.tokenizer.pad_token_id
    batch = indexed(build_batch(chains, rewards, "generator", pad_token_id=pad))
    B, W = batch.loss_mask.shape
    H, V = model.config.hidden_size, model.config.vocab_size
    head = ValueHead(H)
    nn.init.normal_(head.proj.weight, generator=torch.Generator().manual_seed(1))
    nn.init.normal_(head.proj.bias, generator=torch.Generator().manual_seed(2))
    with policies.reference("generator") as ref_model:
        S = max(_score_bound(model, batch), _score_bound(ref_model, batch))
    L = 2 * (2 * S + math.log2(V) + 2) * EPS32
    E = L * (1 + S) + 2 * (math.log2(V) + 2) * EPS32 * S
    gain = model.get_base_model().model.norm.weight.detach().float()
    value_atol = (H + 2) * EPS32 * (math.sqrt(H) * (head.proj.weight[0].abs() @ gain.abs())
                                    + head.proj.bias.abs()).item()

    new, old = logprob_fn(model, temperature=TEMPERATURE, value_head=head), old_logprob_fn(
        model, prompts, responses, W, pad, value_head=head)
    with torch.no_grad():
        for mb in [*batch.micro_batches(2), batch.rows(torch.tensor([4, 1, 3]))]:
            ours, theirs = new(mb), old(mb)
            for got, want, atol in zip(ours, theirs, (L, E, value_atol), strict=True):
                assert got.shape == want.shape == mb.loss_mask.shape
                torch.testing.assert_close(got, want, rtol=0.0, atol=atol)
            assert torch.equal(ours[0][mb.loss_mask == 0], torch.zeros_like(ours[0])[
                mb.loss_mask == 0])
        whole = packed_logprobs(model, batch, temperature=TEMPERATURE)  # one pass, width W
        each = packed_logprobs(model, batch, temperature=TEMPERATURE, micro_batch_size=1)
        other_pad = build_batch(chains, rewards, "generator", pad_token_id=pad + 7)
        repadded = packed_logprobs(model, other_pad, temperature=TEMPERATURE)
        torch.testing.assert_close(each.logprobs, whole.logprobs, rtol=0.0, atol=L)
        torch.testing.assert_close(repadded.logprobs, whole.logprobs, rtol=0.0, atol=L)
        assert torch.equal(whole.mask, batch.loss_mask > 0)
        with policies.reference("generator") as ref_model:
            ref_old = old(batch)[0]  # with entropy, in one pass
            ref_new = reference_logprobs(ref_model, batch, temperature=TEMPERATURE,
                                         micro_batch_size=2)
    torch.testing.assert_close(ref_new, ref_old, rtol=0.0, atol=L)
    assert not torch.allclose(ref_new, whole.logprobs, atol=1e-3)  # adapters really were off


@pytest.mark.usefixtures("one_thread")
def test_update_on_the_packed_batch_equals_the_list_round_trip(tiny_rollouts):
    """``ppo_update`` fed by the packed path and by the old one: same statistics, same
    gradient (one SGD step, see the numerics note above)."""
    from models.logprobs import packed_logprobs
    from pipeline.update import build_batch, logprob_fn, reference_logprobs

    policies, prompts, responses, chains, rewards = tiny_rollouts
    model, pad = policies.model_for("generator"), policies.tokenizer.pad_token_id
    params = policies.trainable_parameters("generator")
    batch = indexed(build_batch(chains, rewards, "generator", pad_token_id=pad))
    B, W = batch.loss_mask.shape
    V, lr = model.config.vocab_size, 1e-2
    cfg = PPOConfig(micro_batch_size=2, kl_coef=0.1, max_grad_norm=1e12)  # one step, no clip
    start = [p.detach().clone() for p in params]

    # Bounds from this batch's values (new path; the old one's are within L of them).
    with policies.reference("generator") as ref_model:
        S = max(_score_bound(model, batch), _score_bound(ref_model, batch))
        ref = reference_logprobs(ref_model, batch, temperature=TEMPERATURE, micro_batch_size=2)
    L = 2 * (2 * S + math.log2(V) + 2) * EPS32
    E = L * (1 + S) + 2 * (math.log2(V) + 2) * EPS32 * S
    lp = packed_logprobs(model, batch, temperature=TEMPERATURE)      # with grad: Jacobians
    on = batch.loss_mask > 0
    X = (lp.logprobs - batch.old_logprobs)[on].abs().max().item() + L      # |log ratio|
    D = (ref - lp.logprobs)[on].abs().max().item() + 2 * L                  # |ref - new|
    A = group_advantages(batch.scores, batch.group_ids)[0].abs().max().item()
    assert math.exp(X) < 1 + cfg.clip_epsilon and math.exp(-X) > 1 - cfg.clip_epsilon, (
        "a ratio near the clip: clip_fraction could flip between the paths")
    round_ = (2 * W + 1) * EPS32                     # float32 mean over a micro-batch's 2 x W
    slope = {"ratio": math.exp(X), "approx_kl": math.exp(X), "policy_loss": A * math.exp(X),
             "kl_ref": 2 * math.exp(D)}                                  # |f'| per input
    size = {"ratio": math.exp(X), "approx_kl": math.exp(X), "policy_loss": A * math.exp(X),
            "kl_ref": math.exp(D) + D}                                   # max |f|
    tol = {k: slope[k] * L + round_ * size[k] for k in slope}
    tol["entropy"] = E + round_ * math.log(V)
    tol["loss"] = tol["policy_loss"] + cfg.kl_coef * tol["kl_ref"]
    # The gradient is a token mean of w_t J_t, J_t = d log-prob_t / d adapter, w_t = d f_t /
    # d log-prob_t = -A ratio + kl_coef (1 - e^(ref - new)) (no clip). |w_t| <= weight, and
    # its slope in (new, ref) is <= slope_w, so w_t moves by <= slope_w L; J_t's softmax
    # probabilities move by a relative <= L (test_models_generation's assert_gradients_close:
    # the tensor's largest entry stands for the size of J_t's summands). Per tensor:
    # |delta g| <= L (weight + slope_w) max_t |J_t|.
    weight = A * math.exp(X) + cfg.kl_coef * (math.exp(D) + 1)
    slope_w = A * math.exp(X) + 2 * cfg.kl_coef * math.exp(D)
    jac = [torch.zeros(()) for _ in params]
    for b, t in on.nonzero().tolist():
        grads = torch.autograd.grad(lp.logprobs[b, t], params, retain_graph=True)
        jac = [torch.maximum(m, gr.abs().max()) for m, gr in zip(jac, grads, strict=True)]
    del lp
    grad_tol = [L * (weight + slope_w) * m.item() for m in jac]

    results = {}
    for name in ("old", "new"):
        with torch.no_grad():
            for p, s in zip(params, start, strict=True):
                p.copy_(s)
        with policies.reference("generator") as ref_model:
            if name == "old":
                ref = old_logprob_fn(ref_model, prompts, responses, W, pad)(batch)[0]
                fn = old_logprob_fn(model, prompts, responses, W, pad)
            else:
                ref = reference_logprobs(ref_model, batch, temperature=TEMPERATURE,
                                         micro_batch_size=cfg.micro_batch_size)
                fn = logprob_fn(model, temperature=TEMPERATURE)
        model.train()
        try:
            stats = ppo_update(fn, params, torch.optim.SGD(params, lr=lr), batch, cfg, ref)
        finally:
            model.eval()
        results[name] = asdict(stats), [(s - p.detach()) / lr for p, s in zip(params, start,
                                                                          strict=True)]
    with torch.no_grad():
        for p, s in zip(params, start, strict=True):
            p.copy_(s)
    (old_stats, old_grad), (new_stats, new_grad) = results["old"], results["new"]

    assert [k for k, v in old_stats.items() if v is None] == [  # the same statistics measured
        k for k, v in new_stats.items() if v is None]
    for key in ("n_sequences", "n_tokens", "dead_sample_fraction", "optimizer_steps",
                "clip_fraction"):
        assert new_stats[key] == old_stats[key], key
    assert new_stats["clip_fraction"] == 0.0 and new_stats["optimizer_steps"] == 1.0
    for key, atol in tol.items():
        assert abs(new_stats[key] - old_stats[key]) <= atol, (key, new_stats[key],
                                                              old_stats[key], atol)
    for ours, theirs, atol in zip(new_grad, old_grad, grad_tol, strict=True):
        assert theirs.abs().max() > 100 * atol  # the step is far above the tolerance
        torch.testing.assert_close(ours, theirs, rtol=0.0, atol=atol)
    norm_tol = math.sqrt(sum(g.numel() * a ** 2 for g, a in zip(new_grad, grad_tol,
                                                                strict=True)))
    assert abs(new_stats["grad_norm"] - old_stats["grad_norm"]) <= norm_tol
