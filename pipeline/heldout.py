"""Held-out evaluation: how the two policies do on problems the run never trains on.

Run before the first training step and after each training stage (``tasks/heldout.py``) with
the run's own policies, through the same code as ``flows.evaluate``
(:func:`pipeline.evaluation.evaluate_engine`): the five-stage chain, the discriminator's tests
per stage, execution in the sandbox. A procedural family's problem (``problems/family.py``) is
judged on its **hidden suite** (main and edge path), which no training code sees; any other
problem on its own tests. Sampling uses the run's settings and a fixed seed, so every
evaluation of a run draws with the same seeds and before/after differ only by the adapters.

Figures (``heldout/*`` in MLflow, ``_run/heldout.json`` in the run store, the final table):

* ``pass_at_1``: share of samples whose code passes every test of the (hidden) suite;
* ``edge_pass_rate``: family problems only, share of samples passing every edge-path test;
* ``test_validity``: share of the discriminator's distinct tests the reference passes;
* ``mutation_kill_rate``: share of reference mutants its valid tests reject;
* ``bugs_caught``: its valid tests the sample's code fails, per sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pipeline.evaluation import EVAL_REPORT, evaluate_engine
from pipeline.execution import sandbox_runner
from problems.family import is_family

PREFIX = "heldout"
COLUMNS = ("pass_at_1", "edge_pass_rate", "test_validity", "mutation_kill_rate", "bugs_caught")


def hidden_problem(problem: Any) -> Any:
    """``problem`` as evaluation judges it: a family problem with its hidden suite as its tests
    (``edge_tests`` attached for the edge pass rate), any other unchanged."""
    if not is_family(problem):
        return problem
    from problems.family import hidden_tests

    return replace(problem, baseline_tests=tuple(hidden_tests(problem.id)))


def edge_pass_rate(rows: Sequence[dict[str, Any]], codes: dict[tuple[str, int], Any],
                   problems: dict[str, Any], run_jobs: Any) -> float | None:
    """Share of family samples whose code passes every edge-path test (None: no family
    problem). ``codes`` maps (problem id, sample) to the parsed code or None."""
    from problems.family import edge_tests

    family = [r for r in rows if is_family(problems[r["problem_id"]])]
    if not family:
        return None
    jobs = []
    for r in family:
        code = codes.get((r["problem_id"], r["sample_idx"]))
        if code is not None:
            jobs.append((problems[r["problem_id"]].program(code), edge_tests(r["problem_id"])))
    passed = sum(out.all_passed for out in run_jobs(jobs)) if jobs else 0
    return passed / len(family)


def heldout_metrics(policies: Any, cfg: Any, problems: Sequence[Any]
                    ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Evaluate ``policies`` (left with the generator active) on ``problems``; returns the
    ``evaluations`` rows and the figures of the module docstring (keys without prefix)."""
    from models.inference import InferenceEngine

    engine = InferenceEngine(policies, cfg, {"generator": None, "discriminator": None})
    judged = [hidden_problem(p) for p in problems]
    rows, metrics = evaluate_engine(engine, judged, samples=cfg.evaluation.samples, ks=(1,),
                                    direct=False, tests=True, model="run")
    policies.activate("generator")
    codes = {(r["problem_id"], r["sample_idx"]): r["code"] for r in rows}

    samples = max(len(rows), 1)
    bugs = sum(v for k, v in metrics.items()
               if k.startswith(f"{EVAL_REPORT}/") and k.endswith("/bugs_caught"))
    out = {"pass_at_1": metrics.get("eval/pass_at_1"),
           "edge_pass_rate": edge_pass_rate(rows, codes, {p.id: p for p in judged},
                                            sandbox_runner(cfg.sandbox)),
           "test_validity": metrics.get("eval/test_validity"),
           "mutation_kill_rate": metrics.get("eval/mutation_kill_rate"),
           "bugs_caught": bugs / samples,
           "problems": float(len(problems)), "samples": float(len(rows))}
    return rows, {k: float(v) for k, v in out.items() if v is not None}


def heldout_table(results: Sequence[dict[str, Any]], source: str) -> str:
    """The seeds' per-stage table on held-out problems: one row per evaluation (``before``,
    ``stage 1`` ...), from ``_run/heldout.json`` entries ``{label, step, metrics}``.

    >>> print(heldout_table([{"label": "before", "step": 0, "metrics": {"pass_at_1": 0.25,
    ...     "problems": 4.0, "samples": 4.0}}], "family:piecewise:heldout").splitlines()[2])
    before         0     0.250       -       -       -       -
    """
    if not results:
        return "(no held-out evaluation)"
    n = int(results[0]["metrics"].get("problems", 0))
    lines = [f"held-out: {source}, {n} problems never trained on (family problems judged on "
             "their hidden suite)",
             f"{'after':<10} {'step':>5}  {'pass@1':>8}  {'edge':>6}  {'valid':>6}  "
             f"{'mutants':>6}  {'bugs':>6}"]
    for r in results:
        m = r["metrics"]
        cells = [f"{m[c]:.3f}" if c in m else "-" for c in COLUMNS]
        lines.append(f"{r['label']:<10} {r['step']:>5}  {cells[0]:>8}  {cells[1]:>6}  "
                     f"{cells[2]:>6}  {cells[3]:>6}  {cells[4]:>6}")
    return "\n".join(lines)
