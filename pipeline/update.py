"""PPO update of one role at one training stage, from a step's recorded rollouts and rewards.

The batch is the role's outputs at the trained stage only (stages before it were sampled
without gradients and stay frozen; the loss mask covers exactly these response tokens); its
old log-probs are those recorded at sampling time, the reference log-probs come from the same
model with adapters disabled or, under ``ppo.kl_reference: start``, with the role's reference
adapter (``ppo.micro_batch_size`` rows per forward pass, no gradient).
The batch is packed to tensors once (:func:`build_batch`); every forward pass, reference or
PPO, reads a row slice of them (:func:`logprob_fn`, :func:`reference_logprobs`). Under
``ppo.advantage=gae`` the role's value head (``models.rolestate.RoleState``) reads the same
hidden states and is trained with the adapter. The maths is ``models.ppo.ppo_update``; its
``UpdateStats`` are the updates-table row's statistics.

Masked samples (rewards-table ``masked``: an ``infra`` verdict, ``rewards.SampleOutcome.masked``)
have no reward and are left out of the batch, hence out of their problem's group before
group-relative advantages are computed. A step whose samples are all masked updates nothing.
"""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

import torch

from artifacts.updatestats import UpdateStats
from configs.schema import PPOConfig, SamplingConfig
from models.logprobs import packed_batch, packed_logprobs
from models.ppo import ppo_update
from models.ppobatch import AdvantageMode, PackedBatch
from models.rolestate import RoleState

REWARD_COLUMN = {"generator": "generator_reward", "discriminator": "discriminator_reward"}


def is_masked(reward_row: dict[str, Any], role: str) -> bool:
    """The sample has no ``role`` reward to learn from (masked: an ``infra`` verdict)."""
    return bool(reward_row.get("masked")) or reward_row[REWARD_COLUMN[role]] is None


def build_batch(chains: list[dict[str, Any]], rewards: list[dict[str, Any]], role: str, *,
                pad_token_id: int = 0) -> PackedBatch | None:
    """The batch for ``ppo_update``, packed once on the CPU (``models.logprobs.packed_batch``)
    with what the rollouts recorded: ``old_logprobs`` ``(B, T)``, ``scores`` and ``group_ids``
    ``(B,)`` (group-relative or GAE advantages: both read ``scores``, the group mode
    ``group_ids`` as well). Micro-batches are row slices of it. ``pad_token_id`` only fills
    positions the attention mask hides (any id gives the same log-probs, so the default 0,
    always a valid embedding row, serves every tokenizer).

    ``chains`` are the role's rows at the trained stage; each is scored by its sample's reward
    and grouped by problem (group-relative advantages). Masked samples are left out; when
    every rollout is masked the batch is None (nothing to learn from, not an error).
    """
    reward = {(r["problem_id"], r["sample_idx"]): float(r[REWARD_COLUMN[role]])
              for r in rewards if not is_masked(r, role)}
    rows = [c for c in chains if (c["problem_id"], c["sample_idx"]) in reward]
    if not rows:
        masked = {(r["problem_id"], r["sample_idx"]) for r in rewards if is_masked(r, role)}
        if any((c["problem_id"], c["sample_idx"]) in masked for c in chains):
            return None
        raise ValueError(f"no {role} rollouts with rewards to update on")
    width = max(1, max(len(c["output_token_ids"]) for c in rows))
    batch = packed_batch([c["prompt_token_ids"] for c in rows],
                         [c["output_token_ids"] for c in rows], pad_token_id, "cpu", width)
    old = torch.zeros((len(rows), width))                                # (B, T)
    for i, c in enumerate(rows):
        old[i, :len(c["output_token_ids"])] = torch.tensor(list(c["output_logprobs"]),
                                                           dtype=torch.float32)
    problems = {pid: i for i, pid in enumerate(dict.fromkeys(c["problem_id"] for c in rows))}
    return replace(
        batch, old_logprobs=old,                                         # (B, T)
        scores=torch.tensor([reward[(c["problem_id"], c["sample_idx"])] for c in rows]),
        group_ids=torch.tensor([problems[c["problem_id"]] for c in rows]))  # (B,)


def logprob_fn(model: Any, *, temperature: float, top_p: float = 1.0, value_head: Any = None):
    """``micro_batch -> (logprobs (b, T), entropy (b, T), values (b, T) or None)`` for
    ``ppo_update``: a micro-batch is a row slice of :func:`build_batch`'s packed tensors, read
    as it is (``models.logprobs.packed_logprobs``; values when ``value_head`` is given: GAE)."""
    def fn(mb: PackedBatch):
        out = packed_logprobs(model, mb, temperature=temperature, top_p=top_p,
                              with_entropy=True, value_head=value_head)
        return out.logprobs, out.entropy, out.values
    return fn


def reference_logprobs(model: Any, batch: PackedBatch, *, temperature: float,
                       top_p: float = 1.0, micro_batch_size: int) -> torch.Tensor:
    """``(B, T)`` log-probs of the batch's responses under ``model`` (the caller disables the
    adapters): ``micro_batch_size`` rows per forward pass, as the update's own passes, without
    gradients, entropy or values."""
    with torch.no_grad():
        return packed_logprobs(model, batch, temperature=temperature, top_p=top_p,
                               micro_batch_size=micro_batch_size).logprobs


def update_role(state: RoleState, chains: list[dict[str, Any]], rewards: list[dict[str, Any]],
                *, stage: int, sampling: SamplingConfig, ppo: PPOConfig) -> dict[str, Any]:
    """One PPO update of ``state.role`` on its chains rows at the trained ``stage``, scored by
    the step's rewards rows; returns the updates-table row (``artifacts.schemas.UPDATES``: the
    update's ``UpdateStats`` with the row's keys, duration and adapter versions)."""
    start = time.perf_counter()
    role = state.role
    batch = build_batch(chains, rewards, role)
    before = state.version
    if batch is None:  # every sample masked: no step, the adapter stays as it is
        stats = UpdateStats.without_step(learning_rate=state.learning_rate)
    elif ppo.learning_rate_for(role) == 0:  # nothing can move (an lr-0 control): no passes
        stats = UpdateStats.without_step(learning_rate=0.0, n_sequences=batch.loss_mask.shape[0])
    else:
        stats = _update(state, batch, sampling, ppo)
    duration = time.perf_counter() - start
    return {"stage": stage, "role": role, "update_idx": 0, **asdict(stats),
            "duration_s": duration, "adapter_version_before": before,
            "adapter_version_after": before if batch is None else state.version}


def sampler_mismatch(recorded: torch.Tensor, trainer: torch.Tensor, mask: torch.Tensor,
                     clip_epsilon: float) -> tuple[float, float]:
    """Mean ``|recorded - trainer|`` log-prob over ``mask``ed tokens ``(B, T)``, and the share of
    them whose ratio ``exp(recorded - trainer)`` alone leaves ``[1 - eps, 1 + eps]``.

    >>> m = torch.tensor([[1.0, 1.0, 0.0]])
    >>> sampler_mismatch(torch.tensor([[-1.0, -2.0, -9.0]]), torch.tensor([[-1.0, -2.5, 0.0]]),
    ...                  m, 0.2)
    (0.25, 0.5)
    """
    mask = mask.bool()
    diff = (recorded - trainer)[mask]
    if diff.numel() == 0:
        return 0.0, 0.0
    ratio = diff.exp()
    outside = (ratio < 1 - clip_epsilon) | (ratio > 1 + clip_epsilon)
    return float(diff.abs().mean()), float(outside.float().mean())


def _update(state: RoleState, batch: PackedBatch, sampling: SamplingConfig,
            ppo: PPOConfig) -> UpdateStats:
    """``ppo_update`` of ``state`` on ``batch``: moved to the model's device once, the KL
    reference's log-probs (``ppo.kl_reference``: the base, or the role's adapter as training
    began), the trainer's own log-probs of the sampled tokens with the adapter that sampled
    them (the sampler mismatch), which are the ratio's old log-probs: both samplers run the
    adapter merged into the base weights (``models.merged``), whose rounding differs from the
    trainer's LoRA layers, so their recorded ones would bias the ratio; then the update in
    train mode."""
    policies = state.policies
    if ppo.kl_reference == "start" and not policies.has_reference(state.role):
        raise RuntimeError(f"ppo.kl_reference='start' but {state.role} has no reference adapter "
                           "(RunContext.fix_reference saves and attaches it as training begins)")
    model = policies.model_for(state.role)
    device = next(model.parameters()).device                             # moved there once
    batch = batch.to(device)
    temperature, top_p = sampling.temperature, sampling.top_p
    with policies.reference(state.role) as ref_model:            # base or start, no grad
        ref = reference_logprobs(ref_model, batch, temperature=temperature, top_p=top_p,
                                 micro_batch_size=ppo.micro_batch_size)  # (B, T)
    own = reference_logprobs(policies.model_for(state.role), batch, temperature=temperature,
                             top_p=top_p, micro_batch_size=ppo.micro_batch_size)  # (B, T)
    mismatch, share = sampler_mismatch(batch.old_logprobs, own, batch.loss_mask,
                                       ppo.clip_epsilon)
    batch = replace(batch, old_logprobs=own)
    model.train()
    try:
        stats = ppo_update(logprob_fn(model, temperature=temperature, top_p=top_p,
                                      value_head=state.value_head),
                           state.parameters(), state.optimizer, batch, ppo, ref,
                           AdvantageMode(ppo.advantage))
    finally:
        model.eval()
    return replace(stats, logprob_mismatch=mismatch, logprob_mismatch_share=share)
