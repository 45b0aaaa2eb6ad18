"""A batch's runner under typed ``Limits`` and ``Placement``: ``execute_many`` on this process's
cached pool, or fanned out over Ray (``sandbox.fanout``). Its own module because it is the one
place that chooses between the two, and each shard of the Ray executor runs ``execute_many``
itself: in ``sandbox.api`` it would make the two modules import each other."""

from __future__ import annotations

from collections.abc import Sequence

from sandbox.api import Job, RunJobs, execute_many
from sandbox.fanout import RayExecutor
from sandbox.result import ExecutionResult, Limits, Placement


def job_runner(limits: Limits, placement: Placement) -> RunJobs:
    """A batch's runner: ``execute_many`` under ``limits`` on this process's cached pool, or
    fanned out over Ray (``placement.executor``). Only where the jobs run differs; the limits,
    the isolation and so the verdicts do not."""
    if placement.executor == "ray":
        return RayExecutor(limits, isolation=placement.isolation,
                           address=placement.ray_address, shards=placement.ray_shards)

    def run_locally(jobs: Sequence[Job]) -> list[ExecutionResult]:
        return execute_many(jobs, limits, workers=placement.workers,
                            isolation=placement.isolation)

    return run_locally
