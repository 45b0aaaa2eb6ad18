"""Run untrusted generated code against (untrusted) tests, and judge it with real pytest.

    from sandbox import Limits, Placement, execute, execute_many, job_runner, validate_tests
    result = execute(code, ["assert add(1, 2) == 3", "def test_x():\\n    assert add(0, 0) == 0"])
    result.passed, result.total, result.outcomes[0].status, result.isolation
    run = job_runner(Limits(timeout_s=5.0), Placement(workers=2))  # a batch's runner, typed
    results = run([(code, tests), ...])

    python -m sandbox run --code solution.py --tests test_solution.py [--json]

Each test string is one pytest test module, run by real pytest in a jailed test process
against the candidate module ``solution``, which runs as real CPython in a second jailed
process; the host reads only pytest's own outcomes. ``docs/sandbox.md`` has the design, the
verdict table (``jailside.verdicts``), the budgets and every clock on the verdict path, what
is protected and the deliberate deviations from pytest.

Host side: ``api`` (entry points), ``runners`` (a batch's runner, local or Ray), ``judge``
(the job's message; verdicts from the reply), ``pool`` (warm workers; re-runs alone; who is
charged), ``jail`` (bubblewrap), ``result`` (records; ``Limits`` and ``Placement``, the
defaults, declared in ``configs.limits``), ``fanout`` (Ray). Jail side (stdlib-only until
pytest is imported): ``jailside``.
"""

from sandbox.api import RunJobs, Sandbox, close_all, execute, execute_many, validate_tests
from sandbox.jail import SandboxError
from sandbox.result import (
    EXECUTORS,
    ISOLATIONS,
    STATUSES,
    ExecutionResult,
    Limits,
    Placement,
    TestOutcome,
    Trusted,
)
from sandbox.runners import job_runner

__all__ = ["EXECUTORS", "ISOLATIONS", "STATUSES", "ExecutionResult", "Limits", "Placement",
           "RunJobs", "Sandbox", "SandboxError", "TestOutcome", "Trusted", "close_all", "execute",
           "execute_many", "job_runner", "validate_tests"]
