"""Result records: one ``TestOutcome`` per test, one ``ExecutionResult`` per job."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# passed   the test ran to completion (all its asserts held)
# failed   an assert was false, or the candidate returned non-plain data
# error    the candidate (or the test) raised, or the code did not load / compile
# timeout  the test ran past its time limit and was killed
# crashed  the process died (signal, os._exit, memory limit, C-stack overflow)
# invalid  the test itself is not runnable Python (syntax error)
STATUSES = ("passed", "failed", "error", "timeout", "crashed", "invalid")


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
    def all_passed(self) -> bool:
        return bool(self.outcomes) and self.passed == self.total

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(passed=self.passed, total=self.total)
        return out
