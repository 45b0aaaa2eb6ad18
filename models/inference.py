"""Inference: the five-stage chain for new problems, from any model the registry or a path names.

    from models.inference import InferenceEngine, format_result
    engine = InferenceEngine.load("tiny-generator@champion")       # registry alias (or version:
    result = engine.solve_problem(problem)                          #  models:/tiny-generator/3)
    print(format_result(result))

``InferenceEngine.load(model)`` accepts every spec of :mod:`models.sources`: a registry alias
or version (downloaded and hash-verified, on the base model recorded with it), a logged or
local checkpoint, an adapter folder, or a base model with fresh adapters. With
``discriminator="auto"`` the sibling ``...-discriminator`` under the same alias is loaded too.

Generation is batched per stage over problems x samples and uses the config's sampling
(temperature, top-p, ``max_new_tokens``): pass@k needs samples, so there is no greedy mode.
Times are per sample: its share of each stage's batched ``generate`` call. No Prefect here.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from configs.errors import ConfigError
from configs.names import CODE_STAGE, STAGES
from configs.schema import LoraConfig, TrainConfig
from models.seeds import derive_seed
from models.sources import ModelSource, resolve_source, sibling
from models.stages import get_stage
from problems import Problem

REASONING_STAGES = STAGES[:-1]  # every stage before the code


def _lora_from_adapter(folder: Path, fallback: LoraConfig) -> LoraConfig:
    """The adapter's own rank, alpha and targets: ``Policies.load_adapter`` refuses others."""
    data = json.loads((folder / "adapter_config.json").read_text())
    targets = data.get("target_modules")
    targets = tuple(sorted(targets)) if isinstance(targets, list | tuple) else None
    return replace(fallback, r=int(data.get("r", fallback.r)),
                   alpha=int(data.get("lora_alpha", fallback.alpha)), target_modules=targets)


# --- results ---------------------------------------------------------------------------------
@dataclass
class InferenceResult:
    """One problem worked through the chain (or the direct single-stage baseline)."""

    problem: Problem
    sample_idx: int
    reasoning_chain: list[str]
    """Generator outputs of stages 1-4 (empty for the direct baseline)."""
    generated_code: str
    """Stage-5 output as generated (prose and fences included)."""
    code: str | None
    """The parsed implementation of the entry point; ``None`` when there is none that compiles."""
    code_reason: str
    stage_times: list[float]
    """Seconds per generator stage (this sample's share of each batched call)."""
    mode: str = "chain"  # chain | direct
    execution_result: Any = None
    """``sandbox.ExecutionResult`` of the code against the tests; ``None`` when not executed
    or when there was no code."""
    executed_tests: list[str] = field(default_factory=list)
    test_texts: list[str] = field(default_factory=list)
    """The discriminator's raw output per stage (when it was asked)."""
    tests: list[tuple[int, str]] = field(default_factory=list)
    """Parsed, deduplicated discriminator tests as (stage, snippet)."""
    test_times: list[float] = field(default_factory=list)
    execution_time: float = 0.0
    finished: list[bool] = field(default_factory=list)
    """Per stage: ended with a stop token (False: cut at ``max_new_tokens``)."""

    @property
    def problem_description(self) -> str:
        return self.problem.description

    @property
    def inference_time(self) -> float:
        """Generation seconds of the generator's stages (tests and execution excluded)."""
        return float(sum(self.stage_times))

    @property
    def total_time(self) -> float:
        return self.inference_time + float(sum(self.test_times)) + self.execution_time

    @property
    def passed(self) -> bool:
        """The code passed every executed test (at least one)."""
        return self.execution_result is not None and self.execution_result.all_passed

    def to_dict(self) -> dict[str, Any]:
        ex = self.execution_result
        return {"problem_id": self.problem.id, "sample_idx": self.sample_idx, "mode": self.mode,
                "reasoning_chain": self.reasoning_chain, "generated_code": self.generated_code,
                "code": self.code, "code_reason": self.code_reason, "passed": self.passed,
                "execution": None if ex is None else {
                    "passed": ex.passed, "total": ex.total, "isolation": ex.isolation,
                    "statuses": [o.status for o in ex.outcomes]},
                "tests": [{"stage": s, "snippet": t} for s, t in self.tests],
                "stage_times": self.stage_times, "inference_time": self.inference_time,
                "test_times": self.test_times, "execution_time": self.execution_time}


# --- the engine ------------------------------------------------------------------------------
class InferenceEngine:
    """Policies in eval mode plus the config's sampling and sandbox settings."""

    def __init__(self, policies: Any, cfg: TrainConfig,
                 sources: dict[str, ModelSource | None]) -> None:
        self.policies = policies
        self.cfg = cfg
        self.sources = sources

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def load(cls, model: str | None = None, cfg: TrainConfig | None = None, *,
             discriminator: str | None = "auto", tracker: Any = None) -> InferenceEngine:
        """Load the generator from ``model`` (default: the config's base model) and the
        discriminator from ``discriminator`` (``"auto"``: the registry sibling when there is
        one; ``None`` or not found: fresh adapter on the generator's base)."""
        cfg = cfg or TrainConfig()
        if cfg.model.cpu_threads:
            torch.set_num_threads(cfg.model.cpu_threads)
        workdir = Path(tempfile.mkdtemp(prefix="inference-"))
        gen = resolve_source(model or cfg.model.generator, cfg, workdir, tracker)
        disc = None
        if discriminator == "auto":
            other = sibling(gen.spec)
            if other:
                try:
                    disc = resolve_source(other, cfg, workdir, tracker)
                except ValueError:  # no discriminator under that alias: fresh adapter
                    disc = None
        elif discriminator:
            disc = resolve_source(discriminator, cfg, workdir, tracker)
        return cls.from_sources(gen, disc, cfg)

    @classmethod
    def from_checkpoint(cls, path: str | Path, cfg: TrainConfig | None = None,
                        discriminator: str | Path | None = None) -> InferenceEngine:
        """The seed's ``from_checkpoint``: a checkpoint/adapter folder or ``runs:/`` URI."""
        return cls.load(str(path), cfg, discriminator=str(discriminator) if discriminator
                        else None)

    @classmethod
    def from_sources(cls, gen: ModelSource, disc: ModelSource | None,
                     cfg: TrainConfig) -> InferenceEngine:
        from models.policy import Policies

        gen_base = gen.base_model or cfg.model.generator
        disc_base = (disc.base_model if disc else None) or gen_base
        shared = gen_base == disc_base or (
            Path(gen_base).exists() and Path(gen_base).resolve() == Path(disc_base).resolve())
        model_cfg = replace(
            cfg.model, generator=gen_base, discriminator=None if shared else disc_base,
            layout="shared" if shared else "separate", dtype=gen.dtype or cfg.model.dtype,
            tiny=cfg.model.tiny and gen_base == cfg.model.generator)
        lora = cfg.lora
        adapters = {r: s.adapter_dir for r, s in (("generator", gen), ("discriminator", disc))
                    if s is not None and s.adapter_dir is not None}
        loras = {r: _lora_from_adapter(p, cfg.lora) for r, p in adapters.items()}
        if loras:
            lora = loras.get("generator") or loras["discriminator"]
            other = loras.get("discriminator", lora)
            if (other.r, other.alpha, other.target_modules) != (
                    lora.r, lora.alpha, lora.target_modules):
                raise ConfigError(f"generator adapter (r={lora.r}, alpha={lora.alpha}) and "
                                  f"discriminator adapter (r={other.r}, alpha={other.alpha}) "
                                  "differ; load them in two engines")
        policies = Policies.load(model_cfg, lora)
        for role, folder in adapters.items():
            policies.load_adapter(role, folder)
        policies.activate("generator")
        return cls(policies, replace(cfg, model=model_cfg, lora=lora),
                   {"generator": gen, "discriminator": disc})

    def describe(self) -> str:
        gen, disc = self.sources["generator"], self.sources["discriminator"]
        return (f"generator: {gen.describe()}; discriminator: "
                f"{disc.describe() if disc else 'fresh adapter on the base model'}")

    # -- generation ---------------------------------------------------------------------------
    def _sample(self, role: str, prompts: Sequence[Any], seed: int):
        from models.generation import sample_role

        return sample_role(self.policies, role, prompts, self.cfg.sampling, seed)

    def _pairs(self, problems: Sequence[Problem], samples: int) -> list[tuple[Problem, int]]:
        if samples < 1:
            raise ValueError(f"samples={samples!r}: must be >= 1")
        return [(p, j) for p in problems for j in range(samples)]

    def _chains(self, pairs: list[tuple[Problem, int]], stages: Sequence[int], seed: int,
                mode: str) -> tuple[list[list[str]], list[list[float]], list[list[bool]]]:
        from models.prompts import direct_prompt, generator_prompt

        tokenizer = self.policies.tokenizer_for("generator")
        texts: list[list[str]] = [[] for _ in pairs]
        times: list[list[float]] = [[] for _ in pairs]
        done: list[list[bool]] = [[] for _ in pairs]
        for stage in stages:
            limit = self.cfg.model.max_context_tokens
            if mode == "direct":
                prompts = [direct_prompt(tokenizer, p, limit) for p, _ in pairs]
            else:
                prompts = [generator_prompt(tokenizer, p, stage, prev, limit)
                           for (p, _), prev in zip(pairs, texts, strict=True)]
            batch = self._sample("generator", prompts, derive_seed(seed, mode, stage, "generator"))
            share = batch.seconds / max(len(pairs), 1)
            for i, gen in enumerate(batch.generations):
                texts[i].append(gen.text)
                times[i].append(share)
                done[i].append(gen.finished)
        return texts, times, done

    def generate(self, problems: Sequence[Problem], samples: int = 1, *, mode: str = "chain",
                 seed: int | None = None) -> list[InferenceResult]:
        """Generator output for problems x samples, problem-major. ``mode="chain"``: the five
        stages; ``"direct"``: the stage-5 prompt alone (the single-stage baseline)."""
        from models.parsing import parse_code

        if mode not in ("chain", "direct"):
            raise ValueError(f"mode={mode!r}: must be 'chain' or 'direct'")
        seed = self.cfg.sampling.seed if seed is None else seed
        pairs = self._pairs(problems, samples)
        stages = STAGES if mode == "chain" else (CODE_STAGE,)
        texts, times, done = self._chains(pairs, stages, seed, mode)
        out = []
        for (problem, j), t, s, f in zip(pairs, texts, times, done, strict=True):
            parsed = parse_code(t[-1], problem.entry_point)
            out.append(InferenceResult(
                problem=problem, sample_idx=j, reasoning_chain=list(t[:-1]),
                generated_code=t[-1], code=parsed.code if parsed.ok else None,
                code_reason=parsed.reason or ("ok" if parsed.ok else "no code"),
                stage_times=s, mode=mode, finished=f))
        return out

    def write_tests(self, results: Sequence[InferenceResult], seed: int | None = None) -> None:
        """The discriminator's tests for every stage of each chain (in place): raw texts and
        the parsed, deduplicated snippets."""
        from models.parsing import parse_tests
        from models.prompts import discriminator_prompt
        from rewards.outcome import normalise_test

        chains = [r for r in results if r.mode == "chain"]
        if not chains:
            return
        seed = self.cfg.sampling.seed if seed is None else seed
        tokenizer = self.policies.tokenizer_for("discriminator")
        seen: list[set[str]] = [set() for _ in chains]
        for r in chains:
            r.test_texts, r.tests, r.test_times = [], [], []
        for stage in STAGES:
            prompts = [discriminator_prompt(tokenizer, r.problem, stage,
                                            (r.reasoning_chain + [r.generated_code])[:stage],
                                            self.cfg.model.max_context_tokens) for r in chains]
            batch = self._sample("discriminator", prompts, derive_seed(seed, "tests", stage))
            share = batch.seconds / len(chains)
            for r, known, gen in zip(chains, seen, batch.generations, strict=True):
                r.test_texts.append(gen.text)
                r.test_times.append(share)
                for parsed in parse_tests(gen.text, r.problem.entry_point):
                    key = normalise_test(parsed.snippet)
                    if parsed.status == "ok" and key not in known:
                        known.add(key)
                        r.tests.append((stage, parsed.snippet))
        self.policies.activate("generator")

    def execute(self, results: Sequence[InferenceResult], with_tests: bool = False) -> None:
        """Run each result's code against the problem's baseline tests (plus its discriminator
        tests with ``with_tests``) in the sandbox, in place. No code: no execution result."""
        from sandbox import execute_many, options_from_config

        todo = [r for r in results if r.code is not None]
        jobs = []
        for r in todo:
            r.executed_tests = list(r.problem.baseline_tests) + (
                [t for _, t in r.tests] if with_tests else [])
            jobs.append((r.problem.program(r.code), r.executed_tests))
        todo_jobs = [(r, job) for r, job in zip(todo, jobs, strict=True) if job[1]]
        if not todo_jobs:
            return
        t0 = time.perf_counter()
        outs = execute_many([job for _, job in todo_jobs], **options_from_config(self.cfg.sandbox))
        share = (time.perf_counter() - t0) / len(todo_jobs)
        for (r, _), out in zip(todo_jobs, outs, strict=True):
            r.execution_result, r.execution_time = out, share

    # -- the seed's API -----------------------------------------------------------------------
    def solve_batch(self, problems: Sequence[Problem], samples: int = 1, *,
                    execute: bool = True, with_tests: bool = False) -> list[InferenceResult]:
        """The chain for every problem (``samples`` each), optionally discriminator tests and
        execution against the problem's tests."""
        results = self.generate(problems, samples)
        if with_tests:
            self.write_tests(results)
        if execute:
            self.execute(results, with_tests=with_tests)
        return results

    def solve_problem(self, problem: Problem, *, execute: bool = True,
                      with_tests: bool = False) -> InferenceResult:
        return self.solve_batch([problem], 1, execute=execute, with_tests=with_tests)[0]

    def get_reasoning_chain(self, problem: Problem) -> list[str]:
        """Stages 1-4 only: no code is generated or executed."""
        pairs = self._pairs([problem], 1)
        texts, _, _ = self._chains(pairs, REASONING_STAGES, self.cfg.sampling.seed, "chain")
        return texts[0]


# --- printing --------------------------------------------------------------------------------
def _indent(text: str, prefix: str = "    ") -> str:
    body = text.strip() or "(empty)"
    return "\n".join(prefix + line for line in body.splitlines())


def format_result(result: InferenceResult) -> str:
    """The chain as people read it: stages, code, tests, execution, timing."""
    r = result
    lines = [f"=== {r.problem.id} (sample {r.sample_idx}, {r.mode}) ===",
             _indent(r.problem.description.strip(), "  ")]
    stages = list(REASONING_STAGES) if r.mode == "chain" else []
    for stage, text, secs in zip(stages, r.reasoning_chain, r.stage_times, strict=False):
        lines += [f"--- stage {stage}: {get_stage(stage).name} ({secs:.2f}s)", _indent(text)]
    lines += [f"--- stage 5: {get_stage(5).name} ({r.stage_times[-1]:.2f}s)",
              _indent(r.generated_code),
              f"--- parsed code: {'ok' if r.code is not None else r.code_reason}"]
    if r.code is not None:
        lines.append(_indent(r.code))
    if r.test_texts:
        lines.append(f"--- discriminator tests ({len(r.tests)} kept)")
        lines += [f"    [stage {s}] {t.splitlines()[0]}" + (" ..." if "\n" in t else "")
                  for s, t in r.tests] or ["    (none parsed)"]
    ex = r.execution_result
    if ex is None:
        lines.append("--- execution: not run" + ("" if r.code is not None else " (no code)"))
    else:
        lines.append(f"--- execution: {ex.passed}/{ex.total} tests passed "
                     f"(isolation {ex.isolation})")
        for test, o in zip(r.executed_tests, ex.outcomes, strict=False):
            first = test.strip().splitlines()[0] if test.strip() else test
            lines.append(f"    {o.status:<8} {first[:90]}")
    lines.append(f"--- time: generation {r.inference_time:.2f}s, tests "
                 f"{sum(r.test_times):.2f}s, execution {r.execution_time:.2f}s, total "
                 f"{r.total_time:.2f}s")
    return "\n".join(lines)
