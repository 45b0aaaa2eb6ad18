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
* ``bugs_caught``: its valid tests the sample's code fails, per sample;
* ``wrong_caught``: share of the run's first evaluation's wrong solutions (code that fails the
  hidden suite, written by the generator before any training: in a learning-rate-0 control,
  the control generator's) that the discriminator's valid tests of this evaluation reject.
  The wrong solutions are fixed for the run, so before/after differ only by the tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pipeline.evaluation import EVAL_REPORT, evaluate_engine
from pipeline.execution import sandbox_runner
from pipeline.solver import ChainSolver
from problems.family import edge_tests, hidden_tests, is_family

PREFIX = "heldout"
COLUMNS = ("pass_at_1", "edge_pass_rate", "test_validity", "mutation_kill_rate", "bugs_caught",
           "wrong_caught")
REJECTS = ("failed", "error", "timeout", "crashed")  # a test that ran and said no


def hidden_problem(problem: Any) -> Any:
    """``problem`` as evaluation judges it: a family problem with its hidden suite as its tests
    (``edge_tests`` attached for the edge pass rate), any other unchanged."""
    if not is_family(problem):
        return problem

    return replace(problem, baseline_tests=tuple(hidden_tests(problem.id)))


def edge_pass_rate(rows: Sequence[dict[str, Any]], codes: dict[tuple[str, int], Any],
                   problems: dict[str, Any], run_jobs: Any) -> float | None:
    """Share of family samples whose code passes every edge-path test (None: no family
    problem). ``codes`` maps (problem id, sample) to the parsed code or None."""
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


def wrong_solutions(rows: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The chain samples whose code fails the (hidden) suite, as ``{problem_id, code}``.

    >>> wrong_solutions([{"mode": "chain", "problem_id": "p", "code": "x", "passed": False},
    ...                  {"mode": "chain", "problem_id": "p", "code": "y", "passed": True},
    ...                  {"mode": "chain", "problem_id": "q", "code": None, "passed": False}])
    [{'problem_id': 'p', 'code': 'x'}]
    """
    return [{"problem_id": r["problem_id"], "code": r["code"]} for r in rows
            if r.get("mode", "chain") == "chain" and r["code"] is not None and not r["passed"]]


def valid_tests(scored: dict[str, Any]) -> dict[str, list[str]]:
    """Per problem, the discriminator's distinct tests the reference passes.

    >>> valid_tests({"tests": [
    ...     {"problem_id": "p", "test_id": "a", "snippet": "assert f(1) == 1",
    ...      "origin": "discriminator"},
    ...     {"problem_id": "p", "test_id": "b", "snippet": "assert f(1) == 2",
    ...      "origin": "discriminator"},
    ...     {"problem_id": "p", "test_id": "c", "snippet": "assert f(0) == 0",
    ...      "origin": "baseline"}],
    ...   "executions": [{"problem_id": "p", "test_id": t, "target_kind": "reference",
    ...                   "status": s} for t, s in (("a", "passed"), ("b", "failed"),
    ...                                             ("c", "passed"))]})
    {'p': ['assert f(1) == 1']}
    """
    passed = {(e["problem_id"], e["test_id"]) for e in scored.get("executions", [])
              if e["target_kind"] == "reference" and e["status"] == "passed"}
    out: dict[str, dict[str, None]] = {}
    for t in scored.get("tests", []):
        if t["origin"] == "discriminator" and (t["problem_id"], t["test_id"]) in passed:
            out.setdefault(t["problem_id"], {})[t["snippet"]] = None
    return {pid: list(snippets) for pid, snippets in out.items()}


def wrong_caught(wrong: Sequence[dict[str, str]], valid: dict[str, list[str]],
                 problems: dict[str, Any], run_jobs: Any) -> float | None:
    """Share of ``wrong`` solutions that at least one valid test rejects (None: no wrong
    solution). A problem without valid tests catches nothing."""
    if not wrong:
        return None
    known = [w for w in wrong if w["problem_id"] in problems and valid.get(w["problem_id"])]
    jobs = [(problems[w["problem_id"]].program(w["code"]), valid[w["problem_id"]])
            for w in known]
    caught = sum(any(o.status in REJECTS for o in res.outcomes)
                 for res in (run_jobs(jobs) if jobs else []))
    return caught / len(wrong)


def heldout_metrics(sampler: Any, cfg: Any, problems: Sequence[Any],
                    wrong: Sequence[dict[str, str]] | None = None
                    ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Evaluate the run's policies through ``sampler`` (``pipeline.chains.Sampler``; under
    ``hf`` the policies, left with the generator active) on ``problems``; returns the
    ``evaluations`` rows and the figures of the module docstring (keys without prefix).
    ``wrong``: the run's fixed wrong solutions (``wrong_solutions`` of its first evaluation;
    None: this is the first, and its own are used)."""
    engine = ChainSolver(sampler, cfg)
    judged = [hidden_problem(p) for p in problems]
    scored: dict[str, Any] = {}
    rows, metrics = evaluate_engine(engine, judged, samples=cfg.evaluation.samples, ks=(1,),
                                    direct=False, tests=True, model="run", scored_out=scored)
    if hasattr(sampler, "activate"):  # transformers sampling switched the shared model's adapter
        sampler.activate("generator")
    codes = {(r["problem_id"], r["sample_idx"]): r["code"] for r in rows}
    by_id = {p.id: p for p in judged}
    run_jobs = sandbox_runner(cfg.sandbox)

    samples = max(len(rows), 1)
    bugs = sum(v for k, v in metrics.items()
               if k.startswith(f"{EVAL_REPORT}/") and k.endswith("/bugs_caught"))
    out = {"pass_at_1": metrics.get("eval/pass_at_1"),
           "edge_pass_rate": edge_pass_rate(rows, codes, by_id, run_jobs),
           "test_validity": metrics.get("eval/test_validity"),
           "mutation_kill_rate": metrics.get("eval/mutation_kill_rate"),
           "bugs_caught": bugs / samples,
           "wrong_caught": wrong_caught(wrong_solutions(rows) if wrong is None else wrong,
                                        valid_tests(scored), by_id, run_jobs),
           "problems": float(len(problems)), "samples": float(len(rows))}
    return rows, {k: float(v) for k, v in out.items() if v is not None}


def heldout_table(results: Sequence[dict[str, Any]], source: str) -> str:
    """The seeds' per-stage table on held-out problems: one row per evaluation (``before``,
    ``stage 1`` ...), from ``_run/heldout.json`` entries ``{label, step, metrics}``.

    >>> print(heldout_table([{"label": "before", "step": 0, "metrics": {"pass_at_1": 0.25,
    ...     "problems": 4.0, "samples": 4.0}}], "family:piecewise:heldout").splitlines()[2])
    before         0     0.250       -       -       -       -       -
    """
    if not results:
        return "(no held-out evaluation)"
    n = int(results[0]["metrics"].get("problems", 0))
    lines = [f"held-out: {source}, {n} problems never trained on (family problems judged on "
             "their hidden suite)",
             f"{'after':<10} {'step':>5}  {'pass@1':>8}  {'edge':>6}  {'valid':>6}  "
             f"{'mutants':>6}  {'bugs':>6}  {'wrong':>6}"]
    for r in results:
        m = r["metrics"]
        cells = [f"{m[c]:.3f}" if c in m else "-" for c in COLUMNS]
        lines.append(f"{r['label']:<10} {r['step']:>5}  {cells[0]:>8}  {cells[1]:>6}  "
                     f"{cells[2]:>6}  {cells[3]:>6}  {cells[4]:>6}  {cells[5]:>6}")
    return "\n".join(lines)
