"""Public entry points: ``execute``, ``execute_many``, ``validate_tests``, ``Sandbox``."""

from __future__ import annotations

import atexit
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from sandbox.judge import budget_s, build, judge
from sandbox.pool import Pool
from sandbox.result import ExecutionResult, TestOutcome

DEFAULTS: dict[str, Any] = {"timeout_s": 2.0, "memory_mb": 512, "max_output_bytes": 65536}
_POOLS: dict[tuple[str, int | None], Sandbox] = {}
_LOCK = threading.Lock()


class Sandbox:
    """A pool of warm jailed workers. Use as a context manager, or through the module-level
    ``execute``/``execute_many``, which share one cached pool per (isolation, workers)."""

    def __init__(self, *, isolation: str = "auto", workers: int | None = None, **options: Any):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown sandbox option(s): {', '.join(sorted(unknown))}")
        self.options = {**DEFAULTS, **options}
        self.pool = Pool(isolation, workers)

    @property
    def isolation(self) -> str:
        return self.pool.isolation

    def execute_many(self, jobs: Sequence[tuple[str, Sequence[str]]],
                     **options: Any) -> list[ExecutionResult]:
        """Run every (code, tests) job over the pool; results in job order."""
        opts = {**self.options, **options}
        t0 = time.monotonic()
        prepared, futures = [], []
        for code, tests in jobs:  # submit as we go: workers start while we plan the rest
            tests = list(tests)
            try:
                prepared.append(build(code, tests, timeout_s=opts["timeout_s"],
                                      memory_mb=opts["memory_mb"],
                                      max_output_bytes=opts["max_output_bytes"]))
            except Exception as exc:  # planning is bounded; anything left is this job's alone
                prepared.append(_unprepared(len(tests), exc))
                futures.append(None)
                continue
            futures.append(self.pool.submit(prepared[-1].msg, budget_s(prepared[-1])))
        results = []
        for p, future in zip(prepared, futures, strict=True):
            if future is None:
                results.append(p)
                continue
            reply = future.result()  # SandboxError if no worker could start
            results.append(judge(p, reply, reply.get("isolation", self.isolation),
                                 time.monotonic() - t0))
        node = socket.gethostname()  # a Ray shard re-tags its results (sandbox.fanout)
        for r in results:
            r.node = node
        return results

    def execute(self, code: str, tests: Sequence[str], **options: Any) -> ExecutionResult:
        return self.execute_many([(code, tests)], **options)[0]

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _unprepared(n_tests: int, exc: Exception) -> ExecutionResult:
    message = f"job could not be prepared: {type(exc).__name__}: {str(exc)[:200]}"
    return ExecutionResult([TestOutcome("error", message)] * n_tests, "none")


def _shared(isolation: str, workers: int | None) -> Sandbox:
    key = (isolation, workers)
    with _LOCK:
        if key not in _POOLS:
            _POOLS[key] = Sandbox(isolation=isolation, workers=workers)
        return _POOLS[key]


@atexit.register
def close_all() -> None:
    """Stop every cached pool (also run at interpreter exit)."""
    with _LOCK:
        for sandbox in _POOLS.values():
            sandbox.close()
        _POOLS.clear()


def execute_many(jobs: Sequence[tuple[str, Sequence[str]]], *, timeout_s: float = 2.0,
                 workers: int | None = None, isolation: str = "auto",
                 **options: Any) -> list[ExecutionResult]:
    """Run each ``(code, tests)`` job in the sandbox, in parallel over ``workers`` jailed
    workers (default: one per CPU); results come back in job order. Options: ``memory_mb``,
    ``max_output_bytes``. Raises only ``SandboxError`` (the sandbox itself cannot work) or
    ``TypeError``/``ValueError`` for bad options; nothing a job contains (hostile code, hostile
    or malformed tests, forged replies) raises: it gives a result."""
    return _shared(isolation, workers).execute_many(jobs, timeout_s=timeout_s, **options)


def execute(code: str, tests: Sequence[str], *, timeout_s: float = 2.0, isolation: str = "auto",
            **options: Any) -> ExecutionResult:
    """Run ``tests`` (each a string of Python) against ``code``; one outcome per test."""
    return execute_many([(code, tests)], timeout_s=timeout_s, isolation=isolation,
                        **options)[0]


def validate_tests(reference_code: str, tests: Sequence[str], **options: Any
                   ) -> tuple[list[bool], ExecutionResult]:
    """Which tests are valid, i.e. the reference solution passes them; and the full result."""
    result = execute(reference_code, tests, **options)
    return [o.passed for o in result.outcomes], result


def options_from_config(config: Any) -> dict[str, Any]:
    """Keyword options for ``execute``/``execute_many`` from a ``configs.SandboxConfig``."""
    return {"timeout_s": config.timeout_s, "memory_mb": config.memory_mb,
            "workers": config.workers, "isolation": config.isolation,
            "max_output_bytes": config.max_output_bytes}
