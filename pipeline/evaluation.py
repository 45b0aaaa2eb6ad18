"""Evaluation metrics: pass@k, test-side quality and reasoning coherence, from execution only.

    from pipeline.evaluation import evaluate_engine, pass_at_k
    rows, metrics = evaluate_engine(engine, problems, samples=10, ks=(1, 5))

Definitions (every rate is pooled over the samples it names, so large suites weigh more):

* **pass@k** (Chen et al. 2021, unbiased): per problem with ``n`` samples of which ``c`` pass
  every one of the problem's own (baseline) tests, ``1 - C(n-c, k) / C(n, k)``; averaged over
  problems. ``direct_pass@k`` is the same model asked for code at once (the code stage's prompt
  with no earlier stages): the single-stage baseline.
* **test_validity**: share of the discriminator's deduplicated tests that the reference passes.
* **mutation_kill_rate**: share of reference mutants (``rewards.mutants``) that at least one
  valid discriminator test of the sample rejects.
* **distinct_test_rate**: deduplicated tests / parsed tests; **distinct_inputs**: different
  argument tuples the tests pass to the entry point, per sample.
* **failure_rate**: share of the valid tests (baseline + discriminator) the final code fails;
  a sample without code fails them all.
* **coherence**: of the edge-case classes (empty, single element, zero, negative, large,
  duplicates, None) the chain's stages that name edge cases *name* (``names_edge_cases`` in
  ``configs.names.STAGE_TABLE``: structured reasoning and constraints in the shipped chain),
  the share that the discriminator's tests *exercise* (an argument of that class in a call to
  the entry point). Samples naming none are left out.

Test-side metrics run the chain's tests through the training pipeline's own pure functions
(``pipeline.chains``/``pipeline.execution``/``pipeline.scoring``), so they mean what training
means.
"""

from __future__ import annotations

import ast
import contextlib
import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from configs.names import CODE_STAGE, STAGES
from configs.schema import TrainConfig
from models.seeds import derive_seed
from models.stages import get_stage
from pipeline.chains import baseline_rows, kept_tests, parsed_test_rows
from pipeline.execution import RunJobs, Suite, problem_mutants, run_suites, sandbox_runner
from pipeline.progress import WorkProgress
from pipeline.scoring import outcomes_from_rows, reward_rows
from pipeline.solver import ChainSolver, InferenceResult
from pipeline.stagereport import report_metrics, stage_report
from problems import Problem

EVAL_REPORT = "eval/stage_report"  # prefix of the stage report's metrics

EDGE_CLASSES = ("empty", "single", "zero", "negative", "large", "duplicates", "none")
_MENTIONS = {
    "empty": r"\bempty\b|\[\]|\"\"|''|\bno elements?\b|\blength (?:of )?0\b",
    "single": r"\bsingle\b|\bone element\b|\bonly one\b|\blength (?:of )?1\b",
    "zero": r"\bzero\b|(?<![\w.^*])0(?![\w.])",
    "negative": r"\bnegative\b|(?<![\w)\]])-\d",
    "large": r"\blarge\b|\bhuge\b|\boverflow\b|\bmax(?:imum)? (?:size|length|value)\b"
             r"|10\s*\^\s*\d|10\*\*\d|\b1e\d+\b|\b\d{5,}\b",
    "duplicates": r"\bduplicat\w*|\brepeated\b|\brepeats?\b",
    "none": r"\bnone\b|\bnull\b",
}
_MENTION_RE = {k: re.compile(v, re.IGNORECASE) for k, v in _MENTIONS.items()}
LARGE = 10_000


# --- pass@k ----------------------------------------------------------------------------------
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem: ``1 - C(n-c, k) / C(n, k)``, as the product
    ``prod_{i=n-c+1}^{n} (1 - k / i)`` (the Codex paper's numerically stable form).

    >>> pass_at_k(5, 0, 1), pass_at_k(5, 5, 3), pass_at_k(4, 2, 1), pass_at_k(4, 1, 2)
    (0.0, 1.0, 0.5, 0.5)
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k(n={n}, c={c}, k={k}): need 0 <= c <= n and 1 <= k <= n")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float | None:
    """Mean pass@k over problems given ``(n, c)`` each; None when some ``n < k``."""
    counts = list(counts)
    if not counts or any(n < k for n, _ in counts):
        return None
    return float(np.mean([pass_at_k(n, c, k) for n, c in counts]))


# --- what tests exercise, what reasoning names ----------------------------------------------
def _calls(snippet: str, entry_point: str) -> list[ast.Call]:
    try:
        tree = ast.parse(snippet)
    except (SyntaxError, ValueError, RecursionError):
        return []
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name) and n.func.id == entry_point]


def call_inputs(snippet: str, entry_point: str) -> list[str]:
    """One normalised key per call to the entry point in a test (its argument ASTs)."""
    return [ast.dump(ast.Tuple(elts=list(c.args) + [kw.value for kw in c.keywords],
                               ctx=ast.Load())) for c in _calls(snippet, entry_point)]


def _value_classes(value: Any, depth: int = 0) -> set[str]:
    out: set[str] = set()
    if value is None:
        return {"none"}
    if isinstance(value, bool):
        return out
    if isinstance(value, int | float):
        if value == 0:
            out.add("zero")
        if value < 0:
            out.add("negative")
        if abs(value) >= LARGE:
            out.add("large")
        return out
    if isinstance(value, str | bytes | list | tuple | set | frozenset | dict):
        if len(value) == 0:
            out.add("empty")
        elif len(value) == 1:
            out.add("single")
        if len(value) >= LARGE:
            out.add("large")
        if isinstance(value, list | tuple):
            try:
                if len(set(value)) < len(value):
                    out.add("duplicates")
            except TypeError:  # unhashable elements
                pass
        if depth < 3 and not isinstance(value, str | bytes):
            items = value.items() if isinstance(value, dict) else value
            for item in list(items)[:1000]:
                for part in (item if isinstance(value, dict) else (item,)):
                    out |= _value_classes(part, depth + 1) - {"single"}
    return out


def exercised_classes(snippet: str, entry_point: str) -> set[str]:
    """Edge-case classes among the arguments of the test's calls to the entry point.

    >>> sorted(exercised_classes("assert f([]) == 0 and f([-1, -1]) == -2", "f"))
    ['duplicates', 'empty', 'negative']
    >>> sorted(exercised_classes("assert f([1] * 100000) == 1", "f"))
    ['large']
    """
    out: set[str] = set()
    for call in _calls(snippet, entry_point):
        for arg in list(call.args) + [kw.value for kw in call.keywords]:
            try:
                out |= _value_classes(ast.literal_eval(arg))
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                # An expression ([1] * 10**5, range(...)): large when it holds a big constant.
                if any(isinstance(n, ast.Constant) and isinstance(n.value, int)
                       and not isinstance(n.value, bool) and abs(n.value) >= 1000
                       for n in ast.walk(arg)):
                    out.add("large")
    return out


def mentioned_classes(text: str) -> set[str]:
    """Edge-case classes a reasoning text names.

    >>> sorted(mentioned_classes("Handle an empty list and negative numbers up to 10^5."))
    ['empty', 'large', 'negative']
    """
    return {k for k, rx in _MENTION_RE.items() if rx.search(text or "")}


def coherence(reasoning: Sequence[str], tests: Iterable[str], entry_point: str,
              stages: Sequence[int] | None = None) -> tuple[float | None, int, int]:
    """(share of named classes the tests exercise, named, covered); share None if none named.
    ``reasoning`` holds the texts of the chain's reasoning ``stages`` (default: the first
    ones); those of stages that name edge cases are read."""
    named = set()
    for stage, text in zip(STAGES if stages is None else stages, reasoning, strict=False):
        if get_stage(stage).names_edge_cases:
            named |= mentioned_classes(text)
    covered = set()
    for t in tests:
        covered |= exercised_classes(t, entry_point)
    hit = named & covered
    return (len(hit) / len(named) if named else None), len(named), len(hit)


# --- scoring chains the way training does ---------------------------------------------------
def score_tests(results: Sequence[InferenceResult], cfg: TrainConfig,
                run_jobs: RunJobs | None = None) -> dict[str, Any]:
    """Tests, executions (candidate, reference, mutants), outcomes and reward rows of chains
    whose discriminator tests were written (``ChainSolver.write_tests``)."""
    results = [r for r in results if r.test_texts]
    samples = [(r.problem, r.sample_idx) for r in results]
    tests = baseline_rows(samples)
    seen: dict = {}
    for i, stage in enumerate(cfg.chain.test_stages):  # test_texts: one per tested stage
        tests += parsed_test_rows(samples, [r.test_texts[i] for r in results], stage, seen)
    kept = kept_tests(tests)
    suites = [Suite(r.problem, r.sample_idx, r.code, r.code_reason,
                    kept.get((r.problem.id, r.sample_idx), [])) for r in results]
    mutants = {r.problem.id: problem_mutants(r.problem, cfg.rewards.mutants_per_problem)
               for r in results}
    executions = run_suites(suites, mutants, run_jobs or sandbox_runner(cfg.sandbox))
    keys = [(p.id, j) for p, j in samples]
    outcomes = outcomes_from_rows(tests, executions, keys)
    rewards = reward_rows(outcomes, cfg.rewards, training_stage=CODE_STAGE) if keys else []
    return {"tests": tests, "executions": executions, "outcomes": outcomes,
            "rewards": {(r["problem_id"], r["sample_idx"]): r for r in rewards}}


def sample_rows(results: Sequence[InferenceResult], scored: dict[str, Any] | None, model: str
                ) -> list[dict[str, Any]]:
    """One ``evaluations`` row per sample (chain and direct)."""
    tests_by: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for t in (scored or {}).get("tests", []):
        if t["origin"] == "discriminator":
            tests_by.setdefault((t["problem_id"], t["sample_idx"]), []).append(t)
    rows = []
    for r in results:
        key = (r.problem.id, r.sample_idx)
        ex = r.execution_result
        row: dict[str, Any] = {
            "stage": CODE_STAGE, "problem_id": r.problem.id, "sample_idx": r.sample_idx,
            "mode": r.mode, "model": model, "passed": r.passed, "code_ok": r.code is not None,
            "n_baseline": len(r.problem.baseline_tests),
            "n_baseline_passed": ex.passed if ex is not None else 0,
            "generation_s": r.inference_time, "code": r.code,
            "n_parsed": None, "n_tests": None, "n_dropped": None, "n_valid": None,
            "n_mutants": None, "n_mutants_killed": None, "n_distinct_inputs": None,
            "failure_rate": None, "coherence": None, "n_edge_named": None,
            "n_edge_tested": None, "generator_reward": None, "discriminator_reward": None,
        }
        reward = (scored or {}).get("rewards", {}).get(key)
        if reward is not None:
            disc = tests_by.get(key, [])
            ok = [t for t in disc if t["parse_status"] == "ok"]
            unique = [t["snippet"] for t in ok if not t["is_duplicate"]]
            outcome = scored["outcomes"][key]
            judged = outcome.generator_tests
            score, named, hit = coherence(r.reasoning_chain, unique, r.problem.entry_point,
                                          r.reasoning_stages)
            row |= {
                "n_parsed": len(ok), "n_tests": len(unique), "n_dropped": len(disc) - len(ok),
                "n_valid": len(outcome.valid_discriminator_tests),
                "n_mutants": reward["n_mutants"], "n_mutants_killed": reward["n_mutants_killed"],
                "n_distinct_inputs": len({k for s in unique
                                          for k in call_inputs(s, r.problem.entry_point)}),
                "failure_rate": (1.0 - sum(t.passed for t in judged) / len(judged)
                                 if judged and not outcome.masked else None),
                "coherence": score, "n_edge_named": named, "n_edge_tested": hit,
                "generator_reward": reward["generator_reward"],
                "discriminator_reward": reward["discriminator_reward"],
            }
        rows.append(row)
    return rows


def _ratio(num: float, den: float) -> float | None:
    return float(num) / den if den else None


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(statistics.fmean(vals)) if vals else None


def summarize(rows: Sequence[dict[str, Any]], ks: Sequence[int]) -> dict[str, float]:
    """``eval/*`` metrics from ``evaluations`` rows; a metric without data is left out.
    pass@k is logged as ``eval/pass_at_<k>``: MLflow refuses ``@`` in metric names."""
    out: dict[str, float | None] = {}
    for mode, prefix in (("chain", "eval/"), ("direct", "eval/direct_")):
        mine = [r for r in rows if r["mode"] == mode]
        if not mine:
            continue
        per_problem: dict[str, list[bool]] = {}
        for r in mine:
            per_problem.setdefault(r["problem_id"], []).append(bool(r["passed"]))
        counts = [(len(v), sum(v)) for v in per_problem.values()]
        for k in sorted(set(ks)):
            out[f"{prefix}pass_at_{k}"] = mean_pass_at_k(counts, k)
        out[f"{prefix}code_ok_rate"] = _mean([r["code_ok"] for r in mine])
        out[f"{prefix}baseline_pass_rate"] = _ratio(sum(r["n_baseline_passed"] for r in mine),
                                                    sum(r["n_baseline"] for r in mine))
        out[f"{prefix}generation_s"] = _mean([r["generation_s"] for r in mine])
    scored = [r for r in rows if r["mode"] == "chain" and r["n_tests"] is not None]
    if scored:
        total = lambda key: sum(r[key] for r in scored)  # noqa: E731
        out |= {
            "eval/test_validity": _ratio(total("n_valid"), total("n_tests")),
            "eval/mutation_kill_rate": _ratio(total("n_mutants_killed"), total("n_mutants")),
            "eval/distinct_test_rate": _ratio(total("n_tests"), total("n_parsed")),
            "eval/tests_per_sample": _mean([r["n_tests"] for r in scored]),
            "eval/distinct_inputs": _mean([r["n_distinct_inputs"] for r in scored]),
            "eval/test_drop_rate": _ratio(total("n_dropped"),
                                          total("n_dropped") + total("n_parsed")),
            "eval/failure_rate": _mean([r["failure_rate"] for r in scored]),
            "eval/coherence": _mean([r["coherence"] for r in scored]),
            "eval/generator_reward": _mean([r["generator_reward"] for r in scored]),
            "eval/discriminator_reward": _mean([r["discriminator_reward"] for r in scored]),
        }
    out["eval/problems"] = float(len({r["problem_id"] for r in rows}))
    out["eval/samples"] = float(sum(r["mode"] == "chain" for r in rows))
    return {k: v for k, v in out.items() if v is not None}


def chunk_size(n_problems: int, samples: int, batch_size: int, updates: int = 20) -> int:
    """Problems per chunk of a chunked evaluation: about ``updates`` progress updates, and at
    least one sampling batch of prompts per chunk, so chunking costs the sampler little.

    >>> chunk_size(164, 10, 16), chunk_size(12, 1, 16), chunk_size(3, 1, 16)
    (9, 16, 16)
    """
    return max(-(-batch_size // max(samples, 1)), -(-n_problems // updates), 1)


def evaluate_engine(engine: ChainSolver, problems: Sequence[Problem], *, samples: int,
                    ks: Sequence[int], direct: bool = True, tests: bool = True, model: str = "",
                    scored_out: dict[str, Any] | None = None, chunk: int | None = None,
                    progress: str | None = None
                    ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Chains (and the direct baseline) for ``problems`` x ``samples``, executed against each
    problem's tests; the discriminator's tests scored for validity, mutants and coherence
    (``score_tests``'s tests, executions and outcomes, also put in ``scored_out`` if given).

    ``chunk``: work through the problems ``chunk`` at a time (every step of the evaluation per
    chunk, so progress can be counted in problems); ``None``, all at once. The first chunk
    samples with the config's seeds, chunk ``i`` with seeds derived from them and ``i``, so
    results depend on ``chunk`` but never on anything else. ``progress``: the label of a
    progress bar or lines (``pipeline.progress``) counting problems; ``None``, silent."""
    bad = [k for k in ks if not 1 <= k <= samples]
    if bad:
        raise ValueError(f"k={bad}: pass@k needs 1 <= k <= samples ({samples})")
    problems = list(problems)
    size = chunk or max(len(problems), 1)
    chain_rows: list[dict[str, Any]] = []
    direct_rows: list[dict[str, Any]] = []
    scored: dict[str, Any] | None = None
    with (WorkProgress(progress, len(problems), "problems") if progress
          else contextlib.nullcontext()) as shown:
        for index, first in enumerate(range(0, len(problems), size)):
            part = problems[first:first + size]
            seed = engine.cfg.sampling.seed
            if index:
                seed = derive_seed(seed, "chunk", index)
            chain = engine.generate(part, samples, mode="chain", seed=seed)
            engine.execute(chain)
            part_scored = None
            if tests:
                engine.write_tests(chain, seed)
                part_scored = score_tests(chain, engine.cfg, engine.run_jobs)
                scored = merge_scored(scored, part_scored)
            chain_rows += sample_rows(chain, part_scored, model)
            if direct:
                baseline = engine.generate(part, samples, mode="direct", seed=seed)
                engine.execute(baseline)
                direct_rows += sample_rows(baseline, None, model)
            if shown is not None:
                shown.advance(len(part))
    if scored is not None and scored_out is not None:
        scored_out.update(scored)
    rows = chain_rows + direct_rows
    metrics = summarize(rows, ks)
    if scored is not None:  # what each chain stage's tests did, as in training
        metrics |= report_metrics(stage_report(scored["tests"], scored["executions"]),
                                  EVAL_REPORT)
    return rows, metrics


def merge_scored(total: dict[str, Any] | None, part: dict[str, Any]) -> dict[str, Any]:
    """``score_tests`` of two sets of problems as one: rows concatenated, keyed maps merged
    (a sample's key holds its problem id, so the chunks' keys never collide)."""
    if total is None:
        return {k: (list(v) if isinstance(v, list) else dict(v)) for k, v in part.items()}
    for key, value in part.items():
        if isinstance(value, list):
            total[key] = total[key] + value
        else:
            total[key] = {**total[key], **value}
    return total
