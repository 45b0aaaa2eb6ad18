"""Held-out evaluation as a Prefect task (the maths: ``pipeline.heldout``).

Before the first step (``before``) and at the end of each training stage (``stage <k>``, inside
the stage's last step, before its manifest: a kill redoes the step and the evaluation with it),
the run's policies are evaluated on ``evaluation.source``. Each result goes to MLflow as
``heldout/*`` at the step it follows, to ``_run/heldout.json`` in the run store (one entry per
label, replaced when redone) and is printed in the final table; the console gets one short line
of its headline figures (:func:`heldout_line`). The first evaluation's wrong solutions are kept
in ``_run/heldout_wrong.json``: every later evaluation's tests are measured on the same ones
(``wrong_caught``). A new run's ``before`` evaluation is reused from an earlier
run's with the same adapters, problems, config and code (``lifecycle.beforecache``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from configs.names import ROLES
from lifecycle import beforecache
from lifecycle.context import RunContext
from pipeline.heldout import COLUMNS, PREFIX, heldout_metrics, wrong_solutions
from problems import load_problems

RECORD = "heldout.json"
WRONG = "heldout_wrong.json"  # the generator's wrong held-out solutions before training


# The console line's figures: the final table's first columns, under its headings (every
# figure goes to MLflow and the run store).
HEADLINE = dict(zip(COLUMNS, ("pass@1", "edge", "valid", "mutants", "bugs", "wrong"),
                    strict=True))


def heldout_line(label: str, metrics: dict[str, float]) -> str:
    """The console line of an evaluation: the headline figures it has, in the table's order.

    >>> heldout_line("stage 2", {"pass_at_1": 0.4167, "test_validity": 0.786, "new_s1": 0.5,
    ...                          "problems": 12.0})
    'held-out stage 2: pass@1 0.417, valid 0.786'
    """
    shown = ", ".join(f"{name} {metrics[key]:.3f}" for key, name in HEADLINE.items()
                      if key in metrics)
    return f"held-out {label}: {shown}"


@cache
def heldout_problems(source: str, limit: int) -> tuple:
    return tuple(load_problems(source, limit=limit))


def recorded(ctx: RunContext) -> list[dict[str, Any]]:
    return list(ctx.store.read_json(RECORD) or [])


@task(name="heldout-eval", task_run_name="heldout-eval-{label}", cache_policy=NO_CACHE)
def evaluate_heldout(ctx: RunContext, label: str, step: int) -> dict[str, float] | None:
    """Evaluate on the held-out problems (``None`` when ``evaluation.source`` is unset)."""
    ev = ctx.cfg.evaluation
    if ev.source is None:
        return None
    problems = heldout_problems(ev.source, ev.limit)
    wrong = ctx.store.read_json(WRONG)  # the first evaluation's, fixed for the run
    key = cached = None
    if label == "before" and wrong is None:  # a function of the adapters: maybe done before
        key = beforecache.before_key(ctx.cfg, {r: ctx.roles[r].version for r in ROLES},
                                     list(problems), str(ctx.policies.device))
        cached = beforecache.load(key)
    if cached is not None:
        metrics, first_wrong = cached["metrics"], cached["wrong"]
    else:
        rows, metrics = heldout_metrics(ctx.sampler, ctx.cfg, problems, wrong)
        first_wrong = wrong_solutions(rows) if wrong is None else None
        if key is not None:
            beforecache.save(key, metrics, first_wrong, ctx.run_id)
    if wrong is None:
        ctx.store.write_json(WRONG, first_wrong)
    entries = [e for e in recorded(ctx) if e["label"] != label]
    entries.append({"label": label, "step": step, "metrics": metrics})
    ctx.store.write_json(RECORD, sorted(entries, key=lambda e: e["step"]))
    if ctx.tracker is not None and ctx.mlflow_run_id:
        ctx.tracker.log_metrics(ctx.mlflow_run_id,
                                {f"{PREFIX}/{k}": v for k, v in metrics.items()}, step=step)
    print(heldout_line(label, metrics))
    if cached is not None:
        where = beforecache.CACHE_ROOT / f"{key}.json"
        print(f"held-out {label}: reused {where} (saved by run {cached.get('saved_by')}; "
              "delete it to evaluate again)")
        if ctx.tracker is not None and ctx.mlflow_run_id:
            ctx.tracker.set_tags(ctx.mlflow_run_id, {"heldout.before_cache": str(where)})
    return metrics
