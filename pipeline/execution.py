"""Execution of one step's accumulated test suites, three ways.

Every kept test of a sample (its discriminator tests of stages 1..5 plus the problem's baseline
tests, and with ``rewards.peer_tests`` those written for its problem's other samples) runs
against the sample's final code (candidate), against the reference solution (validity) and
against AST mutants of the reference (can the tests catch a bug?; not peer copies). Work is
deduplicated before it reaches the sandbox: samples of one problem share many tests, so the
reference and each mutant run every distinct test of the problem once; and a job equal to
another of the step (the same program, the same tests in the same order: a nearly
deterministic policy writes the same code and tests for several samples) runs once, its result
given to each (:func:`run_distinct`).

``build_suites``/``plan_jobs``/``execution_rows`` are pure; ``run_jobs`` is injected (the
sandbox's runner under the run's limits, :func:`sandbox_runner`, in training and evaluation, a
fake in unit tests). Mutants are :func:`problem_mutants`: seeded by the problem id, so training,
replay and evaluation mutate a problem the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from configs.schema import SandboxConfig
from models.parsing import parse_code
from models.seeds import derive_seed
from pipeline.chains import Row, SampleKey, kept_tests, peer_tests
from problems import Problem
from rewards.mutants import Mutant, make_mutants
from sandbox import Trusted, job_runner

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
    """One job per candidate with code, one per problem for the reference, one per mutant.
    A test that is one of the problem's own (people wrote it, not the policy) is
    ``sandbox.Trusted``: those share a pytest session; every other test runs alone."""
    plan = JobPlan()
    by_problem: dict[str, tuple[Problem, dict[str, None], dict[str, None]]] = {}
    for s in suites:
        _, all_tests, disc_tests = by_problem.setdefault(s.problem.id, (s.problem, {}, {}))
        for t in s.tests:
            all_tests[t["snippet"]] = None
            if t["origin"] == "discriminator":
                disc_tests[t["snippet"]] = None
        if s.code is not None and s.tests:
            plan.jobs.append((s.problem.program(s.code),
                              _marked(s.problem, [t["snippet"] for t in s.tests])))
            plan.targets.append(("candidate", "candidate", s.problem.id, s.sample_idx))
    for pid, (problem, all_tests, disc_tests) in by_problem.items():
        if all_tests:
            plan.jobs.append((problem.reference_program, _marked(problem, all_tests)))
            plan.targets.append(("reference", "reference", pid, None))
        # Mutants run every test once there is a discriminator test to credit: only those earn
        # kill credit, but the progressive reward needs to know what the baseline kills.
        if disc_tests:
            for m_idx, mutant in enumerate(mutants.get(pid, [])):
                plan.jobs.append((problem.program(mutant.code), _marked(problem, all_tests)))
                plan.targets.append(("mutant", f"m{m_idx}", pid, None))
    return plan


def _marked(problem: Problem, snippets: Iterable[str]) -> list[str]:
    """``snippets``, each of the problem's own tests as ``sandbox.Trusted``."""
    own = set(problem.baseline_tests)
    return [Trusted(t) if t in own else t for t in snippets]


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
        where = (getattr(result, "executor", None), getattr(result, "node", None))
        outcomes = {snippet: (o, str(result.isolation), limits, *where)
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
                if kind == "mutant" and (outcomes is None or t["origin"] == "peer"):
                    continue  # no test to credit (not run), or a peer's (credits no one)
                found = outcomes.get(t["snippet"]) if outcomes else None
                if found is None:  # candidate without code: recorded as not run, not a crash
                    status, message, duration = NOT_RUN, s.code_reason, 0.0
                    isolation, limits, executor, node = "none", NO_LIMITS, None, None
                else:
                    o, isolation, limits, executor, node = found
                    status, message, duration = o.status, (o.message or None), float(o.duration_s)
                rows.append({"stage": int(t["stage"]), "problem_id": pid,
                             "sample_idx": s.sample_idx, "test_id": t["test_id"],
                             "target_kind": kind, "target_id": target_id, "status": status,
                             "message": message, "duration_s": duration,
                             "isolation": isolation, "limits": limits,
                             "executor": executor, "node": node})
    return rows


def build_suites(samples: Sequence[tuple[Problem, int]], codes: dict[SampleKey, str],
                 tests: Iterable[Row], peers: bool = False) -> list[Suite]:
    """Each sample's suite: its final-stage text parsed to code (``codes``: the generator's
    stage-5 text per sample) and its kept tests (tests-table rows of every stage); with
    ``peers`` (``rewards.peer_tests``), then its peer tests (:func:`peer_tests`)."""
    tests = list(tests)
    kept = kept_tests(tests)
    pooled = peer_tests(tests) if peers else {}
    suites = []
    for problem, j in samples:
        parsed = parse_code(codes.get((problem.id, j), ""), problem.entry_point)
        suites.append(Suite(problem, j, parsed.code if parsed.ok else None,
                            parsed.reason or "no code",
                            kept.get((problem.id, j), []) + pooled.get((problem.id, j), [])))
    return suites


def problem_mutants(problem: Problem, n: int) -> list[Mutant]:
    """Deterministic AST mutants of the problem's reference, seeded by the problem id."""
    return make_mutants(problem.reference_solution, problem.entry_point, n,
                        seed=derive_seed(0, problem.id))


def sandbox_runner(sandbox: SandboxConfig) -> RunJobs:
    """The sandbox's runner under the run's limits, in this process or fanned out over Ray
    (``sandbox.executor``)."""
    return job_runner(sandbox.limits(), sandbox.placement())


def run_distinct(run_jobs: RunJobs, jobs: Sequence[tuple[str, list[str]]]) -> list[Any]:
    """``run_jobs(jobs)``'s results, each distinct job run once: a job is the pytest session of
    its program and its test modules in order, so two equal jobs are the same session and
    their verdicts are one (a step's samples often repeat one another's code, so many
    candidate jobs equal another of their step). The first copy runs, in job order.

    >>> calls = []
    >>> def run(jobs):
    ...     calls.append(len(jobs)); return [f"{code}:{len(tests)}" for code, tests in jobs]
    >>> run_distinct(run, [("a", ["t1"]), ("b", ["t1"]), ("a", ["t1"]), ("a", ["t1", "t2"])])
    ['a:1', 'b:1', 'a:1', 'a:2']
    >>> calls
    [3]
    """
    keys = [(code, tuple(tests)) for code, tests in jobs]
    distinct = list(dict.fromkeys(keys))  # first copies, in job order
    where = {key: i for i, key in enumerate(distinct)}
    results = run_jobs([(code, list(tests)) for code, tests in distinct]) if distinct else []
    return [results[where[key]] for key in keys]


def run_suites(suites: Sequence[Suite], mutants: dict[str, list[Mutant]],
               run_jobs: RunJobs) -> list[Row]:
    """Plan, run and record: the executions rows of ``suites``."""
    plan = plan_jobs(suites, mutants)
    return execution_rows(suites, plan, run_distinct(run_jobs, plan.jobs), mutants)
