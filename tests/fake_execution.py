"""Sandbox stand-ins for the execution stage's tests: suites of the demo problem ``add`` (the
``add`` fixture, conftest.py), jobs run in this process, and results shaped like
``sandbox.ExecutionResult``. No sandbox, model or Prefect."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.execution import Suite
from rewards import INFRA

LIMITS = {"timeout_s": 2.0, "memory_mb": 256, "nofile": 64}  # what every FakeResult reports


@dataclass
class FakeOutcome:
    status: str
    message: str = ""
    duration_s: float = 0.01


@dataclass
class FakeResult:
    outcomes: list
    isolation: str = "fake"
    limits: dict = field(default_factory=lambda: dict(LIMITS))


@dataclass
class LegacyResult:  # an ExecutionResult from before the sandbox reported its limits
    outcomes: list
    isolation: str = "fake"


def suite(add, j: int, code: str | None, snippets: list[str]) -> Suite:
    """Sample ``j``'s ``code`` (None: no fenced code) with ``snippets`` as its stage-1
    discriminator tests, followed by the problem's first baseline test."""
    tests = [{"test_id": f"s1.{i}", "snippet": s, "stage": 1, "origin": "discriminator",
              "test_idx": i} for i, s in enumerate(snippets)]
    tests.append({"test_id": "b.0", "snippet": add.baseline_tests[0], "stage": 0,
                  "origin": "baseline", "test_idx": 0})
    return Suite(add, j, code, "no fenced code" if code is None else "", tests)


def run_in_process(plan, infra: dict | None = None, result=FakeResult) -> list:
    """One ``result`` per job of ``plan``: the code exec'd here, each test exec'd in a copy of
    its namespace, "passed" or "failed" (AssertionError). A test in ``infra[(kind, sample)]``
    (the job's target kind and sample index) is not run: its verdict is INFRA, "worker died"."""
    results = []
    for (kind, _, _, j), (code, tests) in zip(plan.targets, plan.jobs, strict=True):
        ns: dict = {}
        exec(code, ns)
        outcomes = []
        for t in tests:
            if t in (infra or {}).get((kind, j), ()):
                outcomes.append(FakeOutcome(INFRA, "worker died"))
                continue
            try:
                exec(t, dict(ns))
                outcomes.append(FakeOutcome("passed"))
            except AssertionError:
                outcomes.append(FakeOutcome("failed"))
        results.append(result(outcomes))
    return results
