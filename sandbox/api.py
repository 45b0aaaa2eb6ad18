"""Public entry points: ``execute``, ``execute_many``, ``validate_tests``, ``Sandbox``."""

from __future__ import annotations

import atexit
import dataclasses
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from sandbox.judge import build, judge
from sandbox.pool import Pool
from sandbox.result import ExecutionResult, Limits

NO_PROGRESS_S = 30.0  # beyond the job's starvation backstop: a worker silent this long is gone
_POOLS: dict[tuple[str, int | None], Sandbox] = {}
_LOCK = threading.Lock()


def limits_with(limits: Limits | None = None, *, timeout_s: float | None = None,
                memory_mb: int | None = None, max_output_bytes: int | None = None) -> Limits:
    """``limits`` (default ``Limits()``) with the given fields replaced."""
    changes = {k: v for k, v in (("timeout_s", timeout_s), ("memory_mb", memory_mb),
                                 ("max_output_bytes", max_output_bytes)) if v is not None}
    return dataclasses.replace(limits or Limits(), **changes)


class Sandbox:
    """A pool of warm jailed workers. Use as a context manager, or through the module-level
    ``execute``/``execute_many``, which share one cached pool per (isolation, workers)."""

    def __init__(self, *, isolation: str = "auto", workers: int | None = None,
                 limits: Limits | None = None):
        self.limits = limits or Limits()
        self.pool = Pool(isolation, workers)

    @property
    def isolation(self) -> str:
        return self.pool.isolation

    def execute_many(self, jobs: Sequence[tuple[str, Sequence[str]]],
                     limits: Limits | None = None, *, timeout_s: float | None = None,
                     memory_mb: int | None = None, max_output_bytes: int | None = None
                     ) -> list[ExecutionResult]:
        """Run every (code, tests) job over the pool; results in job order. ``limits``
        (default: the pool's), with any of the given fields replaced."""
        limits = limits_with(limits or self.limits, timeout_s=timeout_s, memory_mb=memory_mb,
                             max_output_bytes=max_output_bytes)
        t0 = time.monotonic()
        prepared, futures = [], []
        for code, tests in jobs:  # submit as we go: workers start while we prepare the rest
            p = build(code, list(tests), limits)
            prepared.append(p)
            futures.append(None if p.code_error is not None or not p.wire else
                           self.pool.submit(p.msg, p.backstop_s + NO_PROGRESS_S))
        results = []
        for p, future in zip(prepared, futures, strict=True):
            reply = future.result() if future is not None else {"tests": []}
            results.append(judge(p, reply, reply.get("isolation", self.isolation),
                                 time.monotonic() - t0))
        node = socket.gethostname()  # a Ray shard re-tags its results (sandbox.fanout)
        for r in results:
            r.node = node
        return results

    def execute(self, code: str, tests: Sequence[str], limits: Limits | None = None, *,
                timeout_s: float | None = None, memory_mb: int | None = None,
                max_output_bytes: int | None = None) -> ExecutionResult:
        return self.execute_many([(code, tests)], limits, timeout_s=timeout_s,
                                 memory_mb=memory_mb, max_output_bytes=max_output_bytes)[0]

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def execute_many(jobs: Sequence[tuple[str, Sequence[str]]], limits: Limits | None = None, *,
                 timeout_s: float | None = None, memory_mb: int | None = None,
                 max_output_bytes: int | None = None, workers: int | None = None,
                 isolation: str = "auto") -> list[ExecutionResult]:
    """Run each ``(code, tests)`` job in the sandbox, in parallel over ``workers`` jailed
    workers (default: one per CPU); results come back in job order. Each test is one pytest
    test module, judged by real pytest (see ``sandbox.jailside.layout`` and
    ``sandbox.jailside.verdicts``). ``limits`` (default ``Limits()``), with any of the given
    fields replaced. Raises only ``SandboxError`` (the sandbox itself cannot work) or
    ``TypeError``/``ValueError`` for bad options; nothing a job contains (hostile code,
    hostile or malformed tests) raises: it gives a result."""
    limits = limits_with(limits, timeout_s=timeout_s, memory_mb=memory_mb,
                         max_output_bytes=max_output_bytes)
    return _shared(isolation, workers).execute_many(jobs, limits)


def execute(code: str, tests: Sequence[str], limits: Limits | None = None, *,
            timeout_s: float | None = None, memory_mb: int | None = None,
            isolation: str = "auto") -> ExecutionResult:
    """Run ``tests`` (each a string of Python: a pytest test module) against ``code``; one
    outcome per test."""
    return execute_many([(code, tests)], limits, timeout_s=timeout_s, memory_mb=memory_mb,
                        isolation=isolation)[0]


def validate_tests(reference_code: str, tests: Sequence[str], limits: Limits | None = None,
                   **options: Any) -> tuple[list[bool], ExecutionResult]:
    """Which tests are valid, i.e. the reference solution passes them; and the full result."""
    result = execute(reference_code, tests, limits, **options)
    return [o.passed for o in result.outcomes], result


def options_from_config(config: Any) -> dict[str, Any]:
    """Keyword options for ``execute_many`` from a ``configs.SandboxConfig`` (flat, so a
    caller may still override one of them, e.g. ``{**options, "timeout_s": 5.0}``)."""
    return {"timeout_s": config.timeout_s, "memory_mb": config.memory_mb,
            "max_output_bytes": config.max_output_bytes, "workers": config.workers,
            "isolation": config.isolation}
