"""PPO maths (``models/ppo.py``): each helper against a naive loop, the loss by hand, and the
update on a toy softmax policy (a parameter table: no model download, runs in milliseconds).
The update's packed batch on the tiny model: ``test_ppo_packing.py``."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from torch import nn

from configs.schema import PPOConfig
from models.ppo import (
    ValueHead,
    approx_kl,
    clipped_surrogate,
    gae,
    group_advantages,
    kl_k3,
    make_optimizer,
    masked_mean,
    masked_var,
    masked_whiten,
    place_terminal_reward,
    ppo_loss,
    ppo_update,
)
from models.ppobatch import AdvantageMode, PackedBatch

GIVEN = AdvantageMode.GIVEN


def rand_case(seed: int, B: int = 4, T: int = 7):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, generator=g, dtype=torch.float64)
    mask = (torch.rand(B, T, generator=g) > 0.35).to(torch.float64)
    mask[0, :] = 0          # an empty row
    mask[1, :] = 0
    mask[1, 2] = 1          # a single-token row
    return x, mask, g


def picked(x, mask):
    return [x[b, t].item() for b in range(x.shape[0]) for t in range(x.shape[1]) if mask[b, t]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_masked_mean_var_whiten_match_naive_loops(seed):
    x, mask, _ = rand_case(seed)
    vals = picked(x, mask)
    n = len(vals)
    mean = sum(vals) / n
    var = sum((v - mean) ** 2 for v in vals) / (n - 1)
    assert masked_mean(x, mask).item() == pytest.approx(mean)
    assert masked_var(x, mask).item() == pytest.approx(var)
    assert masked_var(x, mask, unbiased=False).item() == pytest.approx(var * (n - 1) / n)
    for b in range(x.shape[0]):
        row = [x[b, t].item() for t in range(x.shape[1]) if mask[b, t]]
        expect = sum(row) / len(row) if row else 0.0  # empty row: 0, not NaN
        assert masked_mean(x, mask, dim=1)[b].item() == pytest.approx(expect)
    white = masked_whiten(x, mask)
    kept = masked_whiten(x, mask, shift_mean=False)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            z = (x[b, t].item() - mean) / math.sqrt(var + 1e-8)
            assert white[b, t].item() == pytest.approx(z if mask[b, t] else 0.0)
            assert kept[b, t].item() == pytest.approx(z + mean if mask[b, t] else 0.0)


def naive_gae(rewards, values, mask, gamma, lam):
    """cleanrl's loop, run on each row's masked tokens only."""
    B, T = values.shape
    adv = torch.zeros(B, T, dtype=values.dtype)
    for b in range(B):
        idx = [t for t in range(T) if mask[b, t]]
        last = 0.0
        for k in reversed(range(len(idx))):
            next_value = values[b, idx[k + 1]].item() if k + 1 < len(idx) else 0.0
            delta = rewards[b, idx[k]].item() + gamma * next_value - values[b, idx[k]].item()
            last = delta + gamma * lam * last
            adv[b, idx[k]] = last
    return adv, (adv + values) * mask


@pytest.mark.parametrize("gamma, lam", [(1.0, 0.95), (0.9, 0.8), (1.0, 1.0), (0.99, 0.0)])
def test_gae_matches_naive_loop_with_gaps_in_the_mask(gamma, lam):
    values, mask, g = rand_case(3, B=5, T=9)
    rewards = torch.randn(5, 9, generator=g, dtype=torch.float64) * mask
    adv, ret = gae(rewards, values, mask, gamma, lam)
    want_adv, want_ret = naive_gae(rewards, values, mask, gamma, lam)
    torch.testing.assert_close(adv, want_adv)
    torch.testing.assert_close(ret, want_ret)


def test_terminal_reward_gae_with_zero_values_is_the_discounted_score():
    mask = torch.tensor([[0, 1, 1, 1, 0]], dtype=torch.float64)
    rewards = place_terminal_reward(torch.tensor([2.0], dtype=torch.float64), mask)
    assert rewards.tolist() == [[0, 0, 0, 2, 0]]
    adv, _ = gae(rewards, torch.zeros_like(mask), mask, gamma=0.5, lam=1.0)
    assert adv.tolist() == [[0, 0.5, 1.0, 2.0, 0]]
    empty = place_terminal_reward(torch.tensor([5.0]), torch.zeros(1, 3))
    assert empty.tolist() == [[0, 0, 0]]


def test_clipped_surrogate_matches_naive_loop():
    logp_old, mask, g = rand_case(4)
    logp_new = logp_old + 0.4 * torch.randn(logp_old.shape, generator=g, dtype=torch.float64)
    adv = torch.randn(4, generator=g, dtype=torch.float64)
    eps = 0.2
    terms, clipped = [], []
    for b in range(4):
        for t in range(logp_old.shape[1]):
            if mask[b, t]:
                r = math.exp(logp_new[b, t].item() - logp_old[b, t].item())
                a = adv[b].item()
                u, c = -a * r, -a * min(max(r, 1 - eps), 1 + eps)
                terms.append(max(u, c))
                clipped.append(c > u)
    loss, frac = clipped_surrogate(logp_new, logp_old, adv, mask, eps)
    assert loss.item() == pytest.approx(sum(terms) / len(terms))
    assert frac.item() == pytest.approx(sum(clipped) / len(clipped))
    # Per-token advantages give the same result as the broadcast per-sequence ones.
    loss2, _ = clipped_surrogate(logp_new, logp_old, adv[:, None].expand_as(mask), mask, eps)
    assert loss2.item() == pytest.approx(loss.item())


def test_clip_fraction_counts_only_ratios_pushed_past_the_clip():
    old = torch.zeros(1, 4)
    mask = torch.ones(1, 4)
    new = torch.log(torch.tensor([[1.0, 1.1, 1.5, 0.5]]))
    # Advantage > 0: only a ratio above 1 + eps is clipped (1.5); 0.5 keeps its gradient.
    assert clipped_surrogate(new, old, torch.tensor([1.0]), mask, 0.2)[1].item() == 0.25
    # Advantage < 0: only a ratio below 1 - eps is clipped (0.5).
    assert clipped_surrogate(new, old, torch.tensor([-1.0]), mask, 0.2)[1].item() == 0.25
    assert clipped_surrogate(old, old, torch.tensor([1.0]), mask, 0.2)[1].item() == 0.0
    # A clipped token contributes no gradient.
    new = new.clone().requires_grad_(True)
    clipped_surrogate(new, old, torch.tensor([1.0]), mask, 0.2)[0].backward()
    assert new.grad[0, 2].item() == 0.0 and new.grad[0, 3].item() != 0.0


def test_kl_k3_is_an_unbiased_non_negative_kl_estimate():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    q = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    tokens = torch.multinomial(p, 200_000, replacement=True, generator=g)
    k3 = kl_k3(p.log()[tokens], q.log()[tokens])
    exact = (p * (p.log() - q.log())).sum().item()
    assert (k3 >= 0).all()
    assert k3.mean().item() == pytest.approx(exact, rel=0.03)
    assert kl_k3(p.log(), p.log()).abs().max().item() == 0.0


def test_approx_kl_matches_naive_loop():
    old, mask, g = rand_case(5)
    new = old + 0.3 * torch.randn(old.shape, generator=g, dtype=torch.float64)
    vals = [math.exp(n - o) - 1 - (n - o) for n, o in zip(picked(new, mask), picked(old, mask),
                                                          strict=True)]
    assert approx_kl(new, old, mask).item() == pytest.approx(sum(vals) / len(vals))


def test_group_advantages_match_naive_and_mask_all_equal_groups():
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.2, 0.2, 0.2, 0.7, 0.9, 0.1])
    groups = torch.tensor([3, 3, 3, 8, 8, 8, 1, 5, 5])
    adv, live = group_advantages(rewards, groups)
    for i in range(len(rewards)):
        members = [rewards[j].item() for j in range(len(rewards)) if groups[j] == groups[i]]
        mean = sum(members) / len(members)
        if len(members) < 2 or max(members) == min(members):
            assert not live[i] and adv[i].item() == 0.0
            continue
        std = math.sqrt(sum((m - mean) ** 2 for m in members) / (len(members) - 1))
        assert live[i]
        assert adv[i].item() == pytest.approx((rewards[i].item() - mean) / (std + 1e-4),
                                              rel=1e-5)
    raw, _ = group_advantages(rewards, groups, scale=False)
    assert raw[:3].tolist() == pytest.approx([0.5, -0.5, 0.0])
    assert live.tolist() == [True] * 3 + [False] * 4 + [True] * 2


def test_ppo_loss_equals_a_hand_computation():
    old = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    new = torch.log(torch.tensor([[0.6, 0.4, 0.9]]))          # ratios 1.2, 0.8, 1.8
    ref = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    mask = torch.tensor([[1.0, 1.0, 0.0]])                    # last token not trained
    values, returns = torch.tensor([[0.0, 1.0, 5.0]]), torch.tensor([[1.0, 1.0, 0.0]])
    entropy = torch.tensor([[0.3, 0.5, 9.0]])
    loss, stats = ppo_loss(new, old, ref, torch.tensor([2.0]), mask, clip_eps=0.1,
                           kl_coef=0.5, entropy=entropy, values=values, returns=returns,
                           value_coef=0.1)
    # Surrogate: token 1 ratio 1.2 is clipped to 1.1 -> -2.2; token 2 ratio 0.8 -> -1.6.
    pg = (-2.2 - 1.6) / 2
    # k3 with r = log(ref/new): exp(r) - 1 - r.
    kl = sum(0.5 / p - 1 - math.log(0.5 / p) for p in (0.6, 0.4)) / 2
    vf = 0.5 * (1.0 + 0.0) / 2
    assert stats.policy_loss == pytest.approx(pg, rel=1e-5)
    assert stats.kl_ref == pytest.approx(kl, rel=1e-5)
    assert stats.value_loss == pytest.approx(vf)
    assert loss.item() == pytest.approx(pg + 0.5 * kl + 0.1 * vf, rel=1e-5)
    assert stats.loss == pytest.approx(loss.item())
    assert stats.clip_fraction == pytest.approx(0.5)
    assert stats.entropy == pytest.approx(0.4)
    assert stats.ratio == pytest.approx(1.0)


class TablePolicy(nn.Module):
    """A softmax policy over V tokens with its own logits per position: ``logits (T, V)``."""

    def __init__(self, T: int = 5, V: int = 7, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.logits = nn.Parameter(torch.randn(T, V, generator=g))
        self.value = ValueHead(hidden_size=V)
        self.features = torch.randn(T, V, generator=g)  # fixed "hidden states" for the value

    def __call__(self, mb):
        tokens = mb.response_ids
        logp_all = torch.log_softmax(self.logits, -1).expand(len(tokens), -1, -1)
        logp = logp_all.gather(-1, tokens[..., None]).squeeze(-1)                # (b, T)
        entropy = -(logp_all.exp() * logp_all).sum(-1)                           # (b, T)
        values = self.value(self.features.expand(len(tokens), -1, -1))           # (b, T)
        return logp, entropy, values


def toy_batch(B: int = 6, T: int = 5, V: int = 7, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, V, (B, T), generator=g)
    mask = torch.ones(B, T)
    mask[:, 0] = 0                                   # the "prompt" token is never trained
    mask[-1, 3:] = 0                                 # a shorter response
    # No prompt columns: the table policy reads the response tokens only.
    return PackedBatch(input_ids=tokens, attention_mask=torch.ones_like(tokens),
                       response_ids=tokens, loss_mask=mask, prompt_len=0)


def chosen_logprob(policy, batch):
    with torch.no_grad():
        logp, _, _ = policy(batch)
    return masked_mean(logp, batch.loss_mask).item()


def test_positive_advantage_raises_the_chosen_tokens_log_prob():
    policy, batch = TablePolicy(), toy_batch()
    cfg = PPOConfig(learning_rate=0.05, kl_coef=0.0, epochs=3, micro_batch_size=2)
    ref = policy(batch)[0].detach()
    before = chosen_logprob(policy, batch)
    stats = ppo_update(policy, policy.parameters(), make_optimizer(policy.parameters(), cfg),
                       replace(batch, advantages=torch.ones(6)), cfg, ref, GIVEN)
    assert chosen_logprob(policy, batch) > before + 0.01
    assert not stats.skipped and stats.grad_norm > 0
    assert stats.n_tokens == float(batch.loss_mask.sum())
    assert 0.0 <= stats.clip_fraction <= 1.0 and stats.approx_kl >= 0
    # Negative advantage pushes the other way.
    policy = TablePolicy()
    ppo_update(policy, policy.parameters(), make_optimizer(policy.parameters(), cfg),
               replace(batch, advantages=-torch.ones(6)), cfg, ref, GIVEN)
    assert chosen_logprob(policy, batch) < before - 0.01


def test_learning_rate_zero_changes_nothing():
    policy, batch = TablePolicy(), toy_batch()
    cfg = PPOConfig(learning_rate=0.0, weight_decay=0.1, epochs=2)
    before = [p.detach().clone() for p in policy.parameters()]
    ref = policy(batch)[0].detach() - 0.3               # non-zero KL gradient too
    stats = ppo_update(policy, policy.parameters(), make_optimizer(policy.parameters(), cfg),
                       replace(batch, advantages=torch.ones(6)), cfg, ref, GIVEN)
    assert stats.grad_norm > 0
    assert all(torch.equal(a, b) for a, b in zip(before, policy.parameters(), strict=True))


def test_micro_batches_accumulate_to_the_full_batch_gradient():
    batch = replace(toy_batch(), advantages=torch.linspace(-1, 1, 6))
    results = []
    for micro in (1, 4, 6):
        policy = TablePolicy()
        cfg = PPOConfig(micro_batch_size=micro, kl_coef=0.1, max_grad_norm=1e6)
        ref = policy(batch)[0].detach() + 0.1
        opt = torch.optim.SGD(policy.parameters(), lr=0.1)
        stats = ppo_update(policy, policy.parameters(), opt, batch, cfg, ref, GIVEN)
        results.append((policy.logits.detach().clone(), stats))
    for logits, stats in results[1:]:
        torch.testing.assert_close(logits, results[0][0])
        assert stats.grad_norm == pytest.approx(results[0][1].grad_norm, rel=1e-5)
        assert stats.kl_ref == pytest.approx(results[0][1].kl_ref, rel=1e-5)


def test_mini_batches_take_one_step_each_on_their_strided_rows():
    """mini_batch_size=2 on 6 rows: 3 SGD steps on rows {0,3}, {1,4}, {2,5}, in that order,
    each the full-batch update of those rows alone (the clip now bites on later steps)."""
    batch = replace(toy_batch(), advantages=torch.linspace(-1, 1, 6))
    cfg = PPOConfig(mini_batch_size=2, micro_batch_size=1, kl_coef=0.1, max_grad_norm=1e6,
                    clip_epsilon=0.05)
    policy = TablePolicy()
    ref = policy(batch)[0].detach() + 0.1
    with torch.no_grad():
        old = policy(batch)[0]
    stats = ppo_update(policy, policy.parameters(), torch.optim.SGD(policy.parameters(), lr=0.5),
                       replace(batch, old_logprobs=old), cfg, ref, GIVEN)
    assert stats.optimizer_steps == 3.0
    assert stats.clip_fraction > 0                   # steps 2 and 3 start off-policy

    manual = TablePolicy()
    opt = torch.optim.SGD(manual.parameters(), lr=0.5)
    whole = PPOConfig(kl_coef=0.1, max_grad_norm=1e6, clip_epsilon=0.05)
    for rows in ([0, 3], [1, 4], [2, 5]):
        sub = replace(batch, old_logprobs=old).rows(rows)
        ppo_update(manual, manual.parameters(), opt, sub, whole, ref[rows], GIVEN)
    torch.testing.assert_close(policy.logits.detach(), manual.logits.detach())


def test_gradient_is_clipped_and_its_norm_reported():
    policy, batch = TablePolicy(), toy_batch()
    cfg = PPOConfig(max_grad_norm=1e-3, kl_coef=0.0)
    before = policy.logits.detach().clone()
    opt = torch.optim.SGD([policy.logits], lr=1.0)
    stats = ppo_update(policy, [policy.logits], opt, replace(batch, advantages=torch.ones(6) * 5),
                       cfg, policy(batch)[0].detach(), GIVEN)
    assert stats.grad_norm > 1e-2                               # the unclipped norm
    assert (policy.logits.detach() - before).norm().item() == pytest.approx(1e-3, rel=1e-3)


def test_group_mode_skips_groups_without_signal():
    policy, batch = TablePolicy(), toy_batch()
    cfg = PPOConfig(learning_rate=0.05, kl_coef=0.0)
    ref = policy(batch)[0].detach()
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    # Every group scored the same: nothing to learn, nothing moves (no decay, no Adam step).
    before = policy.logits.detach().clone()
    stats = ppo_update(policy, policy.parameters(), make_optimizer(policy.parameters(), cfg),
                       replace(batch, scores=torch.tensor([1., 1., 1., 0., 0., 0.]),
                               group_ids=groups), cfg, ref)
    assert stats.skipped and stats.dead_sample_fraction == 1.0
    assert torch.equal(policy.logits, before)
    # One live group: only its samples' tokens are trained.
    stats = ppo_update(policy, policy.parameters(), make_optimizer(policy.parameters(), cfg),
                       replace(batch, scores=torch.tensor([1., 0., 1., .5, .5, .5]),
                               group_ids=groups), cfg, ref)
    assert not stats.skipped and stats.dead_sample_fraction == 0.5
    assert stats.n_tokens == float(batch.loss_mask[:3].sum())


def test_gae_mode_trains_the_value_head():
    policy, batch = TablePolicy(), toy_batch()
    cfg = PPOConfig(advantage="gae", learning_rate=0.05, kl_coef=0.0, value_coef=1.0,
                    gamma=1.0, lam=0.95)
    opt = make_optimizer(policy.parameters(), cfg)
    batch = replace(batch, scores=torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0]))
    ref = policy(batch)[0].detach()
    losses = [ppo_update(policy, policy.parameters(), opt, batch, cfg, ref).value_loss
              for _ in range(15)]
    assert losses[-1] < 0.5 * losses[0]
    assert policy.value.proj.weight.abs().sum().item() > 0

    def no_values(mb):
        return policy(mb)[0], None, None

    with pytest.raises(ValueError, match="gae"):
        ppo_update(no_values, policy.parameters(), opt, batch, cfg, ref)
    with pytest.raises(ValueError, match=r"lacks \['scores'\]"):
        ppo_update(policy, policy.parameters(), opt, toy_batch(), cfg, ref)
    with pytest.raises(ValueError, match=r"lacks \['group_ids'\]"):
        ppo_update(policy, policy.parameters(), opt, batch, PPOConfig(), ref)


def test_make_optimizer_uses_config_and_refuses_frozen_params():
    policy = TablePolicy()
    opt = make_optimizer(policy.parameters(), PPOConfig(learning_rate=3e-4, weight_decay=0.01))
    assert isinstance(opt, torch.optim.AdamW)
    assert opt.param_groups[0]["lr"] == 3e-4 and opt.param_groups[0]["weight_decay"] == 0.01
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="requires grad"):
        make_optimizer(frozen.parameters(), PPOConfig())


def test_packed_batch_rows_and_shape_errors():
    batch = replace(toy_batch(), scores=torch.arange(6.0))
    sub = batch.rows(torch.tensor([4, 1]))
    assert sub.scores.tolist() == [4.0, 1.0] and sub.prompt_len == batch.prompt_len
    assert [len(mb.loss_mask) for mb in batch.micro_batches(4)] == [4, 2]
    with pytest.raises(ValueError, match=r"PackedBatch.scores has shape \(5,\)"):
        replace(batch, scores=torch.zeros(5))
