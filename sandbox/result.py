"""Result records: one ``TestOutcome`` per test, one ``ExecutionResult`` per job."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# passed   the test ran to completion (all its asserts held)
# failed   an assert was false, or the candidate returned non-plain data
# error    the candidate (or the test) raised, or the code did not load / compile
# timeout  the test ran past its time limit and was killed
# crashed  the process died (signal, os._exit, memory limit, C-stack overflow)
# invalid  the test itself cannot be run (syntax error; async, yield or fixture-needing test
#          functions; a Test class with __init__; nothing pytest would run; pytest.skip)
# infra    the harness failed, not the code (a worker died, a jail did not start, the host was
#          so loaded that a process was starved past its limit): no verdict on the code, and
#          every reward leaves it out
STATUSES = ("passed", "failed", "error", "timeout", "crashed", "invalid", "infra")


@dataclass(frozen=True)
class TestOutcome:
    status: str
    message: str = ""
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass
class ExecutionResult:
    """What happened when one piece of code met its tests."""

    outcomes: list[TestOutcome]
    isolation: str
    """``bwrap+seccomp``, ``bwrap``, ``process+seccomp`` or ``process`` (weaker)."""
    output: str = ""
    """The candidate's stdout+stderr, capped; for people only, never parsed."""
    duration_s: float = 0.0
    split: list[bool] = field(default_factory=list)
    """Per test: judged in the host from plain return values (True) or run whole (False)."""
    limits: dict = field(default_factory=dict)
    """The limits every verdict ran under: ``timeout_s``, ``memory_mb``, ``fsize_mb``,
    ``nofile``, ``max_output_bytes``."""
    executor: str = "local"
    """Where the job ran: ``local`` (this process's pool) or ``ray`` (``sandbox.fanout``)."""
    node: str = ""
    """The host name (local) or the Ray node id the job ran on."""

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
