"""PPO update of one role at one training stage, from a step's recorded rollouts and rewards.

The batch is the role's outputs at the trained stage only (stages before it were sampled
without gradients and stay frozen; the loss mask covers exactly these response tokens); its
old log-probs are those recorded at sampling time, the reference log-probs come from the same
model with adapters disabled. Under ``ppo.advantage=gae`` the role's value head (from the run
context) reads the same hidden states and is trained with the adapter. The maths is
``models.ppo.ppo_update``.

Masked samples (rewards-table ``masked``: an ``infra`` verdict, ``rewards.SampleOutcome.masked``)
have no reward and are left out of the batch, hence out of their problem's group before
group-relative advantages are computed. A step whose samples are all masked updates nothing.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from prefect import task
from prefect.cache_policies import NO_CACHE

from artifacts.store import Pointer
from tasks.runtime import RunContext

REWARD_COLUMN = {"generator": "generator_reward", "discriminator": "discriminator_reward"}


def is_masked(reward_row: dict[str, Any], role: str) -> bool:
    """The sample has no ``role`` reward to learn from (masked: an ``infra`` verdict)."""
    return bool(reward_row.get("masked")) or reward_row[REWARD_COLUMN[role]] is None


def build_batch(chains: list[dict[str, Any]], rewards: list[dict[str, Any]], role: str
                ) -> dict[str, Any] | None:
    """Tensors for ``ppo_update`` plus the token lists the log-prob function needs.

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
    old = torch.zeros((len(rows), width))                                # (B, T)
    mask = torch.zeros((len(rows), width))                               # (B, T)
    for i, c in enumerate(rows):
        n = len(c["output_token_ids"])
        old[i, :n] = torch.tensor(list(c["output_logprobs"]), dtype=torch.float32)
        mask[i, :n] = 1.0
    problems = {pid: i for i, pid in enumerate(dict.fromkeys(c["problem_id"] for c in rows))}
    return {
        "row_index": torch.arange(len(rows)),                            # (B,)
        "scores": torch.tensor([reward[(c["problem_id"], c["sample_idx"])] for c in rows]),
        "group_ids": torch.tensor([problems[c["problem_id"]] for c in rows]),   # (B,)
        "old_logprobs": old, "loss_mask": mask,
        "prompt_ids": [list(c["prompt_token_ids"]) for c in rows],
        "response_ids": [list(c["output_token_ids"]) for c in rows],
    }


def logprob_fn(ctx: RunContext, role: str, batch: dict[str, Any], model: Any,
               value_head: Any = None):
    """``micro_batch -> (logprobs (b, T), entropy (b, T), values (b, T) or None)`` on the
    batch's tokens (values when ``value_head`` is given: GAE)."""
    from models.logprobs import response_logprobs

    sampling = ctx.cfg.sampling
    pad = ctx.policies.tokenizer_for(role).pad_token_id
    width = batch["loss_mask"].shape[1]

    def fn(mb: dict[str, Any]):
        rows = mb["row_index"].tolist()
        out = response_logprobs(model, [batch["prompt_ids"][r] for r in rows],
                                [batch["response_ids"][r] for r in rows],
                                temperature=sampling.temperature, top_p=sampling.top_p,
                                pad_token_id=pad, micro_batch_size=len(rows),
                                with_entropy=True, value_head=value_head)
        pad_cols = width - out.logprobs.shape[1]                          # (b, t) -> (b, T)
        logprobs = torch.nn.functional.pad(out.logprobs, (0, pad_cols))
        entropy = torch.nn.functional.pad(out.entropy, (0, pad_cols))
        values = None if out.values is None else torch.nn.functional.pad(out.values,
                                                                         (0, pad_cols))
        return logprobs, entropy, values
    return fn


def run_update(ctx: RunContext, step: int, role: str, stage: int) -> dict[str, Any]:
    """One PPO update; returns the updates-table row."""
    from models.ppo import ppo_update

    start = time.perf_counter()
    chains = ctx.store.read_table("chains", step=step, part=f"{role}-{stage}").to_pylist()
    rewards = ctx.store.read_table("rewards", step=step).to_pylist()
    batch = build_batch(chains, rewards, role)
    policies = ctx.policies
    before = policies.adapter_version(role)
    if batch is None:  # every sample masked: no step, the adapter stays as it is
        return {
            "stage": stage, "role": role, "update_idx": 0, "loss": 0.0, "policy_loss": None,
            "value_loss": None, "approx_kl": 0.0, "clip_fraction": 0.0, "entropy": 0.0,
            "grad_norm": 0.0, "learning_rate": ctx.optimizers[role].param_groups[0]["lr"],
            "n_sequences": 0, "n_tokens": 0, "duration_s": time.perf_counter() - start,
            "adapter_version_before": before, "adapter_version_after": before,
        }
    with policies.reference(role) as ref_model:                          # adapters off, no grad
        ref = logprob_fn(ctx, role, batch, ref_model)(batch)[0]          # (B, T)
    model = policies.model_for(role)
    model.train()
    try:
        stats = ppo_update(logprob_fn(ctx, role, batch, model, ctx.value_heads.get(role)),
                           ctx.trainable_parameters(role), ctx.optimizers[role], batch,
                           ctx.cfg.ppo, ref)
    finally:
        model.eval()
    return {
        "stage": stage, "role": role, "update_idx": 0,
        "loss": stats.get("loss", 0.0), "policy_loss": stats.get("pg_loss"),
        "value_loss": stats.get("value_loss"), "approx_kl": stats.get("approx_kl", 0.0),
        "clip_fraction": stats.get("clip_fraction", 0.0), "entropy": stats.get("entropy", 0.0),
        "grad_norm": stats.get("grad_norm", 0.0),
        "learning_rate": ctx.optimizers[role].param_groups[0]["lr"],
        "n_sequences": int(batch["loss_mask"].shape[0]), "n_tokens": int(stats["n_tokens"]),
        "duration_s": time.perf_counter() - start,
        "adapter_version_before": before,
        "adapter_version_after": policies.adapter_version(role),
    }


@task(name="ppo-update", cache_policy=NO_CACHE)  # never retried: an update is not idempotent
def ppo_update_task(ctx: RunContext, step: int, role: str, stage: int) -> Pointer:
    """Update ``role``'s adapter on the trained stage's tokens -> ``updates/part-<role>``."""
    row = run_update(ctx, step, role, stage)
    return ctx.store.write("updates", step, role, [row])
