"""What ``benchmarks/learning.py`` reports, from the runs it leaves: each arm's held-out
entries (``heldout``), the seed's figures (``figures``: the issue's, module docstring of
``learning.py``), the table they are differences of (``table``), the oracle arm's lines, the
medians' line, and the diagnostic on the adversarial arm's training samples that passed every
baseline test (``beyond_baseline``). Pure functions over stored runs: the runner is
``learning.py``."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

ARMS = ("adversarial", "control", "baseline_only")
ORACLE = "oracle"

FIGURES = ("heldout_gain", "control_gain", "disc_gain", "disc_control_gain", "ablation_delta",
           "stage_new_tests", "late_catch")


def heldout(root: Path, run_id: str) -> list[dict]:
    """A run's held-out entries, first "before" and last "after" (``tasks.heldout``)."""
    path = root / f"run_id={run_id}" / "_run" / "heldout.json"
    return json.loads(path.read_text())


def beyond_baseline(root: Path, run_id: str, family: str) -> dict[str, int]:
    """Over a run's steps, its scored samples whose code passed every baseline test
    (``passing``); how many of them are wrong (their code fails the problem's hidden suite, run
    here after training: no run sees it); and how many of those a valid discriminator test
    rejected (``generator/rejected_beyond_baseline``). ``wrong`` is the room the discriminator's
    tests have to change what the generator learns (with group-relative advantages, only
    through such samples); ``rejected`` is how much of it they used."""
    from artifacts import RunStore  # deferred: --help answers before torch loads
    from configs.names import CODE_STAGE
    from configs.schema import SandboxConfig
    from models.parsing import parse_code
    from pipeline.execution import run_distinct, sandbox_runner
    from pipeline.metrics import passes_baseline, rejected_beyond_baseline
    from pipeline.parts import chain_part
    from pipeline.stepwork import read_rows
    from problems.family import hidden_tests
    from problems.loaders import load_problems

    problems = {p.id: p for p in load_problems(f"family:{family}:train")}
    store = RunStore(str(root), run_id)
    samples = []  # (problem, code, rejected) per baseline-passing sample
    for step in store.list_steps():
        code_text = {(c["problem_id"], c["sample_idx"]): c["output_text"]  # as load_suites
                     for c in read_rows(store, step, chain_part("generator", CODE_STAGE),
                                        ["problem_id", "sample_idx", "output_text"])}
        for r in store.read_table("rewards", step=step).to_pylist():
            if not r["masked"] and passes_baseline(r):
                problem = problems[r["problem_id"]]
                code = parse_code(code_text[(r["problem_id"], r["sample_idx"])],
                                  problem.entry_point).code
                samples.append((problem, code, rejected_beyond_baseline(r)))
    verdicts = run_distinct(sandbox_runner(SandboxConfig()),  # a repeated sample runs once
                            [(p.program(code), hidden_tests(p.id)) for p, code, _ in samples])
    wrong = [not out.all_passed for out in verdicts]
    return {"passing": len(samples), "wrong": sum(wrong),
            "rejected": sum(rej for _, _, rej in samples),
            "rejected_wrong": sum(rej and w for (_, _, rej), w in zip(samples, wrong, strict=True))}


def gain(entries: list[dict], key: str) -> float:
    """One arm's ``key`` after training minus before, from its held-out entries."""
    return entries[-1]["metrics"].get(key, 0.0) - entries[0]["metrics"].get(key, 0.0)


def figures(results: dict[str, list[dict]]) -> dict[str, float | None]:
    """The seed's figures (module docstring) from its arms' held-out entries."""
    after = {arm: e[-1]["metrics"] for arm, e in results.items()}
    return {"heldout_gain": gain(results["adversarial"], "pass_at_1"),
            "control_gain": gain(results["control"], "pass_at_1"),
            "disc_gain": gain(results["adversarial"], "wrong_caught"),
            "disc_control_gain": gain(results["control"], "wrong_caught"),
            "ablation_delta": after["adversarial"].get("pass_at_1", 0.0)
            - after["baseline_only"].get("pass_at_1", 0.0),
            "stage_new_tests": after["adversarial"].get("stage_new_tests"),
            "late_catch": after["adversarial"].get("late_catch")}


def table(results: dict[int, dict[str, list[dict]]]) -> str:
    """Per seed, the arms' held-out pass@1 and wrong solutions caught before and after, and
    the adversarial arm's chain figures: the rows the figures are differences of.

    >>> def arm(p0, p1, w0, w1):
    ...     return [{"metrics": {"pass_at_1": p0, "wrong_caught": w0}},
    ...             {"metrics": {"pass_at_1": p1, "wrong_caught": w1, "stage_new_tests": 0.5}}]
    >>> print(table({0: {"adversarial": arm(.1, .3, .4, .9), "control": arm(.1, 0, .4, .2),
    ...                  "baseline_only": arm(.1, .2, .4, .5)}}))  # doctest: +NORMALIZE_WHITESPACE
    seed  pass@1 before  adv    ctrl   base   | wrong caught before  adv    ctrl   | new    late
    0     0.100          0.300  0.000  0.200  | 0.400                0.900  0.200  | 0.500  n/a
    """
    rows = ["seed  pass@1 before  adv    ctrl   base   | wrong caught before  adv    ctrl   "
            "| new    late"]
    for seed, arms in results.items():
        before = arms["adversarial"][0]["metrics"]
        after = {arm: entries[-1]["metrics"] for arm, entries in arms.items()}
        rows.append(
            f"{seed:<5} {three(before.get('pass_at_1')):<14} "
            + " ".join(f"{three(after[a].get('pass_at_1')):<6}" for a in ARMS)
            + f" | {three(before.get('wrong_caught')):<20} "
            + " ".join(f"{three(after[a].get('wrong_caught')):<6}" for a in ARMS[:2])
            + f" | {three(after['adversarial'].get('stage_new_tests')):<6} "
            + three(after["adversarial"].get("late_catch")))
    return "\n".join(rows)


def oracle_lines(results: dict[int, dict[str, list[dict]]]) -> str:
    """Per seed the oracle arm's held-out pass@1 before and after beside the baseline-only
    arm's (the two differ only in the training problems' tests), then the median gain.

    >>> def arm(p0, p1):
    ...     return [{"metrics": {"pass_at_1": p0}}, {"metrics": {"pass_at_1": p1}}]
    >>> print(oracle_lines({0: {"oracle": arm(.1, .4), "baseline_only": arm(.1, .2)},
    ...                     1: {"oracle": arm(.2, .2), "baseline_only": arm(.2, .1)}}))
    seed 0, oracle: pass@1 0.100 -> 0.400 (gain 0.300; baseline-only 0.200)
    seed 1, oracle: pass@1 0.200 -> 0.200 (gain 0.000; baseline-only 0.100)
    median of 2 seeds: oracle_gain=0.150
    """
    out, gains = [], []
    for seed, arms in results.items():
        first, last = (arms[ORACLE][i]["metrics"].get("pass_at_1", 0.0) for i in (0, -1))
        base = arms["baseline_only"][-1]["metrics"].get("pass_at_1")
        gains.append(gain(arms[ORACLE], "pass_at_1"))
        out.append(f"seed {seed}, oracle: pass@1 {first:.3f} -> {last:.3f} (gain "
                   f"{gains[-1]:.3f}; baseline-only {three(base)})")
    out.append(f"median of {len(gains)} seeds: oracle_gain={statistics.median(gains):.3f}")
    return "\n".join(out)


def three(value: float | None) -> str:
    """A figure to three decimals; ``n/a`` where a run had none (no caught solution, say)."""
    return "n/a" if value is None else f"{value:.3f}"


def line(values: dict[str, float | None]) -> str:
    return " ".join(f"{k}={three(values[k])}" for k in FIGURES)


def medians(per_seed: dict[int, dict[str, float | None]]) -> dict[str, float | None]:
    """Each figure's median over the seeds that have it (``None`` where none has: no caught
    solution at any seed, say).

    >>> seeds = {0: {"late_catch": 0.5}, 1: {"late_catch": None}, 2: {"late_catch": 0.7}}
    >>> medians(seeds)["late_catch"], medians(seeds)["disc_gain"]
    (0.6, None)
    """
    return {k: (statistics.median(v) if (v := [s.get(k) for s in per_seed.values()
                                                if s.get(k) is not None]) else None)
            for k in FIGURES}
