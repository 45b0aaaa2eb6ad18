"""Supervised LoRA warm start: teach a tiny random model the shape of the task.

A random-init model never writes code that parses, so every reward is zero and PPO has no
signal. The warm start fits both adapters, by teacher forcing, to the real stage prompts with
simple targets: short stage texts for stages 1-4, the reference solution in a fenced block for
stage 5 (generator), and the problem's baseline tests (discriminator); a procedural family's
problems get its deliberately imperfect chain instead (:func:`chain_targets`). Real instruct models
skip it (``warm_start.enabled: false``).
"""

from __future__ import annotations

import random
import time
from typing import Any

import torch

from configs.learning import ChainConfig
from configs.names import CODE_STAGE, ROLES, STAGES
from configs.schema import WarmStartConfig
from models.logprobs import response_logprobs
from models.prompts import discriminator_prompt, generator_prompt
from pipeline.progress import WorkProgress
from problems import Problem
from problems.family import formulaic_stages, is_family, warm_chain


def chain_targets(problem: Problem, ideal: bool = False) -> tuple[list[str], list[list[str]]]:
    """What the warm start teaches for ``problem``: the generator's five stage texts (the last
    one runnable code in a fenced block) and the discriminator's tests at each stage.

    A procedural family's problems get its deliberately imperfect chain
    (``problems.family.warm_chain``), or with ``ideal`` the same chain without its flaws (what
    ``pipeline.basefit`` fits a base on); any other problem formulaic stages 1-4 (short on
    purpose: a tiny model learns them quickly, so the code stage's prompt holds clean earlier
    stages), its reference solution and its baseline tests at every stage.
    """
    if is_family(problem):
        return warm_chain(problem.id, ideal)
    code = f"```python\n{problem.reference_solution.strip()}\n```"
    return ([*formulaic_stages(problem.entry_point), code],
            [list(problem.baseline_tests)] * len(STAGES))


CODE_WEIGHT = 3  # stage-5 examples are repeated: the code is what rewards depend on


def warm_start_examples(problems: list[Problem], tokenizer: Any, max_context_tokens: int,
                        ideal: bool = False, chain: ChainConfig | None = None
                        ) -> dict[str, list[tuple[list[int], list[int]]]]:
    """``role -> [(prompt_ids, target_ids)]`` over every problem and every stage of the run's
    ``chain`` (default the whole chain; the discriminator's only where it tests), with the
    prompts the chain's steps build (``ideal``: see :func:`chain_targets`)."""
    chain = chain or ChainConfig()
    eos = tokenizer.eos_token or ""
    out: dict[str, list[tuple[list[int], list[int]]]] = {role: [] for role in ROLES}
    for problem in problems:
        texts, stage_tests = chain_targets(problem, ideal)
        for stage in chain.stages:
            examples = [("generator", generator_prompt(
                tokenizer, problem, stage, [texts[s - 1] for s in chain.before(stage)],
                max_context_tokens, chain.stages), texts[stage - 1])]
            if stage in chain.test_stages:
                tests = "\n".join(stage_tests[stage - 1])
                examples.append(("discriminator", discriminator_prompt(
                    tokenizer, problem, stage, [texts[s - 1] for s in chain.upto(stage)],
                    max_context_tokens, chain.stages), f"```python\n{tests}\n```"))
            for role, prompt, target in examples:
                ids = tokenizer(target + eos, add_special_tokens=False)["input_ids"]
                repeat = CODE_WEIGHT if role == "generator" and stage == CODE_STAGE else 1
                out[role].extend([(prompt.ids, list(ids))] * repeat)
    return out


def supervised_steps(model: Any, params: list[torch.nn.Parameter],
                     examples: list[tuple[list[int], list[int]]], *, steps: int, lr: float,
                     batch_size: int, pad_token_id: int, seed: int,
                     report: Any = None) -> list[float]:
    """Teacher-forced cross-entropy on the targets; returns the loss of every step.
    ``report(step, loss)``, when given, is called after every step."""
    optimizer = torch.optim.AdamW(params, lr=lr)
    rng = random.Random(seed)
    losses = []
    model.train()
    try:
        for _ in range(steps):
            batch = rng.sample(examples, min(batch_size, len(examples)))
            out = response_logprobs(model, [p for p, _ in batch], [t for _, t in batch],
                                    temperature=1.0, pad_token_id=pad_token_id,
                                    micro_batch_size=batch_size)
            mask = out.mask.float()                                       # (B, T)
            loss = -(out.logprobs * mask).sum() / mask.sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
            if report is not None:
                report(len(losses), losses[-1])
    finally:
        model.eval()
    return losses


def fit_roles(policies: Any, problems: list[Problem], cfg: WarmStartConfig,
              max_context_tokens: int, seed_for: Any,
              chain: ChainConfig | None = None) -> dict[str, float]:
    """Fit the adapters of ``cfg.roles`` on the run's ``chain``; returns steps, first/last
    loss and seconds per role (``warm_start/*``). ``seed_for(role)`` is the role's seed. A
    role the chain gives nothing to write (the discriminator of a chain without it) is not
    fitted."""
    stats: dict[str, float] = {}
    examples = warm_start_examples(problems, policies.tokenizer_for("generator"),
                                   max_context_tokens, chain=chain)
    for role, role_examples in examples.items():
        if role not in cfg.roles or not role_examples:
            continue
        start = time.perf_counter()
        steps = cfg.steps_for(role)
        with WorkProgress(f"warm start {role}", steps, "steps") as progress:
            def report(step: int, loss: float, progress: WorkProgress = progress) -> None:
                progress.advance(1, f"loss {loss:.3f}")  # a user waits minutes here

            losses = supervised_steps(
                policies.model_for(role), policies.trainable_parameters(role), role_examples,
                steps=steps, lr=cfg.learning_rate, batch_size=cfg.batch_size,
                pad_token_id=policies.tokenizer_for(role).pad_token_id,
                seed=seed_for(role), report=report)
        stats[f"warm_start/{role}_steps"] = len(losses)
        if losses:
            stats[f"warm_start/{role}_first_loss"] = losses[0]
            stats[f"warm_start/{role}_last_loss"] = losses[-1]
        stats[f"warm_start/{role}_seconds"] = time.perf_counter() - start
    return stats
