"""Sandbox fan-out: the local pool against Ray on this machine, same jobs, same verdicts.

    python benchmarks/sandbox_fanout.py [--repeats 7] [--cpus 2]

Three batches go through ``execute_many`` on a pool of ``--cpus`` jailed workers in this
process (``sandbox.executor: local``) and through :class:`sandbox.fanout.RayExecutor` on a Ray
instance with ``--cpus`` CPUs started here (``sandbox.executor: ray``: one shard per CPU, a
one-worker jailed pool in each Ray worker):

- ``step(tiny)`` / ``step(qwen)``: the jobs one training step of ``configs/tiny.yaml`` /
  ``configs/qwen2.5-coder-1.5b.yaml`` plans (``pipeline.execution.plan_jobs``: per problem one
  job per sample's code, one for the reference, one per mutant), built from HumanEval problems
  whose suites are their baseline tests, with the configs' problems per step, samples per
  problem and mutants per problem;
- ``humaneval``: the 164 canonical suites, one job each.

Both executors are warmed first (pools started, tests planned), as they are after a
training run's first step; the timed calls are interleaved ``--repeats`` times on the same
load and medians are reported. Verdicts are compared job by job and test by test.

Per-shard cost: a call of ``--cpus`` one-assert jobs through Ray, minus the same through the
local pool, is what Ray adds per call (dispatch, transfer, collection); the rest of a Ray call
is the shards' work. The estimate for N nodes of ``--cpus`` cores each divides the work
measured on one node by N and adds the per-call cost unchanged: it assumes the driver's
dispatch and the network (jobs and results are kilobytes) do not grow with N, so it is an upper
bound on the speed-up.

The last line is ``ratio=<ray/local wall>`` for the ``step(tiny)`` batch (the goal: <= 1.5;
on one 2-core machine Ray cannot be faster, it can only cost less or more).

Recorded results: docs/benchmarks.md, section benchmarks/sandbox_fanout.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import ray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

from benchmarks.interleave import interleaved  # noqa: E402
from configs import load_config  # noqa: E402
from pipeline.execution import Suite, plan_jobs, problem_mutants  # noqa: E402
from problems import load_problems  # noqa: E402
from sandbox import Limits, execute_many  # noqa: E402
from sandbox.fanout import RayExecutor, shutdown  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CONFIGS = {"step(tiny)": "configs/tiny.yaml", "step(qwen)": "configs/qwen2.5-coder-1.5b.yaml"}


def step_jobs(problems, config: str) -> tuple[list, str]:
    cfg = load_config(REPO / config)
    n_problems = cfg.schedule.problems_per_step
    n_samples, n_mutants = cfg.sampling.samples_per_problem, cfg.rewards.mutants_per_problem
    suites = []
    for p in problems[:n_problems]:
        tests = [{"test_id": f"t{i}", "snippet": t, "stage": 1, "origin": "discriminator"}
                 for i, t in enumerate(p.baseline_tests)]
        suites += [Suite(p, j, p.reference_solution, "", tests) for j in range(n_samples)]
    mutants = {p.id: problem_mutants(p, n_mutants) for p in problems[:n_problems]}
    plan = plan_jobs(suites, mutants)
    return plan.jobs, (f"{n_problems} problems x ({n_samples} samples + 1 + up to {n_mutants} "
                       "mutants)")


def verdicts(results) -> list[list[str]]:
    return [[o.status for o in r.outcomes] for r in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cpus", type=int, default=2, help="local pool workers = Ray CPUs")
    args = parser.parse_args()
    limits = Limits(timeout_s=3.0)
    problems = load_problems("humaneval")
    batches = {name: step_jobs(problems, path) for name, path in CONFIGS.items()}
    batches["humaneval"] = ([(p.reference_program, list(p.baseline_tests)) for p in problems],
                            f"{len(problems)} canonical suites")

    t0 = time.perf_counter()
    ray.init(num_cpus=args.cpus, log_to_driver=False, include_dashboard=False,
             configure_logging=False)
    fan = RayExecutor(limits)
    ray_start = time.perf_counter() - t0

    def local(jobs):
        return execute_many(jobs, limits, workers=args.cpus)

    trivial = [("x = 1", ["assert x == 1"])] * args.cpus
    for jobs, _ in batches.values():  # warm: pools started, tests planned, on both sides
        local(jobs)
        fan(jobs)
    print(f"Ray instance with {args.cpus} CPUs started in {ray_start:.1f} s; local pool of "
          f"{args.cpus} jailed workers; {args.repeats} interleaved repeats, medians")

    rows = {}
    for name, (jobs, what) in batches.items():
        timed = interleaved({"local": lambda jobs=jobs: local(jobs),
                             "ray": lambda jobs=jobs: fan(jobs)}, args.repeats)
        local_t, ray_t = timed["local"].seconds, timed["ray"].seconds
        mine, theirs = timed["local"].results[0], timed["ray"].results[0]
        same = sum(a == b for a, b in zip(verdicts(mine), verdicts(theirs), strict=True))
        tests = sum(r.total for r in mine)
        rows[name] = (statistics.median(local_t), statistics.median(ray_t),
                      statistics.median(r / lo for r, lo in zip(ray_t, local_t, strict=True)))
        lo, ra, ratio = rows[name]
        print(f"{name:11s}: {len(jobs):4d} jobs, {tests:5d} tests ({what}); verdicts same for "
              f"{same}/{len(jobs)} jobs; local {lo * 1000:7.1f} ms, ray {ra * 1000:7.1f} ms, "
              f"ray/local {ratio:.2f}")
    trivial_t = interleaved({"local": lambda: local(trivial), "ray": lambda: fan(trivial)},
                            args.repeats * 3)
    overhead = [r - lo for lo, r in zip(trivial_t["local"].seconds, trivial_t["ray"].seconds,
                                        strict=True)]
    per_call = statistics.median(overhead)
    print(f"per call, Ray adds {per_call * 1000:.1f} ms (median of {len(overhead)}: "
          f"{args.cpus} one-assert shards, Ray minus local)")
    print(f"estimated wall per batch with N nodes of {args.cpus} cores (work / N + per-call "
          "cost), and speed-up over the local pool on one node:")
    print("   N  " + "  ".join(f"{name:>22s}" for name in rows))
    for n in (1, 2, 4, 8, 16):
        cells = []
        for lo, ra, _ in rows.values():
            work = max(ra - per_call, 0.0)
            est = per_call + work / n
            cells.append(f"{est * 1000:9.1f} ms ({lo / est:4.1f}x)")
        print(f"  {n:2d}  " + "  ".join(f"{c:>22s}" for c in cells))
    shutdown()
    print(f"ratio={rows['step(tiny)'][2]:.2f}")


if __name__ == "__main__":
    main()
