"""Execution of one step's accumulated test suites, three ways.

Every kept test of a sample (its discriminator tests of stages 1..5 plus the problem's baseline
tests) runs against the sample's final code (candidate), against the reference solution
(validity) and against AST mutants of the reference (can the tests catch a bug?). Work is
deduplicated before it reaches the sandbox: samples of one problem share many tests, so the
reference and each mutant run every distinct test of the problem once.

``plan_jobs``/``execution_rows`` are pure; ``run_jobs`` is injected (the sandbox's
``execute_many`` in the task, a fake in unit tests).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from artifacts.store import Pointer
from models.parsing import parse_code
from problems import Problem
from rewards.mutants import Mutant
from tasks.rollout import step_samples
from tasks.runtime import RunContext

NOT_RUN = "not_run"  # candidate status when the stage-5 output held no usable code
NO_LIMITS = "{}"     # limits of a row that did not run (or of a sandbox that reports none)
RunJobs = Callable[[list[tuple[str, list[str]]]], list[Any]]


@dataclass
class Suite:
    """One sample's tests (kept, first copies) and its final code."""

    problem: Problem
    sample_idx: int
    code: str | None
    code_reason: str
    tests: list[dict[str, Any]]  # tests-table rows: test_id, snippet, stage, origin


@dataclass
class JobPlan:
    jobs: list[tuple[str, list[str]]] = field(default_factory=list)
    # (kind, target_id, problem_id, sample_idx or None) per job, aligned with ``jobs``
    targets: list[tuple[str, str, str, int | None]] = field(default_factory=list)


def plan_jobs(suites: Sequence[Suite], mutants: dict[str, list[Mutant]]) -> JobPlan:
    """One job per candidate with code, one per problem for the reference, one per mutant."""
    plan = JobPlan()
    by_problem: dict[str, tuple[Problem, dict[str, None], dict[str, None]]] = {}
    for s in suites:
        _, all_tests, disc_tests = by_problem.setdefault(s.problem.id, (s.problem, {}, {}))
        for t in s.tests:
            all_tests[t["snippet"]] = None
            if t["origin"] == "discriminator":
                disc_tests[t["snippet"]] = None
        if s.code is not None and s.tests:
            plan.jobs.append((s.problem.program(s.code), [t["snippet"] for t in s.tests]))
            plan.targets.append(("candidate", "candidate", s.problem.id, s.sample_idx))
    for pid, (problem, all_tests, disc_tests) in by_problem.items():
        if all_tests:
            plan.jobs.append((problem.reference_program, list(all_tests)))
            plan.targets.append(("reference", "reference", pid, None))
        if disc_tests:  # only discriminator tests earn mutation-kill credit
            for m_idx, mutant in enumerate(mutants.get(pid, [])):
                plan.jobs.append((problem.program(mutant.code), list(disc_tests)))
                plan.targets.append(("mutant", f"m{m_idx}", pid, None))
    return plan


def limits_json(limits: Any) -> str:
    """The limits a verdict ran under, as compact JSON with sorted keys (one string per row).

    >>> limits_json({"timeout_s": 2.0, "memory_mb": 256}), limits_json(None)
    ('{"memory_mb":256,"timeout_s":2.0}', '{}')
    """
    return json.dumps(dict(limits or {}), sort_keys=True, separators=(",", ":"), default=str)


def execution_rows(suites: Sequence[Suite], plan: JobPlan, results: Sequence[Any],
                   mutants: dict[str, list[Mutant]]) -> list[dict[str, Any]]:
    """Rows of the executions table: one per sample x test x target, each with the limits
    (``ExecutionResult.limits``) its verdict ran under. A status is the sandbox's own, ``infra``
    included (the harness failed, not the code): scoring masks it, it is recorded as is."""
    per_candidate: dict[tuple[str, int], dict[str, Any]] = {}
    shared: dict[tuple[str, str], dict[str, Any]] = {}  # (problem, target_id) -> snippet->outcome
    for (kind, target_id, pid, j), (_, tests), result in zip(plan.targets, plan.jobs, results,
                                                           strict=True):
        limits = limits_json(getattr(result, "limits", None))  # before the sandbox kept them: {}
        outcomes = {snippet: (o, str(result.isolation), limits)
                    for snippet, o in zip(tests, result.outcomes, strict=True)}
        if kind == "candidate":
            per_candidate[(pid, j)] = outcomes
        else:
            shared[(pid, target_id)] = outcomes
    rows = []
    for s in suites:
        pid = s.problem.id
        targets = [("candidate", "candidate", per_candidate.get((pid, s.sample_idx)))]
        targets.append(("reference", "reference", shared.get((pid, "reference"))))
        targets += [("mutant", f"m{i}", shared.get((pid, f"m{i}")))
                    for i in range(len(mutants.get(pid, [])))]
        for t in s.tests:
            for kind, target_id, outcomes in targets:
                if kind == "mutant" and t["origin"] != "discriminator":
                    continue
                found = outcomes.get(t["snippet"]) if outcomes else None
                if found is None:  # candidate without code: recorded as not run, not a crash
                    status, message, duration = NOT_RUN, s.code_reason, 0.0
                    isolation, limits = "none", NO_LIMITS
                else:
                    o, isolation, limits = found
                    status, message, duration = o.status, (o.message or None), float(o.duration_s)
                rows.append({"stage": int(t["stage"]), "problem_id": pid,
                             "sample_idx": s.sample_idx, "test_id": t["test_id"],
                             "target_kind": kind, "target_id": target_id, "status": status,
                             "message": message, "duration_s": duration,
                             "isolation": isolation, "limits": limits})
    return rows


def load_suites(ctx: RunContext, step: int) -> list[Suite]:
    """Each sample's final code (parsed from its stage-5 text) and kept tests."""
    store = ctx.store
    code_rows = store.read_table("chains", step=step, part="generator-5",
                                 columns=["problem_id", "sample_idx", "output_text"]).to_pylist()
    texts = {(r["problem_id"], r["sample_idx"]): r["output_text"] for r in code_rows}
    tests: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for part in store.list_parts("tests", step):
        for r in store.read_table("tests", step=step, part=part).to_pylist():
            if r["parse_status"] == "ok" and not r["is_duplicate"]:
                tests.setdefault((r["problem_id"], r["sample_idx"]), []).append(r)
    suites = []
    for problem, j in step_samples(ctx, step):
        parsed = parse_code(texts.get((problem.id, j), ""), problem.entry_point)
        suite_tests = sorted(tests.get((problem.id, j), []),
                             key=lambda r: (r["stage"], r["test_idx"]))
        suites.append(Suite(problem, j, parsed.code if parsed.ok else None,
                            parsed.reason or "no code", suite_tests))
    return suites


def sandbox_runner(ctx: RunContext) -> RunJobs:
    from sandbox import execute_many, options_from_config

    options = options_from_config(ctx.cfg.sandbox)
    return lambda jobs: execute_many(jobs, **options)


def run_execution(ctx: RunContext, step: int, run_jobs: RunJobs) -> list[dict[str, Any]]:
    suites = load_suites(ctx, step)
    mutants = {s.problem.id: ctx.mutants(s.problem) for s in suites}
    plan = plan_jobs(suites, mutants)
    results = run_jobs(plan.jobs) if plan.jobs else []
    return execution_rows(suites, plan, results, mutants)


# Retried: a dead sandbox worker is infrastructure, and re-running the same jobs is safe
# (the part is replaced atomically). Failing tests are results, never exceptions.
@task(name="execute", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=1)
def execute(ctx: RunContext, step: int) -> Pointer:
    """Every accumulated test vs final code, reference and mutants -> ``executions/part-all``."""
    rows = run_execution(ctx, step, sandbox_runner(ctx))
    return ctx.store.write("executions", step, "all", rows)
