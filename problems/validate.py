"""Execution checks of problems: does each reference pass its own baseline tests?

    from problems.validate import execution_issues
    issues = execution_issues(problems)       # one ProblemIssue per failing baseline test

Runs everything through the sandbox. ``problems.vet`` builds on it for ``python -m problems
validate`` and training runs: the same check, plus recorded-format repairs and a report.
"""

from __future__ import annotations

from collections.abc import Sequence

from problems.model import Problem, ProblemIssue
from sandbox import Limits, Placement, Trusted, execute_many

VET_LIMITS = Limits(timeout_s=5.0)
"""What a reference may use when a problem file is checked on its own (``python -m problems
validate``, :func:`execution_issues`): more time per step than a training run's default, so a
slow reference on a busy machine is not reported as a broken problem. A training run vets under
its own ``sandbox`` limits instead."""


def execution_issues(problems: Sequence[Problem], limits: Limits = VET_LIMITS, *,
                     workers: int | None = Placement.workers,
                     isolation: str = Placement.isolation) -> list[ProblemIssue]:
    """Run each problem's reference program against its baseline tests; report every test the
    reference does not pass (status and message from the sandbox)."""
    results = execute_many([(p.reference_program, [Trusted(t) for t in p.baseline_tests])
                            for p in problems],
                           limits, workers=workers, isolation=isolation)
    issues = []
    for index, (problem, result) in enumerate(zip(problems, results, strict=True)):
        for i, outcome in enumerate(result.outcomes):
            if not outcome.passed:
                issues.append(ProblemIssue(
                    source=problem.source, index=index, problem_id=problem.id,
                    field=f"baseline_tests[{i}]",
                    reason=f"reference fails it: {outcome.status}: {outcome.message}"))
    return issues
