"""Result records: one ``TestOutcome`` per test, one ``ExecutionResult`` per job, the
``Limits`` every verdict ran under and the ``Placement`` that says where jobs run.

``Limits`` and ``Placement`` hold the sandbox's defaults, in one place: the run config
(``configs.SandboxConfig`` takes its defaults from them), the command lines and the API all
start from these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from sandbox.jailside.verdicts import ItemResult

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


ISOLATIONS = ("auto", "bwrap", "process")
"""What a pool may ask for: ``auto`` (bubblewrap when it works, else process limits), ``bwrap``
(required) or ``process`` (rlimits and a scrubbed environment only)."""
EXECUTORS = ("local", "ray")
"""Where a batch of jobs runs: ``local`` (a pool in this process) or ``ray`` (``fanout``)."""


@dataclass(frozen=True)
class Limits:
    """What a job may use. One place for the defaults: the config (``SandboxConfig``), the
    command line and the API all start from these."""

    timeout_s: float = 2.0
    """CPU seconds per step of a test (the candidate's import, a module's collection, its run),
    and as many seconds of sleeping or blocking."""
    memory_mb: int = 512
    """Address space of each jailed process."""
    max_output_bytes: int = 65536
    """The candidate's printed output kept for people (never parsed)."""
    fsize_mb: int = 16
    """Largest file a jailed process may write."""
    nofile: int = 256
    """Open file descriptors per jailed process."""

    def __post_init__(self) -> None:
        if not (isinstance(self.timeout_s, int | float) and 0 < self.timeout_s <= 3600):
            raise ValueError(f"timeout_s must be in (0, 3600] seconds, got {self.timeout_s!r}")
        for name in ("memory_mb", "max_output_bytes", "fsize_mb", "nofile"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                raise ValueError(f"{name} must be a positive int, got {value!r}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Placement:
    """Where a batch of jobs runs (``runners.job_runner``); it never changes a verdict, only which
    processes give it."""

    isolation: str = "auto"
    """One of ``ISOLATIONS``."""
    workers: int | None = None
    """Jailed workers of a local pool; ``None`` means one per CPU. A Ray shard runs on its own
    pool of one worker (``fanout.RayExecutor``)."""
    executor: str = "local"
    """One of ``EXECUTORS``."""
    ray_address: str | None = None
    """With ``executor='ray'``: the cluster; ``None`` means ``$RAY_ADDRESS`` when set, else a
    Ray instance started in this process."""
    ray_shards: int | None = None
    """With ``executor='ray'``: Ray tasks per batch; ``None`` means one per CPU of the cluster."""

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATIONS)}, "
                             f"got {self.isolation!r}")
        if self.executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, "
                             f"got {self.executor!r}")
        for name in ("workers", "ray_shards"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name} must be an int >= 1 or None, got {value!r}")


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
