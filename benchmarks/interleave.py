"""Timing two or more ways of doing the same work under the same load.

The machine is shared and noisy, so a benchmark never times one way and then the other: it
runs each way in turn, repeat after repeat (load that comes and goes hits them alike), and
quotes medians. :func:`interleaved` is that loop, for every benchmark here that compares ways.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Timed:
    """One way's repeats: wall seconds and what each call returned, in order."""

    seconds: list[float] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def listing(self, scale: float = 1.0, digits: int = 3) -> str:
        """Every repeat's seconds times ``scale`` (1e3: milliseconds), for the printout.

        >>> Timed([0.25, 0.5]).listing(1e3, 1)
        '[250.0, 500.0]'
        """
        return "[" + ", ".join(f"{s * scale:.{digits}f}" for s in self.seconds) + "]"


def interleaved(ways: Mapping[str, Callable[[], Any]], repeats: int) -> dict[str, Timed]:
    """Each of ``ways`` called in turn, ``repeats`` rounds; per way its seconds and results.

    >>> calls = []
    >>> out = interleaved({"a": lambda: calls.append("a") or 1,
    ...                    "b": lambda: calls.append("b") or 2}, 2)
    >>> calls, out["a"].results, out["b"].results, len(out["a"].seconds)
    (['a', 'b', 'a', 'b'], [1, 1], [2, 2], 2)
    """
    timed = {name: Timed() for name in ways}
    for _ in range(repeats):
        for name, way in ways.items():
            start = time.perf_counter()
            result = way()
            timed[name].seconds.append(time.perf_counter() - start)
            timed[name].results.append(result)
    return timed
