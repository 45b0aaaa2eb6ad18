"""Where a training step's wall-clock time goes: generation, sandbox, PPO maths, the rest.

``generation`` is the sampling time the chains rows record (``latency_s`` per row, the batch's
time shared out), ``ppo`` the update's own ``duration_s``, ``sandbox`` the execute item's wall
time, ``heldout`` the held-out evaluation a stage's last step runs (its own generation and
sandbox work, on other problems); ``other`` is everything else in the step (Prefect tasks,
Parquet reads and writes, prompt building, parsing, scoring, the resume state and MLflow): the
overhead a user pays for the pipeline's records. Under ``sampling.engine=vllm`` the engine's
start-up (``engine_start``, the step that starts it) is its own part, and the adapter pushes
(``engine_sync``, inside ``generation``) are shown too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def step_breakdown(total_s: float, item_s: Mapping[str, float],
                   chains: Iterable[Mapping[str, Any]],
                   updates: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """``time/*`` metrics of one step.

    >>> b = step_breakdown(12.0, {"execute": 2.0, "heldout": 2.0},
    ...                    [{"latency_s": 3.0}, {"latency_s": 2.5}], [{"duration_s": 1.5}])
    >>> b["time/generation_s"], b["time/ppo_s"], b["time/sandbox_s"], b["time/other_s"]
    (5.5, 1.5, 2.0, 1.0)
    >>> b["time/heldout_s"], round(b["time/other_fraction"], 3)
    (2.0, 0.083)
    """
    generation = float(sum(float(r["latency_s"] or 0.0) for r in chains))
    ppo = float(sum(float(r["duration_s"] or 0.0) for r in updates))
    sandbox = float(item_s.get("execute", 0.0))
    heldout = float(item_s.get("heldout", 0.0))
    start = float(item_s.get("engine_start", 0.0))
    other = max(total_s - generation - ppo - sandbox - heldout - start, 0.0)
    out = {"time/step_s": total_s, "time/generation_s": generation, "time/ppo_s": ppo,
           "time/sandbox_s": sandbox, "time/heldout_s": heldout, "time/other_s": other,
           "time/other_fraction": other / total_s if total_s > 0 else 0.0}
    if "engine_start" in item_s:  # sampling.engine=vllm: its start-up (the first step only),
        # and its adapter pushes (a part of generation_s)
        out["time/engine_start_s"] = start
        out["time/engine_sync_s"] = float(item_s.get("engine_sync", 0.0))
    return out


def mean_breakdown(steps: Sequence[Mapping[str, float]]) -> str:
    """One summary line: mean seconds per step by part, and the share of the training work
    (the step less its held-out evaluation) outside generation and PPO maths.

    >>> mean_breakdown([step_breakdown(12.0, {"execute": 2.0, "heldout": 2.0},
    ...                                [{"latency_s": 5.5}], [{"duration_s": 1.5}])])
    '12.0 s/step: generation 5.5, sandbox 2.0, PPO 1.5, other 1.0, held-out eval 2.0 (30% of \
the training work outside generation and PPO)'
    """
    if not steps:
        return "(no step timed in this process)"
    mean = {k: sum(s.get(k, 0.0) for s in steps) / len(steps) for k in steps[0]}
    training = max(mean["time/step_s"] - mean.get("time/heldout_s", 0.0), 1e-9)
    outside = 1 - (mean["time/generation_s"] + mean["time/ppo_s"]) / training
    return (f"{mean['time/step_s']:.1f} s/step: generation {mean['time/generation_s']:.1f}, "
            f"sandbox {mean['time/sandbox_s']:.1f}, PPO {mean['time/ppo_s']:.1f}, other "
            f"{mean['time/other_s']:.1f}, held-out eval {mean.get('time/heldout_s', 0.0):.1f} "
            f"({outside:.0%} of the training work outside generation and PPO)")
