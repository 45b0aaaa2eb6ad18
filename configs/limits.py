"""What a sandbox job may use (``Limits``) and where a batch of jobs runs (``Placement``): the
sandbox's defaults, declared once. The judge (``sandbox``), its command line and the run
config's ``sandbox:`` section (``configs.SandboxConfig`` takes its defaults from these) all
start from them; ``sandbox`` re-exports both.

Configuration, not judging: this module imports nothing of the project, so the config reads
the sandbox's defaults without importing the judge.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

ISOLATIONS = ("auto", "bwrap", "process")
"""What a pool may ask for: ``auto`` (bubblewrap when it works, else process limits), ``bwrap``
(required) or ``process`` (rlimits and a scrubbed environment only)."""
EXECUTORS = ("local", "ray")
"""Where a batch of jobs runs: ``local`` (a pool in this process) or ``ray``
(``sandbox.fanout``)."""


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
    """Where a batch of jobs runs (``sandbox.runners.job_runner``); it never changes a verdict,
    only which processes give it."""

    isolation: str = "auto"
    """One of ``ISOLATIONS``."""
    workers: int | None = None
    """Jailed workers of a local pool; ``None`` means one per CPU. A Ray shard runs on its own
    pool of one worker (``sandbox.fanout.RayExecutor``)."""
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
