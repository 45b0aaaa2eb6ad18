"""Rollout and test generation for one stage of one step.

Pure functions build prompts and rows; the two Prefect tasks read the chain so far from the run
store, call the model once per stage (all problems x samples in one batched ``generate``), and
write their rows back:

- ``rollout(stage)``: generator text for stage s, given the problem and stages 1..s-1
  -> ``chains/part-generator-<s>``;
- ``generate_tests(stage)``: discriminator tests for stage s, given the problem and stages 1..s
  -> ``chains/part-discriminator-<s>`` and ``tests/part-stage-<s>`` (stage 1 also writes
  ``tests/part-baseline`` with the problems' own tests). Tests are parsed, deduplicated within
  the output and against the tests of earlier stages of the same sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from prefect import task
from prefect.cache_policies import NO_CACHE

from artifacts.store import Pointer, RunStore
from models.parsing import parse_tests
from problems import Problem
from rewards.outcome import normalise_test
from tasks.runtime import RunContext
from tasks.schedule import step_items

SampleKey = tuple[str, int]  # (problem_id, sample_idx)


def step_samples(ctx: RunContext, step: int) -> list[tuple[Problem, int]]:
    """The (problem, sample_idx) pairs of a step, problem-major (a problem's group is
    contiguous)."""
    problems = step_items(ctx.problems, step, ctx.cfg.schedule.problems_per_step)
    return [(p, j) for p in problems for j in range(ctx.cfg.sampling.samples_per_problem)]


def chain_texts(store: RunStore, step: int, upto: int) -> dict[SampleKey, list[str]]:
    """Generator texts of stages 1..upto per sample, in stage order."""
    out: dict[SampleKey, dict[int, str]] = {}
    for stage in range(1, upto + 1):
        rows = store.read_table("chains", step=step, part=f"generator-{stage}",
                                columns=["problem_id", "sample_idx", "output_text"]).to_pylist()
        if not rows:
            raise FileNotFoundError(f"{store.run_dir}: step {step} has no generator text for "
                                    f"stage {stage}; run its rollout first")
        for r in rows:
            out.setdefault((r["problem_id"], r["sample_idx"]), {})[stage] = r["output_text"]
    return {k: [v[s] for s in sorted(v)] for k, v in out.items()}


def generation_rows(samples: Sequence[tuple[Problem, int]], prompts: Sequence[Any],
                    batch: Any, *, stage: int, role: str, adapter_version: str,
                    seed: int) -> list[dict[str, Any]]:
    """One chains row per sample from prompts (``models.prompts.Prompt``) and generations."""
    rows = []
    for (problem, j), prompt, gen in zip(samples, prompts, batch.generations, strict=True):
        rows.append({
            "stage": stage, "problem_id": problem.id, "sample_idx": j, "role": role,
            "prompt": prompt.text, "output_text": gen.text,
            "prompt_token_ids": gen.prompt_ids, "output_token_ids": gen.response_ids,
            "output_logprobs": gen.logprobs, "prompt_tokens": len(gen.prompt_ids),
            "output_tokens": len(gen.response_ids),
            "finish_reason": "eos" if gen.finished else "length",
            "latency_s": gen.seconds / max(len(batch.generations), 1),
            "adapter_version": adapter_version, "seed": seed,
        })
    return rows


def parsed_test_rows(samples: Sequence[tuple[Problem, int]], texts: Sequence[str], stage: int,
              seen: dict[SampleKey, dict[str, str]]) -> list[dict[str, Any]]:
    """Parse each sample's discriminator output into tests rows. ``seen`` maps a sample to the
    normalised tests it already has (test_id by key) and is updated: a test equal to an earlier
    one of the same sample is kept as a row but flagged duplicate, so it counts once."""
    rows = []
    for (problem, j), text in zip(samples, texts, strict=True):
        known = seen.setdefault((problem.id, j), {})
        for i, parsed in enumerate(parse_tests(text, problem.entry_point)):
            test_id = f"s{stage}.{i}"
            ok = parsed.status == "ok"
            key = normalise_test(parsed.snippet) if ok else None
            first = known.get(key) if key else None
            rows.append({
                "stage": stage, "problem_id": problem.id, "sample_idx": j,
                "test_idx": i, "test_id": test_id, "origin": "discriminator",
                "snippet": parsed.snippet, "parse_status": parsed.status,
                "drop_reason": None if ok else (parsed.reason or "unparsable"),
                "is_duplicate": bool(first) or parsed.duplicate, "duplicate_of": first,
            })
            if ok and not first:
                known[key] = test_id
    return rows


def baseline_rows(samples: Sequence[tuple[Problem, int]]) -> list[dict[str, Any]]:
    """The problems' own tests, once per sample (stage 0, origin ``baseline``)."""
    return [{"stage": 0, "problem_id": p.id, "sample_idx": j, "test_idx": i,
             "test_id": f"b.{i}", "origin": "baseline", "snippet": t, "parse_status": "ok",
             "drop_reason": None, "is_duplicate": False, "duplicate_of": None}
            for p, j in samples for i, t in enumerate(p.baseline_tests)]


def _generate(ctx: RunContext, role: str, prompts: Sequence[Any], seed: int):
    from models.generation import generate

    model = ctx.policies.model_for(role)
    with torch.no_grad():  # every stage is sampled without gradients (frozen for the update)
        return generate(model, ctx.policies.tokenizer_for(role), [p.ids for p in prompts],
                        ctx.cfg.sampling, seed=seed)


@task(name="rollout", cache_policy=NO_CACHE)
def rollout(ctx: RunContext, step: int, stage: int) -> Pointer:
    """Generator output for ``stage`` over the step's problems x samples."""
    from models.prompts import generator_prompt

    samples = step_samples(ctx, step)
    previous = chain_texts(ctx.store, step, stage - 1) if stage > 1 else {}
    tokenizer = ctx.policies.tokenizer_for("generator")
    prompts = [generator_prompt(tokenizer, p, stage, previous.get((p.id, j), []),
                                ctx.cfg.model.max_context_tokens) for p, j in samples]
    seed = ctx.seed(step, stage, "generator")
    batch = _generate(ctx, "generator", prompts, seed)
    rows = generation_rows(samples, prompts, batch, stage=stage, role="generator",
                           adapter_version=ctx.policies.adapter_version("generator"), seed=seed)
    return ctx.store.write("chains", step, f"generator-{stage}", rows)


@task(name="generate-tests", cache_policy=NO_CACHE)
def generate_tests(ctx: RunContext, step: int, stage: int) -> list[Pointer]:
    """Discriminator tests for ``stage`` given the chain so far; accumulated per sample."""
    from models.prompts import discriminator_prompt

    samples = step_samples(ctx, step)
    chains = chain_texts(ctx.store, step, stage)
    tokenizer = ctx.policies.tokenizer_for("discriminator")
    prompts = [discriminator_prompt(tokenizer, p, stage, chains[(p.id, j)],
                                    ctx.cfg.model.max_context_tokens) for p, j in samples]
    seed = ctx.seed(step, stage, "discriminator")
    batch = _generate(ctx, "discriminator", prompts, seed)
    pointers = [ctx.store.write("chains", step, f"discriminator-{stage}", generation_rows(
        samples, prompts, batch, stage=stage, role="discriminator",
        adapter_version=ctx.policies.adapter_version("discriminator"), seed=seed))]
    seen = earlier_tests(ctx.store, step, stage)
    rows = parsed_test_rows(samples, [g.text for g in batch.generations], stage, seen)
    pointers.append(ctx.store.write("tests", step, f"stage-{stage}", rows))
    if stage == 1:
        pointers.append(ctx.store.write("tests", step, "baseline", baseline_rows(samples)))
    return pointers


def earlier_tests(store: RunStore, step: int, stage: int) -> dict[SampleKey, dict[str, str]]:
    """Normalised kept tests of stages before ``stage``, per sample (for deduplication)."""
    seen: dict[SampleKey, dict[str, str]] = {}
    for s in range(1, stage):
        for r in store.read_table("tests", step=step, part=f"stage-{s}").to_pylist():
            if r["parse_status"] == "ok" and not r["is_duplicate"]:
                seen.setdefault((r["problem_id"], r["sample_idx"]), {})[
                    normalise_test(r["snippet"])] = r["test_id"]
    return seen
