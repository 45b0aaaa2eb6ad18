"""Chains and tests rows of one step: who is sampled, what the models wrote, what parsed.

- ``step_samples``: a step's (problem, sample) pairs, problem-major;
- ``Sampler``: the seam the text comes from (``models.policy.Policies``, or another engine);
- ``sample_stage``: one role writes one chain stage for every sample, in one batched call;
- ``generation_rows``: one chains row per sample from prompts and a generation batch;
- ``parsed_test_rows``: the discriminator's text for a stage parsed into tests rows,
  deduplicated within the text and against the sample's earlier stages;
- ``baseline_rows``: the problems' own tests, once per sample;
- ``texts_by_sample``/``known_tests``/``kept_tests``: the rows read back, per sample.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from configs.names import STAGES
from configs.schema import SamplingConfig
from models.generation import GenerationBatch
from models.parsing import parse_tests
from models.prompts import Prompt, direct_prompt, discriminator_prompt, generator_prompt
from models.stages import StopRule, stop_rule
from pipeline.schedule import step_items
from problems import Problem
from rewards.outcome import normalise_test

SampleKey = tuple[str, int]  # (problem_id, sample_idx)
Row = dict[str, Any]


def step_samples(problems: Sequence[Problem], step: int, problems_per_step: int,
                 samples_per_problem: int) -> list[tuple[Problem, int]]:
    """The (problem, sample_idx) pairs of a step, problem-major (a problem's group is
    contiguous)."""
    return [(p, j) for p in step_items(problems, step, problems_per_step)
            for j in range(samples_per_problem)]


class Sampler(Protocol):
    """Where the chain's text comes from: both roles' current adapters on one base model.
    ``models.policy.Policies`` (transformers ``generate``) is one."""

    def tokenizer_for(self, role: str) -> Any: ...
    def adapter_version(self, role: str) -> str: ...
    def sample(self, role: str, prompts: Sequence[Prompt], sampling: SamplingConfig,
               seed: int, *, stop: StopRule | None = None) -> GenerationBatch: ...


def stage_prompts(sampler: Sampler, role: str, samples: Sequence[tuple[Problem, int]],
                  stage: int, texts: dict[SampleKey, list[str]], max_context_tokens: int, *,
                  direct: bool = False, chain: Sequence[int] = STAGES) -> list[Prompt]:
    """``role``'s prompt for chain stage ``stage`` of every sample: the generator's given the
    problem and its stages before ``stage`` (``direct``: the code stage's prompt with no
    earlier stages, the single-stage baseline), the discriminator's given the problem and
    stages up to ``stage`` (``texts``: each sample's generator texts so far, of the ``chain``'s
    stages: ``configs.ChainConfig.stages``)."""
    tokenizer = sampler.tokenizer_for(role)
    if direct:
        return [direct_prompt(tokenizer, p, max_context_tokens) for p, _ in samples]
    build = generator_prompt if role == "generator" else discriminator_prompt
    return [build(tokenizer, p, stage, texts.get((p.id, j), []), max_context_tokens, chain)
            for p, j in samples]


def sample_stage(sampler: Sampler, role: str, samples: Sequence[tuple[Problem, int]],
                 stage: int, texts: dict[SampleKey, list[str]], *, sampling: SamplingConfig,
                 max_context_tokens: int, seed: int, direct: bool = False,
                 chain: Sequence[int] = STAGES) -> tuple[list[Row], GenerationBatch]:
    """``role`` writes chain stage ``stage`` for every sample in one batched call
    (:func:`stage_prompts`). Returns the chains rows, in sample order, and the batch."""
    prompts = stage_prompts(sampler, role, samples, stage, texts, max_context_tokens,
                            direct=direct, chain=chain)
    batch = sample_prompts(sampler, role, prompts, stage, sampling, seed)
    rows = generation_rows(samples, prompts, batch, stage=stage, role=role,
                           adapter_version=sampler.adapter_version(role), seed=seed)
    return rows, batch


def sample_prompts(sampler: Sampler, role: str, prompts: Sequence[Prompt], stage: int,
                   sampling: SamplingConfig, seed: int) -> GenerationBatch:
    """``role`` samples ``prompts`` of chain ``stage`` with that output's token budget and,
    with ``sampling.stop_early``, its stop rule (``models.stages.stop_rule``)."""
    return sampler.sample(role, prompts, output_sampling(sampling, role, stage), seed,
                          stop=stop_rule(role, stage) if sampling.stop_early else None)


def output_sampling(sampling: SamplingConfig, role: str, stage: int) -> SamplingConfig:
    """``sampling`` with ``role``'s token budget at ``stage`` (``SamplingConfig.budget``) as
    its ``max_new_tokens``, the one budget a sampler reads."""
    budget = sampling.budget(role, stage)
    return replace(sampling, max_new_tokens=budget, stage_max_new_tokens=None,
                   test_max_new_tokens=None)


def generation_rows(samples: Sequence[tuple[Problem, int]], prompts: Sequence[Prompt],
                    batch: GenerationBatch, *, stage: int, role: str, adapter_version: str,
                    seed: int) -> list[Row]:
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
            "latency_s": batch.seconds / max(len(batch.generations), 1),  # the call's share
            "adapter_version": adapter_version, "seed": seed,
        })
    return rows


def parsed_test_rows(samples: Sequence[tuple[Problem, int]], texts: Sequence[str], stage: int,
                     seen: dict[SampleKey, dict[str, str]]) -> list[Row]:
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


def baseline_rows(samples: Sequence[tuple[Problem, int]]) -> list[Row]:
    """The problems' own tests, once per sample (stage 0, origin ``baseline``)."""
    return [{"stage": 0, "problem_id": p.id, "sample_idx": j, "test_idx": i,
             "test_id": f"b.{i}", "origin": "baseline", "snippet": t, "parse_status": "ok",
             "drop_reason": None, "is_duplicate": False, "duplicate_of": None}
            for p, j in samples for i, t in enumerate(p.baseline_tests)]


def texts_by_sample(rows_by_stage: Sequence[Iterable[Row]]) -> dict[SampleKey, list[str]]:
    """Chains rows of stages 1..k (one iterable per stage, in order) -> each sample's texts
    in stage order."""
    out: dict[SampleKey, list[str]] = {}
    for rows in rows_by_stage:
        for r in rows:
            out.setdefault((r["problem_id"], r["sample_idx"]), []).append(r["output_text"])
    return out


def kept_tests(rows: Iterable[Row]) -> dict[SampleKey, list[Row]]:
    """The tests that run, per sample: parsed, first copies only, in (stage, index) order."""
    out: dict[SampleKey, list[Row]] = {}
    for r in rows:
        if r["parse_status"] == "ok" and not r["is_duplicate"]:
            out.setdefault((r["problem_id"], r["sample_idx"]), []).append(r)
    return {k: sorted(v, key=lambda r: (r["stage"], r["test_idx"])) for k, v in out.items()}


def peer_tests(rows: Iterable[Row]) -> dict[SampleKey, list[Row]]:
    """Each sample's peer tests: the discriminator tests kept for the *other* samples of its
    problem (``rewards.peer_tests``), less any test equal to one the sample already has,
    first copies only, in (peer sample, stage, index) order. A peer row is its source row with
    ``origin="peer"``, this sample's ``sample_idx`` and a ``test_id`` naming the source
    (``p<sample>.<test_id>``), so the executions table tells the two copies apart.

    >>> rows = [{"problem_id": "p", "sample_idx": j, "stage": 2, "test_idx": 0,
    ...          "test_id": "s2.0", "origin": o, "snippet": s, "parse_status": "ok",
    ...          "is_duplicate": False}
    ...         for j, o, s in [(0, "baseline", "assert f(1) == 1"),
    ...                         (0, "discriminator", "assert f(-1) == 0"),
    ...                         (1, "discriminator", "assert f(-1)  ==  0"),
    ...                         (2, "discriminator", "assert f(9) == 9")]]
    >>> {k: [r["test_id"] for r in v] for k, v in sorted(peer_tests(rows).items())}
    {('p', 0): ['p2.s2.0'], ('p', 1): ['p2.s2.0'], ('p', 2): ['p0.s2.0']}
    """
    kept = kept_tests(rows)
    # each row's normal form once (an AST parse), not once per sample it is a peer test of
    norms = {key: [normalise_test(r["snippet"]) for r in v] for key, v in kept.items()}
    by_problem: dict[str, list[SampleKey]] = {}
    for key in kept:
        by_problem.setdefault(key[0], []).append(key)
    out: dict[SampleKey, list[Row]] = {}
    for keys in by_problem.values():
        for key in keys:
            seen = set(norms[key])
            peers = out.setdefault(key, [])
            for other in sorted(k for k in keys if k != key):
                for r, norm in zip(kept[other], norms[other], strict=True):
                    if r["origin"] != "discriminator" or norm in seen:
                        continue
                    seen.add(norm)
                    peers.append({**r, "origin": "peer", "sample_idx": key[1],
                                  "test_id": f"p{other[1]}.{r['test_id']}"})
    return {k: v for k, v in out.items() if v}


def known_tests(rows: Iterable[Row]) -> dict[SampleKey, dict[str, str]]:
    """Normalised kept tests per sample (test_id by key): the ``seen`` of
    :func:`parsed_test_rows` for a later stage."""
    return {k: {normalise_test(r["snippet"]): r["test_id"] for r in v}
            for k, v in kept_tests(rows).items()}
