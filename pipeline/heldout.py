"""Held-out evaluation: how the two policies do on problems the run never trains on.

Run before the first training step and after each training stage (``tasks/heldout.py``) with
the run's own policies, through the same code as ``flows.evaluate``
(:func:`pipeline.evaluation.evaluate_engine`): the run's chain, the discriminator's tests
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
  The wrong solutions are fixed for the run, so before/after differ only by the tests;
* ``caught_s<k>``: share of those wrong solutions whose *first* rejecting test came from
  chain stage ``k`` (a test written at several stages counts at its earliest); they sum to
  ``wrong_caught``;
* ``new_s<k>``: new distinct valid tests chain stage ``k`` added, per sample (a copy of an
  earlier stage's test is not new);
* ``stage_new_tests``: of the valid tests the stages after the first wrote, the share that
  were new (``pipeline.stagereport.new_share``); ``late_catch``: of the caught wrong
  solutions, the share first caught at a stage after the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from configs.names import STAGES
from pipeline.evaluation import EVAL_REPORT, evaluate_engine
from pipeline.execution import run_distinct, sandbox_runner
from pipeline.solver import ChainSolver
from pipeline.stagereport import new_share, report_from_metrics
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
    passed = sum(out.all_passed for out in run_distinct(run_jobs, jobs))  # equal samples: once
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


def valid_tests(scored: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per problem, the discriminator's distinct tests the reference passes, each with the
    earliest chain stage that wrote it.

    >>> valid_tests({"tests": [
    ...     {"problem_id": "p", "test_id": "a", "snippet": "assert f(1) == 1",
    ...      "origin": "discriminator", "stage": 3},
    ...     {"problem_id": "p", "test_id": "b", "snippet": "assert f(1) == 2",
    ...      "origin": "discriminator", "stage": 1},
    ...     {"problem_id": "p", "test_id": "d", "snippet": "assert f(1) == 1",
    ...      "origin": "discriminator", "stage": 2},
    ...     {"problem_id": "p", "test_id": "c", "snippet": "assert f(0) == 0",
    ...      "origin": "baseline", "stage": 0}],
    ...   "executions": [{"problem_id": "p", "test_id": t, "target_kind": "reference",
    ...                   "status": s} for t, s in (("a", "passed"), ("b", "failed"),
    ...                                             ("c", "passed"), ("d", "passed"))]})
    {'p': {'assert f(1) == 1': 2}}
    """
    passed = {(e["problem_id"], e["test_id"]) for e in scored.get("executions", [])
              if e["target_kind"] == "reference" and e["status"] == "passed"}
    out: dict[str, dict[str, int]] = {}
    for t in scored.get("tests", []):
        if t["origin"] == "discriminator" and (t["problem_id"], t["test_id"]) in passed:
            mine = out.setdefault(t["problem_id"], {})
            mine[t["snippet"]] = min(mine.get(t["snippet"], int(t["stage"])), int(t["stage"]))
    return out


def wrong_caught(wrong: Sequence[dict[str, str]], valid: dict[str, dict[str, int]],
                 problems: dict[str, Any], run_jobs: Any) -> dict[str, float]:
    """``wrong_caught`` and ``caught_s<k>`` (module docstring) of ``wrong`` solutions against
    the ``valid`` tests; empty when there is no wrong solution. A problem without valid tests
    catches nothing."""
    if not wrong:
        return {}
    known = [w for w in wrong if w["problem_id"] in problems and valid.get(w["problem_id"])]
    jobs = [(problems[w["problem_id"]].program(w["code"]), list(valid[w["problem_id"]]))
            for w in known]
    first: list[int] = []  # per caught solution, the earliest stage of a test rejecting it
    for w, (_, snippets), res in zip(known, jobs, run_distinct(run_jobs, jobs), strict=True):
        stages = [valid[w["problem_id"]][snippet]
                  for snippet, o in zip(snippets, res.outcomes, strict=True) if o.status in REJECTS]
        if stages:
            first.append(min(stages))
    out = {"wrong_caught": len(first) / len(wrong)}
    out |= {f"caught_s{k}": sum(f == k for f in first) / len(wrong) for k in STAGES}
    return out


def evaluation_config(cfg: Any) -> Any:
    """``cfg`` with the evaluation's sampling temperature (``evaluation.temperature``, when set)
    in place of the training rollouts'."""
    temperature = cfg.evaluation.temperature
    if temperature is None:
        return cfg
    return replace(cfg, sampling=replace(cfg.sampling, temperature=temperature))


def heldout_metrics(sampler: Any, cfg: Any, problems: Sequence[Any],
                    wrong: Sequence[dict[str, str]] | None = None
                    ) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Evaluate the run's policies through ``sampler`` (``pipeline.chains.Sampler``; under
    ``hf`` the policies, left with the generator active) on ``problems``; returns the
    ``evaluations`` rows and the figures of the module docstring (keys without prefix).
    ``wrong``: the run's fixed wrong solutions (``wrong_solutions`` of its first evaluation;
    None: this is the first, and its own are used)."""
    engine = ChainSolver(sampler, evaluation_config(cfg))
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
           "problems": float(len(problems)), "samples": float(len(rows))}
    out |= wrong_caught(wrong_solutions(rows) if wrong is None else wrong, valid_tests(scored),
                        by_id, run_jobs)
    chains = max(sum(r.get("mode", "chain") == "chain" for r in rows), 1)
    out |= {f"new_s{k}": metrics[f"{EVAL_REPORT}/s{k}/valid"] / chains for k in STAGES
            if f"{EVAL_REPORT}/s{k}/valid" in metrics}
    out["stage_new_tests"] = new_share(report_from_metrics(metrics, EVAL_REPORT))
    out["late_catch"] = late_catch(out)
    for k in STAGES:  # a stage the discriminator does not test has no figure, not a zero
        if k not in cfg.chain.test_stages:
            out.pop(f"caught_s{k}", None)
            out.pop(f"new_s{k}", None)
    if not cfg.chain.discriminator:
        out.pop("wrong_caught", None)
    return rows, {k: float(v) for k, v in out.items() if v is not None}


def heldout_table(results: Sequence[dict[str, Any]], source: str) -> str:
    """The per-stage table on held-out problems: one row per evaluation (``before``,
    ``stage 1`` ...), from ``_run/heldout.json`` entries ``{label, step, metrics}``, then per
    chain stage which wrong solutions its tests caught first and the new tests it added.

    >>> table = heldout_table([{"label": "before", "step": 0, "metrics": {"pass_at_1": 0.25,
    ...     "caught_s2": 0.5, "new_s1": 1.0, "problems": 4.0, "samples": 4.0}}],
    ...     "family:piecewise:heldout").splitlines()
    >>> print(table[2]); print(table[5])
    before         0     0.250       -       -       -       -       -
    before            -    0.500        -        -        -  |  1.00     -     -     -     -
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
    lines += ["per chain stage: wrong solutions caught first by its tests (share of all) | new "
              "valid tests it added (per sample)",
              f"{'after':<10} " + " ".join(f"{f'caught@{k}':>8}" for k in STAGES) + "  | "
              + " ".join(f"{f'new@{k}':>5}" for k in STAGES)]
    for r in results:
        m = r["metrics"]
        caught = [f"{m[f'caught_s{k}']:.3f}" if f"caught_s{k}" in m else "-" for k in STAGES]
        new = [f"{m[f'new_s{k}']:.2f}" if f"new_s{k}" in m else "-" for k in STAGES]
        lines.append(f"{r['label']:<10} " + " ".join(f"{c:>8}" for c in caught) + "  | "
                     + " ".join(f"{c:>5}" for c in new))
    return "\n".join(lines)


def late_catch(metrics: dict[str, float]) -> float | None:
    """Of the caught wrong solutions, the share first caught at a chain stage after the first
    (None: none caught).

    >>> late_catch({"wrong_caught": 0.5, "caught_s1": 0.25, "caught_s3": 0.25})
    0.5
    """
    caught = metrics.get("wrong_caught")
    if not caught:
        return None
    return sum(metrics.get(f"caught_s{k}", 0.0) for k in STAGES[1:]) / caught
