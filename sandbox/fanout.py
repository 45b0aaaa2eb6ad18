"""Sandbox fan-out on Ray: one step's jobs split into shards that run as Ray tasks.

``sandbox.executor: ray`` in a run's config swaps the execute step's runner (see
``pipeline.execution.sandbox_runner``) for a :class:`RayExecutor`; the flow, the planning and
the recording do not change. What a shard does is what the local executor does: the same
``execute_many`` over the same jailed, warm worker pool (``sandbox.api``), so isolation, limits
and verdicts are the same. Only where it runs differs, and each result says so
(``ExecutionResult.executor``/``node``, recorded in every executions row).

Why Ray directly rather than a Prefect task runner: the shards are a data-parallel map inside
one step's execute task. As Prefect tasks they would add a task run per shard to the UI and an
API round trip each, and the flow would have to know about sharding; here the flow reads as
before and Ray does what it is built for (placement, retries of lost workers, object
transfer).

- Shards are strided (shard ``k`` holds jobs ``k, k+S, k+2S, ...``): the planner puts a
  problem's reference and mutant jobs after its candidates, so contiguous shards would be
  uneven. Results come back in job order.
- Each Ray task asks for one CPU and runs its shard on a pool of ``workers_per_shard`` jailed
  workers (default 1). Ray reuses its worker processes, and ``execute_many``'s pool is cached
  per process, so after the first step a shard finds its jails warm.
- A Ray worker or node lost mid-shard is infrastructure: Ray re-runs the shard (up to
  ``INFRA_RETRIES`` times; a shard is pure, re-running it is safe). Should that still fail, the
  step's execute task fails with :class:`FanoutError` and Prefect retries the task; a lost
  worker never becomes a candidate's verdict. Exceptions raised *by* the sandbox (it cannot
  start a jail at all) are not retried by Ray: they fail the same way everywhere.
- ``ray`` is imported only here and only when a Ray executor is built: ``make run`` and the
  test suite's other tests never start or import it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from sandbox.api import Job, execute_many
from sandbox.jail import SandboxError
from sandbox.result import ExecutionResult, Limits, Placement

INFRA_RETRIES = 3
"""Times Ray re-runs a shard whose worker or node died (system failures only)."""


class FanoutError(RuntimeError):
    """A shard could not be run on the Ray cluster (workers or nodes lost past the retries,
    cluster unreachable): infrastructure, never a verdict on the code."""


def shard_indices(n_jobs: int, n_shards: int) -> list[list[int]]:
    """Job indices per shard, strided; no empty shard.

    >>> shard_indices(5, 2), shard_indices(2, 4), shard_indices(0, 3)
    ([[0, 2, 4], [1, 3]], [[0], [1]], [])
    """
    n = max(1, min(n_shards, n_jobs))
    return [list(range(k, n_jobs, n)) for k in range(n)] if n_jobs else []


def merge_shards(shards: Sequence[Sequence[int]], results: Sequence[Sequence[Any]],
                 n_jobs: int) -> list[Any]:
    """Per-shard results back in job order; refuses a shard that answered the wrong count.

    >>> merge_shards([[0, 2], [1]], [["a", "c"], ["b"]], 3)
    ['a', 'b', 'c']
    """
    out: list[Any] = [None] * n_jobs
    filled = 0
    for idx, res in zip(shards, results, strict=True):
        if len(idx) != len(res):
            raise FanoutError(f"a shard of {len(idx)} jobs returned {len(res)} results")
        for i, r in zip(idx, res, strict=True):
            out[i] = r
            filled += 1
    if filled != n_jobs:
        raise FanoutError(f"shards covered {filled} of {n_jobs} jobs")
    return out


def run_shard(jobs: list[Job], limits: Limits, isolation: str,
              workers: int) -> tuple[list[ExecutionResult], str]:
    """The body of one Ray task: ``execute_many`` on this worker's cached pool. Returns the
    results (each tagged with this Ray node) and the node id."""
    import ray  # deferred here and below: only a Ray executor imports Ray (module docstring)

    node = ray.get_runtime_context().get_node_id()
    results = execute_many(jobs, limits, workers=workers, isolation=isolation)
    for r in results:
        r.executor, r.node = "ray", node
    return results, node


class RayExecutor:
    """A ``run_jobs`` callable (``jobs -> results in job order``) that fans out over Ray.

    ``address``: a Ray cluster (``ray://...`` or ``host:port``); ``None`` means ``$RAY_ADDRESS``
    when set, else a Ray instance started in this process. ``shards``: tasks per call (default:
    the cluster's CPUs, at most one per job). Each shard runs under ``limits`` on a pool of
    ``workers_per_shard`` workers at ``isolation`` (``sandbox.runners.job_runner`` builds one from a
    ``Placement``)."""

    def __init__(self, limits: Limits, *, isolation: str = Placement.isolation,
                 address: str | None = None, shards: int | None = None,
                 workers_per_shard: int = 1) -> None:
        import ray  # deferred: see run_shard

        self.limits, self.isolation, self.workers_per_shard = limits, isolation, workers_per_shard
        self.shards = shards
        # "local": a new instance; without it ray.init would join the newest `ray start` cluster
        # on this machine, whoever started it
        address = address or os.environ.get("RAY_ADDRESS") or "local"
        if not ray.is_initialized():
            try:
                ray.init(address=address, log_to_driver=False, include_dashboard=False,
                         configure_logging=False)
            except Exception as exc:  # noqa: BLE001 - ray raises many kinds here
                raise FanoutError(f"cannot connect to Ray at {address} (local: a new instance)"
                                  f": {type(exc).__name__}: {exc}") from exc
        self._remote = ray.remote(num_cpus=1, max_retries=INFRA_RETRIES,
                                  retry_exceptions=False)(run_shard)
        self.last_nodes: list[str] = []
        """Node id of each shard of the latest call (for people and benchmarks)."""

    def n_shards(self, n_jobs: int) -> int:
        import ray  # deferred: see run_shard

        if self.shards:
            return min(self.shards, n_jobs)
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        return min(cpus, n_jobs)

    def __call__(self, jobs: Sequence[Job]) -> list[ExecutionResult]:
        import ray  # deferred: see run_shard

        jobs = [(code, list(tests)) for code, tests in jobs]
        shards = shard_indices(len(jobs), self.n_shards(len(jobs)) if jobs else 1)
        refs = [self._remote.remote([jobs[i] for i in idx], self.limits, self.isolation,
                                    self.workers_per_shard) for idx in shards]
        try:
            answered = ray.get(refs)
        except (ray.exceptions.RayTaskError, ray.exceptions.RayError) as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, SandboxError):
                raise cause from exc  # the sandbox itself cannot work: same as locally
            raise FanoutError(f"a sandbox shard failed on Ray past {INFRA_RETRIES} retries: "
                              f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        self.last_nodes = [node for _, node in answered]
        return merge_shards(shards, [res for res, _ in answered], len(jobs))


def shutdown() -> None:
    """Disconnect this process from Ray (stops an instance it started itself)."""
    if "ray" in sys.modules:
        import ray  # only when already imported: shutting down never loads Ray

        if ray.is_initialized():
            ray.shutdown()
