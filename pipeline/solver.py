"""The chain on new problems, without a run store: the generator's five stages, the
discriminator's tests at every stage, and the sandbox. Inference (``serving.inference``),
evaluation (``pipeline.evaluation``) and the held-out rows of a training run
(``pipeline.heldout``) all use :class:`ChainSolver`; it is built from the same functions a
training step runs (``pipeline.chains.stage_prompts`` for every stage of either role,
``pipeline.chains.parsed_test_rows`` and ``kept_tests`` to parse and deduplicate tests, the
run's sandbox runner
to execute), so a chain means the same thing everywhere.

Its two seams: the ``sampler`` (``pipeline.chains.Sampler``: ``models.policy.Policies`` or
another engine) and ``run_jobs`` (``pipeline.execution.RunJobs``; default: the config's
sandbox, local or fanned out over Ray as ``sandbox.executor`` says).

Times are per sample: its share of each stage's batched call.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from configs.names import CODE_STAGE, STAGES
from configs.schema import TrainConfig
from models.generation import GenerationBatch
from models.parsing import parse_code
from models.seeds import derive_seed
from pipeline.chains import (
    SampleKey,
    Sampler,
    kept_tests,
    parsed_test_rows,
    sample_prompts,
    stage_prompts,
)
from pipeline.execution import RunJobs, run_distinct, sandbox_runner
from problems import Problem
from sandbox import Trusted

MODES = ("chain", "direct")


@dataclass
class InferenceResult:
    """One problem worked through the chain (or the direct single-stage baseline)."""

    problem: Problem
    sample_idx: int
    reasoning_chain: list[str]
    """Generator outputs of the stages before the code (empty for the direct baseline)."""
    generated_code: str
    """The code stage's output as generated (prose and fences included)."""
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
    test_finished: list[bool] = field(default_factory=list)
    """Per stage: the discriminator's output ended by itself (False: cut at its budget)."""
    test_counts: list[int] = field(default_factory=list)
    """Per stage: tests that parsed from the discriminator's output, duplicates included."""
    reasoning_stages: list[int] = field(default_factory=list)
    """The stage id of each of ``reasoning_chain`` (the config's chain before the code;
    default the first stages, as many as there are texts)."""
    test_stages: list[int] = field(default_factory=list)
    """The stage id of each of ``test_texts`` (the stages the discriminator tested)."""

    def __post_init__(self) -> None:
        if self.reasoning_chain and not self.reasoning_stages:
            self.reasoning_stages = list(STAGES[:len(self.reasoning_chain)])

    @property
    def stages(self) -> list[int]:
        """The stage id of each generator output (``finished``, ``stage_times``)."""
        return [*self.reasoning_stages, CODE_STAGE]

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


class ChainSolver:
    """The chain for new problems: ``sampler`` writes, ``run_jobs`` executes (see the module
    docstring). ``cfg`` gives sampling, context length and the sandbox; it is read at each
    call, so a caller may replace it (``serving.served`` does, per request)."""

    def __init__(self, sampler: Sampler, cfg: TrainConfig, run_jobs: RunJobs | None = None):
        self.sampler = sampler
        self.cfg = cfg
        self._run_jobs = run_jobs

    @property
    def run_jobs(self) -> RunJobs:
        return self._run_jobs or sandbox_runner(self.cfg.sandbox)

    def _sample(self, role: str, pairs: list[tuple[Problem, int]], stage: int,
                texts: dict[SampleKey, list[str]], seed: int, *,
                direct: bool = False) -> GenerationBatch:
        """``role`` writes ``stage`` for every sample in one batched call: the prompts a
        training step builds, without its chains rows (nothing is stored here, so neither the
        rows nor the adapter's content hash they record is computed)."""
        prompts = stage_prompts(self.sampler, role, pairs, stage, texts,
                                self.cfg.model.max_context_tokens, direct=direct,
                                chain=self.cfg.chain.stages)
        return sample_prompts(self.sampler, role, prompts, stage, self.cfg.sampling, seed)

    def _samples(self, problems: Sequence[Problem], samples: int) -> list[tuple[Problem, int]]:
        if samples < 1:
            raise ValueError(f"samples={samples!r}: must be >= 1")
        ids = [p.id for p in problems]
        if len(set(ids)) != len(ids):  # a sample is keyed by (problem id, index)
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"problem ids {twice[:5]} appear more than once; each problem "
                             "once, with samples= for more samples")
        return [(p, j) for p in problems for j in range(samples)]

    def _stages(self, pairs: list[tuple[Problem, int]], stages: Sequence[int], seed: int,
                mode: str) -> tuple[dict[SampleKey, list[str]], list[list[float]],
                                    list[list[bool]]]:
        """The generator's ``stages`` for every sample: texts per sample, and per sample and
        stage its share of the stage's time and whether it ended with a stop token."""
        texts: dict[SampleKey, list[str]] = {}
        times: list[list[float]] = [[] for _ in pairs]
        done: list[list[bool]] = [[] for _ in pairs]
        for stage in stages:
            batch = self._sample("generator", pairs, stage, texts,
                                 derive_seed(seed, mode, stage, "generator"),
                                 direct=mode == "direct")
            share = batch.seconds / max(len(pairs), 1)
            for i, ((p, j), gen) in enumerate(zip(pairs, batch.generations, strict=True)):
                texts.setdefault((p.id, j), []).append(gen.text)
                times[i].append(share)
                done[i].append(gen.finished)
        return texts, times, done

    def generate(self, problems: Sequence[Problem], samples: int = 1, *, mode: str = "chain",
                 seed: int | None = None) -> list[InferenceResult]:
        """Generator output for problems x samples, problem-major. ``mode="chain"``: every
        stage of the config's chain (``cfg.chain.stages``); ``"direct"``: the code stage's
        prompt alone (the single-stage baseline)."""
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: must be 'chain' or 'direct'")
        seed = self.cfg.sampling.seed if seed is None else seed
        pairs = self._samples(problems, samples)
        stages = self.cfg.chain.stages if mode == "chain" else (CODE_STAGE,)
        texts, times, done = self._stages(pairs, stages, seed, mode)
        out = []
        for (problem, j), s, f in zip(pairs, times, done, strict=True):
            t = texts[(problem.id, j)]
            parsed = parse_code(t[-1], problem.entry_point)
            out.append(InferenceResult(
                problem=problem, sample_idx=j, reasoning_chain=list(t[:-1]),
                generated_code=t[-1], code=parsed.code if parsed.ok else None,
                code_reason=parsed.reason or ("ok" if parsed.ok else "no code"),
                stage_times=s, mode=mode, finished=f, reasoning_stages=list(stages[:-1])))
        return out

    def write_tests(self, results: Sequence[InferenceResult], seed: int | None = None) -> None:
        """The discriminator's tests for every stage of each chain (in place): raw texts and
        the parsed snippets, deduplicated within a stage and against earlier stages, as a
        training step does. A chain without the discriminator (``cfg.chain.discriminator``
        false) gets none."""
        chains = [r for r in results if r.mode == "chain"]
        if not chains:
            return
        seed = self.cfg.sampling.seed if seed is None else seed
        pairs = [(r.problem, r.sample_idx) for r in chains]
        texts = {(r.problem.id, r.sample_idx): r.reasoning_chain + [r.generated_code]
                 for r in chains}
        seen: dict[SampleKey, dict[str, str]] = {}
        for r in chains:
            r.test_texts, r.tests, r.test_times = [], [], []
            r.test_finished, r.test_counts = [], []
            r.test_stages = list(self.cfg.chain.test_stages)
        for stage in self.cfg.chain.test_stages:
            shown = len(self.cfg.chain.upto(stage))
            upto = {k: v[:shown] for k, v in texts.items()}
            batch = self._sample("discriminator", pairs, stage, upto,
                                 derive_seed(seed, "tests", stage))
            written = [g.text for g in batch.generations]
            rows = parsed_test_rows(pairs, written, stage, seen)
            kept = kept_tests(rows)
            parsed = Counter((t["problem_id"], t["sample_idx"]) for t in rows
                             if t["parse_status"] == "ok")
            share = batch.seconds / len(chains)
            for r, text, gen in zip(chains, written, batch.generations, strict=True):
                r.test_texts.append(text)
                r.test_times.append(share)
                r.test_finished.append(gen.finished)
                r.test_counts.append(parsed[(r.problem.id, r.sample_idx)])
                r.tests += [(stage, t["snippet"])
                            for t in kept.get((r.problem.id, r.sample_idx), [])]

    def execute(self, results: Sequence[InferenceResult], with_tests: bool = False) -> None:
        """Run each result's code against the problem's baseline tests (plus its discriminator
        tests with ``with_tests``) in the sandbox, in place. No code: no execution result."""
        todo = []
        for r in results:
            if r.code is None:
                continue
            r.executed_tests = [Trusted(t) for t in r.problem.baseline_tests] + (
                [t for _, t in r.tests] if with_tests else [])
            if r.executed_tests:
                todo.append(r)
        if not todo:
            return
        t0 = time.perf_counter()
        outs = run_distinct(self.run_jobs,  # samples that wrote the same code: one job
                            [(r.problem.program(r.code), r.executed_tests) for r in todo])
        share = (time.perf_counter() - t0) / len(todo)
        for r, out in zip(todo, outs, strict=True):
            r.execution_result, r.execution_time = out, share

    def reference_passes(self, results: Sequence[InferenceResult]) -> list[list[bool]]:
        """For each result, whether the problem's reference solution passes each of its
        discriminator tests (``result.tests`` order): which tests are valid."""
        todo = [(i, r) for i, r in enumerate(results) if r.tests]
        out: list[list[bool]] = [[] for _ in results]
        if todo:
            outs = run_distinct(self.run_jobs, [(r.problem.reference_program,
                                                 [t for _, t in r.tests]) for _, r in todo])
            for (i, _), ex in zip(todo, outs, strict=True):
                out[i] = [o.passed for o in ex.outcomes]
        return out

    # -- whole chains: a batch of problems, one problem, the reasoning stages alone -----------
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
        """The stages before the code only: no code is generated or executed."""
        pairs = self._samples([problem], 1)
        reasoning = self.cfg.chain.before(CODE_STAGE)
        texts, _, _ = self._stages(pairs, reasoning, self.cfg.sampling.seed, "chain")
        return texts.get((problem.id, 0), [])
