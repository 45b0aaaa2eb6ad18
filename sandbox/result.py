"""Result records: one ``TestOutcome`` per test, one ``ExecutionResult`` per job.

``Limits`` (what a job may use) and ``Placement`` (where jobs run) hold the sandbox's defaults;
they are configuration, declared in ``configs.limits`` and re-exported here and by ``sandbox``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from configs.limits import EXECUTORS, ISOLATIONS, Limits, Placement
from sandbox.jailside.verdicts import ItemResult

__all__ = ["EXECUTORS", "ISOLATIONS", "STATUSES", "ExecutionResult", "Limits", "Placement",
           "TestOutcome", "Trusted"]

# passed   pytest ran the test module and it held (see ``jailside.verdicts`` for the table)
# failed   an assert (or pytest.fail / raises / warns) failed
# error    the test raised something else, or the candidate did not import
# skipped  pytest skipped it or it xfailed: no verdict on the code, and no credit
# timeout  a step of the test used more than its CPU budget, or slept/blocked past it
# crashed  the candidate's process died (signal, os._exit, memory limit, C-stack overflow)
#          while the test ran, or did so twice in a fresh jail
# invalid  the test itself cannot run (it does not compile; it defines nothing to run)
# infra    the harness failed, not the code, and running the job again alone did not give
#          a verdict either: no verdict on the code, and every reward leaves it out
STATUSES = ("passed", "failed", "error", "skipped", "timeout", "crashed", "invalid", "infra")


class Trusted(str):
    """A test string whose author is trusted (a problem's own tests, written by people, never
    by the policy being trained). A job's trusted tests share one pytest session, as one
    pytest run over their files would, which is cheaper; every other test string runs alone,
    in a test process and a candidate process of its own, so that nothing it does (patching
    pytest, writing reports, crashing, leaving files or state behind) changes another test's
    verdict. A plain ``str`` is never trusted."""

    __slots__ = ()


@dataclass(frozen=True)
class TestOutcome:
    status: str
    message: str = ""
    duration_s: float = 0.0
    items: tuple[ItemResult, ...] = ()
    """pytest's own outcome of each item of the test module, in run order (empty when the
    sandbox decided the status itself: timeout, crashed, infra, ...)."""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class ExecutionResult:
    """What happened when one piece of code met its tests."""

    outcomes: list[TestOutcome]
    isolation: str
    """``bwrap+seccomp+pidns``, ``bwrap+seccomp``, ``process+seccomp``, ``process``... (what
    was in force; anything short of bubblewrap is weaker)."""
    output: str = ""
    """The candidate's stdout+stderr outside calls, capped; for people only, never parsed."""
    duration_s: float = 0.0
    limits: dict = field(default_factory=dict)
    """``Limits.to_dict()`` of the limits every verdict ran under."""
    executor: str = "local"
    """Where the job ran: ``local`` (this process's pool) or ``ray`` (``sandbox.fanout``)."""
    node: str = ""
    """The host name (local) or the Ray node id the job ran on."""
    attempts: int = 1
    """Runs it took: 2 when the first failed in the harness and the job ran again alone."""
    cpu_s: float = 0.0
    """CPU seconds the job's candidate and test processes used (the budgets' measure)."""
    cost: dict = field(default_factory=dict)
    """Where the job's time went, for benchmarks: ``candidate_cpu_s`` and ``tests_cpu_s`` (its
    Cs and Ts), ``worker_s`` (the worker's wall clock on it) and ``sessions``."""

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def pass_rate(self) -> float:
        return self.passed / self.total if self.outcomes else 0.0

    @property
    def infra(self) -> int:
        """Tests with no verdict because the harness failed (see ``STATUSES``)."""
        return sum(o.status == "infra" for o in self.outcomes)

    @property
    def all_passed(self) -> bool:
        return bool(self.outcomes) and self.passed == self.total

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(passed=self.passed, total=self.total, infra=self.infra)
        return out
