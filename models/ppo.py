"""PPO for the LoRA adapters: small pure tensor helpers and one update function.

No model code lives here: :func:`ppo_update` takes a ``policy_logprobs_fn`` that maps a
micro-batch (a row slice of a ``models.ppobatch.PackedBatch``) to per-token log-probs (and
optionally entropy and values), so the same maths serves the generator and the discriminator, a
tiny CPU model and a 4-bit GPU model, and a toy table policy in the tests. It returns
``artifacts.updatestats.UpdateStats``, the updates table's statistics.

Shapes: ``B`` sequences, ``T`` token positions. ``loss_mask (B, T)`` marks the tokens being
trained (the trained stage's response tokens of one role); everything else (prompt, other
stages, padding) is ignored by every loss and statistic. The reward of a sequence is one
float; GAE places it on the sequence's last trained token.

    python -m pytest tests/test_ppo.py              # each helper against a naive loop
    python -m pytest --doctest-modules models/ppo.py
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor, nn

from artifacts.updatestats import UpdateStats
from configs.schema import PPOConfig
from models.ppobatch import AdvantageMode, PackedBatch

PolicyFn = Callable[[PackedBatch], tuple[Tensor, Tensor | None, Tensor | None]]
"""``micro_batch -> (logprobs (b, T), entropy (b, T) or None, values (b, T) or None)``."""


# --- masked statistics ---------------------------------------------------------------------
def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``x`` where ``mask`` is 1; an empty mask gives 0 rather than NaN.

    >>> masked_mean(torch.tensor([1., 2., 9.]), torch.tensor([1, 1, 0]))
    tensor(1.5000)
    """
    mask = mask.to(x.dtype)
    if dim is None:
        return (x * mask).sum() / mask.sum().clamp(min=1)
    return (x * mask).sum(dim) / mask.sum(dim).clamp(min=1)


def masked_var(x: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Variance of ``x`` where ``mask`` is 1 (Bessel-corrected when ``unbiased`` and n > 1)."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    n = mask.sum()
    if unbiased and n > 1:
        var = var * n / (n - 1)
    return var


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)`` over the masked tokens: how much of the
    return the value head predicts (1 perfect, 0 a constant, negative worse). NaN when the
    returns do not vary (nothing to explain).

    >>> explained_variance(torch.tensor([1., 2., 3.]), torch.tensor([1., 2., 3.]), torch.ones(3))
    1.0
    >>> explained_variance(torch.zeros(3), torch.tensor([1., 2., 3.]), torch.ones(3))
    0.0
    >>> explained_variance(torch.tensor([3., 2., 1.]), torch.tensor([1., 2., 3.]), torch.ones(3))
    -3.0
    """
    var = float(masked_var(returns, mask, unbiased=False))
    if var == 0.0:
        return float("nan")
    return 1.0 - float(masked_var(returns - values, mask, unbiased=False)) / var


def masked_whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """``(x - mean) / std`` over the masked entries; 0 outside the mask.

    With ``shift_mean=False`` the mean is added back (only the scale changes), as TRL does for
    rewards.
    """
    mean, var = masked_mean(x, mask), masked_var(x, mask)
    whitened = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean
    return whitened * mask.to(x.dtype)


# --- advantages ----------------------------------------------------------------------------
def place_terminal_reward(scores: Tensor, mask: Tensor) -> Tensor:
    """Token-level rewards ``(B, T)``: each score on its row's last masked token, 0 elsewhere.

    >>> place_terminal_reward(torch.tensor([2., 3.]), torch.tensor([[1, 1, 0], [0, 1, 1]]))
    tensor([[0., 2., 0.],
            [0., 0., 3.]])
    """
    B, T = mask.shape
    has_tokens = mask.sum(dim=1) > 0                                     # (B,)
    last = T - 1 - mask.flip(1).to(torch.long).argmax(dim=1)             # (B,)
    rewards = torch.zeros(B, T, dtype=scores.dtype, device=scores.device)
    rewards[torch.arange(B, device=mask.device), last] = torch.where(
        has_tokens, scores, torch.zeros_like(scores))
    return rewards


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float,
        lam: float) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over the masked tokens of each row.

    Masked tokens form the episode in order (gaps are skipped, so a non-contiguous stage
    selection works); the value after the last masked token is 0 (terminal). Rewards outside
    the mask are ignored. Returns ``advantages (B, T)`` and ``returns = advantages + values``
    (both 0 outside the mask). Pass detached rollout-time values.
    """
    B, T = values.shape
    m = mask.to(values.dtype)
    advantages = torch.zeros_like(values)
    last_gae = torch.zeros(B, dtype=values.dtype, device=values.device)    # (B,)
    next_value = torch.zeros_like(last_gae)                                # (B,)
    for t in reversed(range(T)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]          # (B,)
        candidate = delta + gamma * lam * last_gae
        on = m[:, t] > 0
        # Off-mask positions leave the recursion untouched: the next masked token is "t + 1".
        last_gae = torch.where(on, candidate, last_gae)
        next_value = torch.where(on, values[:, t], next_value)
        advantages[:, t] = candidate * m[:, t]
    return advantages, (advantages + values) * m


def group_advantages(rewards: Tensor, group_ids: Tensor, scale: bool = True,
                     eps: float = 1e-4, atol: float = 1e-9) -> tuple[Tensor, Tensor]:
    """Group-relative advantages (GRPO): reward minus its group's mean, over the group's std.

    ``group_ids`` are integers (e.g. the problem's index in the step). Groups whose rewards are
    all equal (single-sample groups included) carry no signal: their advantages are 0 and the
    returned mask ``(N,)`` is False for them, so the update skips their tokens.

    >>> adv, live = group_advantages(torch.tensor([1., 0., .5, .5]), torch.tensor([0, 0, 1, 1]))
    >>> [round(a, 2) for a in adv.tolist()], live.tolist()
    ([0.71, -0.71, 0.0, 0.0], [True, True, False, False])
    """
    rewards = rewards.to(torch.float32) if not rewards.is_floating_point() else rewards
    group_ids = torch.as_tensor(group_ids, device=rewards.device)
    _, inv = torch.unique(group_ids, return_inverse=True)                 # (N,)
    G = int(inv.max()) + 1 if inv.numel() else 0
    zeros = torch.zeros(G, dtype=rewards.dtype, device=rewards.device)
    count = zeros.index_add(0, inv, torch.ones_like(rewards))              # (G,)
    mean = zeros.index_add(0, inv, rewards) / count                        # (G,)
    dev = rewards - mean[inv]                                              # (N,)
    # Unbiased std, as TRL's GRPO computes it.
    std = (zeros.index_add(0, inv, dev ** 2) / (count - 1).clamp(min=1)).sqrt()
    hi = zeros.scatter_reduce(0, inv, rewards, "amax", include_self=False)
    lo = zeros.scatter_reduce(0, inv, rewards, "amin", include_self=False)
    live = ((hi - lo) > atol)[inv]                                         # (N,)
    adv = dev / (std[inv] + eps) if scale else dev
    return torch.where(live, adv, torch.zeros_like(adv)), live


# --- losses --------------------------------------------------------------------------------
def clipped_surrogate(logp_new: Tensor, logp_old: Tensor, advantages: Tensor, mask: Tensor,
                      clip_eps: float) -> tuple[Tensor, Tensor]:
    """PPO's clipped policy loss (to minimise) and the share of tokens where the clip bites.

    ``advantages`` is ``(B, T)`` or per sequence ``(B,)`` (broadcast over its tokens).
    """
    if advantages.dim() == 1:
        advantages = advantages[:, None]                                   # (B, 1)
    ratio = torch.exp(logp_new - logp_old)                                 # (B, T)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1 - clip_eps, 1 + clip_eps)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask)
    clip_fraction = masked_mean((clipped > unclipped).to(ratio.dtype), mask).detach()
    return loss, clip_fraction


def kl_k3(logp: Tensor, logp_ref: Tensor) -> Tensor:
    """Per-token k3 estimate of KL(policy || reference): ``exp(r) - 1 - r``, ``r = ref - new``.

    Non-negative and unbiased for tokens sampled from the policy (Schulman's "Approximating KL
    divergence"); the gradient flows through ``logp``.

    >>> kl_k3(torch.tensor([-1.0, -2.0]), torch.tensor([-1.0, -1.0])).round(decimals=4)
    tensor([0.0000, 0.7183])
    """
    r = logp_ref - logp
    return torch.exp(r) - 1 - r


def approx_kl(logp_new: Tensor, logp_old: Tensor, mask: Tensor) -> Tensor:
    """How far the update moved the policy: masked mean of k3 between old and new (cleanrl)."""
    log_ratio = (logp_new - logp_old).detach()
    return masked_mean(torch.exp(log_ratio) - 1 - log_ratio, mask)


@dataclass(frozen=True)
class LossStats:
    """One micro-batch's :func:`ppo_loss` statistics, token means over its loss mask (the
    fields of ``UpdateStats`` that ``ppo_update`` averages over micro-batches and steps)."""

    policy_loss: float
    kl_ref: float
    clip_fraction: float
    approx_kl: float
    ratio: float
    loss: float
    value_loss: float | None = None
    """Only with values (GAE)."""
    entropy: float | None = None
    """Only when the policy function gives entropy."""


def _item(x: Tensor | None) -> float | None:
    return None if x is None else float(x.detach())


def ppo_loss(logprobs: Tensor, old_logprobs: Tensor, ref_logprobs: Tensor, advantages: Tensor,
             loss_mask: Tensor, *, clip_eps: float, kl_coef: float,
             entropy: Tensor | None = None, values: Tensor | None = None,
             returns: Tensor | None = None, value_coef: float = 0.0,
             ) -> tuple[Tensor, LossStats]:
    """The PPO objective on one micro-batch (a token mean over ``loss_mask``) and its stats.

    ``loss = policy_loss + kl_coef * kl_ref + value_coef * value_loss``; entropy is logged only.
    """
    # 1. Clipped surrogate on the trained tokens.                        # (B, T) -> ()
    pg_loss, clip_fraction = clipped_surrogate(logprobs, old_logprobs, advantages, loss_mask,
                                               clip_eps)
    # 2. KL penalty to the reference policy (adapters disabled), k3 per token.
    kl_ref = masked_mean(kl_k3(logprobs, ref_logprobs), loss_mask)       # ()
    loss = pg_loss + kl_coef * kl_ref
    kl_old = approx_kl(logprobs, old_logprobs, loss_mask)
    # 3. Value loss (GAE only): regress values onto the rollout returns.
    value_loss = None
    if values is not None:
        if returns is None:
            raise ValueError("ppo_loss: values given without returns")
        value_loss = 0.5 * masked_mean((values - returns) ** 2, loss_mask)
        loss = loss + value_coef * value_loss
    # 4. Entropy of the trained tokens, for logging (a collapsing policy shows here first).
    mean_entropy = None if entropy is None else masked_mean(entropy, loss_mask)
    ratio = masked_mean(torch.exp(logprobs - old_logprobs), loss_mask)
    return loss, LossStats(policy_loss=_item(pg_loss), kl_ref=_item(kl_ref),
                           clip_fraction=_item(clip_fraction), approx_kl=_item(kl_old),
                           ratio=_item(ratio), loss=_item(loss), value_loss=_item(value_loss),
                           entropy=_item(mean_entropy))


def _accumulate(total: LossStats | None, mb: LossStats, share: float) -> LossStats:
    """``total + share * mb`` field by field; a field ``mb`` did not measure adds nothing."""
    def plus(name: str) -> float | None:
        a, b = getattr(total, name, None), getattr(mb, name)
        return a if b is None else (0.0 if a is None else a) + b * share
    return LossStats(**{f.name: plus(f.name) for f in fields(LossStats)})


# --- the update ----------------------------------------------------------------------------
class ValueHead(nn.Module):
    """Hidden states ``(B, T, H)`` -> values ``(B, T)``; zero-initialised (values start at 0)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, hidden_states: Tensor) -> Tensor:
        return self.proj(hidden_states).squeeze(-1)


def make_optimizer(params: Iterable[nn.Parameter], cfg: PPOConfig,
                   role: str = "generator") -> torch.optim.AdamW:
    """AdamW over the trainable parameters (the LoRA adapters, plus a value head for GAE), at
    the role's learning rate."""
    trainable = [p for p in params if p.requires_grad]
    if not trainable:
        raise ValueError("make_optimizer: no parameter requires grad (are the adapters on?)")
    return torch.optim.AdamW(trainable, lr=cfg.learning_rate_for(role),
                             weight_decay=cfg.weight_decay)


def mini_batch_rows(n: int, size: int) -> list[Tensor]:
    """Row indices of each optimizer step's mini-batch: ``ceil(n / size)`` strided sets.

    Strided rather than consecutive, so every mini-batch mixes the problems (rows come grouped
    by problem); deterministic, so a replayed update is the same update. ``size`` 0 (or >= n)
    is one mini-batch of every row.

    >>> [r.tolist() for r in mini_batch_rows(6, 2)]
    [[0, 3], [1, 4], [2, 5]]
    """
    m = 1 if size <= 0 else -(-n // size)
    return [torch.arange(j, n, m) for j in range(m)]


def ppo_update(policy_logprobs_fn: PolicyFn, params: Iterable[nn.Parameter],
               optimizer: torch.optim.Optimizer, batch: PackedBatch, cfg: PPOConfig,
               ref_logprobs: Tensor, mode: AdvantageMode | None = None) -> UpdateStats:
    """One PPO update of one role on one step's rollouts; returns its statistics.

    ``mode`` (default: ``cfg.advantage``) says how advantages are made and so which of the
    batch's optional fields it needs (``AdvantageMode.needs``): ``scores`` and ``group_ids``
    (group), ``scores`` (GAE) or precomputed ``advantages`` (given). ``batch.old_logprobs``
    None: step 1 computes them. Micro-batches (row slices of ``batch``, with
    ``ref_logprobs``, advantages and returns attached) go to ``policy_logprobs_fn`` as they
    are. ``ref_logprobs (B, T)`` are the reference policy's log-probs of the same tokens.
    """
    mode = AdvantageMode(cfg.advantage) if mode is None else mode
    missing = batch.missing(mode.needs)
    if missing:
        raise ValueError(f"ppo_update (advantage={mode.value!r}): batch lacks {missing}; "
                         f"it has {batch.present()}")
    gae_mode = mode is AdvantageMode.GAE
    params = [p for p in params if p.requires_grad]
    batch = replace(batch, ref_logprobs=ref_logprobs)
    loss_mask = batch.loss_mask.to(ref_logprobs.dtype)                    # (B, T)
    B = loss_mask.shape[0]
    dead_fraction = explained = None
    learning_rate = float(optimizer.param_groups[0]["lr"])  # what the steps below use

    # 1. Rollout-time log-probs (and values for GAE) of the sampled tokens, without grad.
    if batch.old_logprobs is None or gae_mode:
        old_lp, old_v = [], []
        with torch.no_grad():
            for mb in batch.micro_batches(cfg.micro_batch_size):
                logprobs, _, values = policy_logprobs_fn(mb)
                if gae_mode and values is None:
                    raise ValueError("ppo.advantage='gae' needs values from policy_logprobs_fn")
                old_lp.append(logprobs)
                old_v.append(values)
        if batch.old_logprobs is None:  # recorded ones are kept (GAE runs this for values)
            batch = replace(batch, old_logprobs=torch.cat(old_lp).detach())  # (B, T)

    # 2. Advantages.
    if gae_mode:
        old_values = torch.cat(old_v).detach()                             # (B, T)
        rewards = place_terminal_reward(batch.scores.to(old_values.dtype), loss_mask)
        advantages, returns = gae(rewards, old_values, loss_mask, cfg.gamma, cfg.lam)
        batch = replace(batch, advantages=masked_whiten(advantages, loss_mask),  # (B, T)
                        returns=returns)                                   # (B, T)
        ev = explained_variance(old_values, returns, loss_mask)
        explained = None if math.isnan(ev) else ev  # NaN: the returns do not vary
    elif mode is AdvantageMode.GROUP:
        advantages, live = group_advantages(batch.scores, batch.group_ids)  # (B,), (B,)
        batch = replace(batch, advantages=advantages)
        loss_mask = loss_mask * live[:, None].to(loss_mask.dtype)          # dead groups: off
        dead_fraction = float(1 - live.float().mean())
    batch = replace(batch, loss_mask=loss_mask)

    # 3. Nothing to learn from (every group dead, or no trained token): no step at all, so
    #    weight decay and Adam state do not move the adapters either.
    n_tokens = float(loss_mask.sum())
    if n_tokens == 0:
        return UpdateStats.without_step(learning_rate=learning_rate, n_sequences=B,
                                        dead_sample_fraction=dead_fraction,
                                        explained_variance=explained)

    # 4. Epochs over mini-batches, one clipped optimizer step each. A mini-batch's gradient is
    #    that of its token mean, accumulated over micro-batches weighted by their token share.
    sums: LossStats | None = None
    grad_norms = []
    for _ in range(cfg.epochs):
        for rows in mini_batch_rows(B, cfg.mini_batch_size):
            mini = batch.rows(rows)
            mini_tokens = float(mini.loss_mask.sum())
            if mini_tokens == 0:
                continue
            optimizer.zero_grad(set_to_none=True)
            for mb in mini.micro_batches(cfg.micro_batch_size):
                share = float(mb.loss_mask.sum()) / mini_tokens
                if share == 0:
                    continue
                logprobs, entropy, values = policy_logprobs_fn(mb)         # (b, T) each
                loss, mb_stats = ppo_loss(
                    logprobs, mb.old_logprobs, mb.ref_logprobs, mb.advantages, mb.loss_mask,
                    clip_eps=cfg.clip_epsilon, kl_coef=cfg.kl_coef, entropy=entropy,
                    values=values if gae_mode else None, returns=mb.returns,
                    value_coef=cfg.value_coef)
                (loss * share).backward()
                sums = _accumulate(sums, mb_stats, share)
            # 5. Clip the accumulated gradient (report its norm before clipping) and step.
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)))
            optimizer.step()
    optimizer.zero_grad(set_to_none=True)

    # 6. Statistics: each loss statistic's mean over the optimizer steps.
    n_steps = len(grad_norms)
    mean = LossStats(**{f.name: None if (v := getattr(sums, f.name)) is None else v / n_steps
                        for f in fields(LossStats)})
    return UpdateStats(
        loss=mean.loss, policy_loss=mean.policy_loss, value_loss=mean.value_loss,
        approx_kl=mean.approx_kl, clip_fraction=mean.clip_fraction,
        entropy=0.0 if mean.entropy is None else mean.entropy,
        grad_norm=sum(grad_norms) / n_steps, learning_rate=learning_rate,
        n_sequences=B, n_tokens=int(n_tokens), kl_ref=mean.kl_ref, ratio=mean.ratio,
        dead_sample_fraction=dead_fraction, optimizer_steps=n_steps,
        explained_variance=explained)
