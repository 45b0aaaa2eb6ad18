"""Does the judge give the same verdicts on a loaded host as on a quiet one?

    python benchmarks/sandbox_load.py [--quick] [--scenarios quiet,cpu,mem,io,fork,all]

Jobs with known verdicts, run through ``sandbox.execute_many(jobs, workers=2)`` in each
scenario (the host quiet, or under one or all of the loads below):

- HumanEval's 164 canonical solutions (every test ``passed``) and one stub per problem (body
  ``pass`` for even-numbered problems, ``raise NotImplementedError`` for odd ones). A stub's
  expected verdict per test comes from an oracle: the candidate and the test module executed
  here in plain Python, as ``from solution import *`` would bind them (the test string's
  verdict table in ``sandbox.jailside.verdicts``: an ``AssertionError`` is ``failed``, another
  exception ``error``), so a stub test that checks nothing it could fail (``assert True``,
  ``longest([]) == None``) is expected to pass, not guessed to fail;
- big payloads crossing the RPC both ways (a 30 000-int list, wide and deep dicts, long str
  and bytes), correct and with a wrong ``echo`` that drops an element (``failed``);
- small controls of varied pytest shapes (parametrize, fixtures, classes, ``pytest.raises``,
  argument write-back, generators), correct and wrong.

Loads (``load``): ``cpu`` = 3 busy loops per core; ``mem`` = one process re-touching a buffer
of up to 3 GiB (a quarter of the available memory at most); ``io`` = a writer that fsyncs
every MiB it writes into a temp dir; ``fork`` = processes forking short-lived children
in a loop. Each load process is our own child in its own session, dies with us (it sets
``PR_SET_PDEATHSIG``) and is stopped with its group (SIGTERM, then SIGKILL) on every way out
of the ``with``, KeyboardInterrupt included.

A verdict is wrong when its status differs from the expected one; ``infra`` (no verdict, the
harness failed) is counted apart. The last line is ``wrong_verdicts=<n> infra=<n>``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

from benchmarks.sandbox_throughput import humaneval_records, stub_program  # noqa: E402
from problems import load_problems  # noqa: E402
from sandbox import Limits, SandboxError, execute_many  # noqa: E402
from sandbox.jailside.layout import exported_names  # noqa: E402

TIMEOUT_S = 5.0  # CPU (and idle) seconds per step: generous (see docs/benchmarks.md)
WORKERS = 2
SCENARIOS = {"quiet": (), "cpu": ("cpu",), "mem": ("mem",), "io": ("io",),
             "fork": ("fork",), "all": ("cpu", "mem", "io", "fork")}


@dataclass(frozen=True)
class Job:
    name: str
    code: str
    tests: tuple[str, ...]
    expected: tuple[str, ...]  # one status per test


# -- the jobs ----------------------------------------------------------------------------------

class _OracleTimeout(Exception):
    pass


def oracle(code: str, tests: Sequence[str], limit_s: float = 10.0) -> tuple[str, ...]:
    """Verdict of each module-level test string, run here in plain Python: only for trusted
    code (HumanEval's prompts and bodies ``pass``/``raise``), and only tests that are module
    bodies (HumanEval's are), so no pytest item exists and the body's fate is the verdict."""
    def alarm(*_):
        raise _OracleTimeout

    old = signal.signal(signal.SIGALRM, alarm)
    out = []
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            solution: dict = {"__name__": "solution"}
            try:
                signal.setitimer(signal.ITIMER_REAL, limit_s)
                exec(compile(code, "solution.py", "exec"), solution)
                imported = True
            except Exception:
                imported = False
            for i, test in enumerate(tests):
                if not imported:  # a candidate that does not import errors every test
                    out.append("error")
                    continue
                module = {"__name__": f"test_{i:04d}"}
                module.update((n, solution[n]) for n in exported_names(solution))
                try:
                    signal.setitimer(signal.ITIMER_REAL, limit_s)
                    exec(compile(test, f"test_{i:04d}.py", "exec"), module)
                    out.append("passed")
                except AssertionError:
                    out.append("failed")
                except _OracleTimeout:
                    out.append("timeout")
                except Exception:
                    out.append("error")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return tuple(out)


def humaneval_jobs(limit: int | None = None) -> list[Job]:
    """Canonical solution and one stub per problem, through the same conversion the
    throughput benchmark uses (``problems`` + its ``stub_program``)."""
    records = humaneval_records()
    jobs = []
    for k, p in enumerate(load_problems("humaneval")[:limit]):
        tests = tuple(p.baseline_tests)
        jobs.append(Job(f"{p.id}/canonical", p.reference_program, tests,
                        ("passed",) * len(tests)))
        stub = (stub_program(p, records[p.id]) if k % 2 == 0 else
                p.program(records[p.id]["prompt"] + "    raise NotImplementedError\n"))
        jobs.append(Job(f"{p.id}/stub", stub, tests, oracle(stub, tests)))
    return jobs


_ECHO = "def echo(x):\n    return x\n"
_ECHO_DROPS = ("def echo(x):\n    if isinstance(x, list):\n        return x[:-1]\n"
               "    if isinstance(x, dict):\n        return dict(list(x.items())[:-1])\n"
               "    return x[1:]\n")
_PAYLOADS = {  # name -> expression of a big value
    "list30k": "list(range(30000))",
    "wide_dict": "{f'k{i}': {'v': [i, str(i), i / 7], 'd': {'x': (i, None)}} for i in range(5000)}",
    "deep": "[[[[[[[[[[[[[[[[[[[[list(range(100))]]]]]]]]]]]]]]]]]]]] * 200",
    "long_str": "'ab\\u00e9\\U0001f600' * 250000",
    "bytes": "bytes(range(256)) * 4000",
    "mixed": "[(i, float(i), str(i) * 3, {i, -i}, frozenset({i})) for i in range(5000)]",
}


def payload_jobs() -> list[Job]:
    """Big values round-tripped three times per test; every wrong echo is caught."""
    jobs = []
    for name, expr in _PAYLOADS.items():
        test = f"big = {expr}\n" + "assert echo(big) == big\n" * 3
        jobs.append(Job(f"payload/{name}", _ECHO, (test,), ("passed",)))
        jobs.append(Job(f"payload/{name}-wrong", _ECHO_DROPS, (test,), ("failed",)))
    return jobs


_CONTROLS = [  # (name, code, tests, expected): small, each verdict obvious by reading it
    ("parametrize", "def add(a, b):\n    return a + b\n",
     ("import pytest\n\n@pytest.mark.parametrize('a,b,s', [(1, 2, 3), (0, 0, 0), (-1, 1, 0)])\n"
      "def test_add(a, b, s):\n    assert add(a, b) == s\n",), ("passed",)),
    ("parametrize-wrong", "def add(a, b):\n    return a - b\n",
     ("import pytest\n\n@pytest.mark.parametrize('a,b,s', [(1, 2, 3), (0, 0, 0)])\n"
      "def test_add(a, b, s):\n    assert add(a, b) == s\n",), ("failed",)),
    ("fixture", "def my_sort(xs):\n    return sorted(xs)\n",
     ("import pytest\n\n@pytest.fixture\ndef data():\n    return [3, 1, 2]\n\n"
      "def test_sort(data):\n    assert my_sort(data) == [1, 2, 3]\n",), ("passed",)),
    ("class", "class Stack:\n    def __init__(self):\n        self.items = []\n"
     "    def push(self, x):\n        self.items.append(x)\n"
     "    def pop(self):\n        return self.items.pop()\n",
     ("class TestStack:\n    def test_lifo(self):\n        s = Stack()\n        s.push(1)\n"
      "        s.push(2)\n        assert s.pop() == 2\n        assert s.pop() == 1\n",),
     ("passed",)),
    ("raises", "def parse(s):\n    return int(s)\n",
     ("import pytest\n\ndef test_bad():\n    with pytest.raises(ValueError):\n"
      "        parse('x')\n\ndef test_good():\n    assert parse('7') == 7\n",), ("passed",)),
    ("raises-wrong", "def parse(s):\n    return 0\n",
     ("import pytest\n\ndef test_bad():\n    with pytest.raises(ValueError):\n"
      "        parse('x')\n",), ("failed",)),
    ("writeback", "def append_one(xs):\n    xs.append(1)\n",
     ("def test_mutates():\n    xs = [0]\n    append_one(xs)\n    assert xs == [0, 1]\n",),
     ("passed",)),
    ("generator", "def count(n):\n    yield from range(n)\n",
     ("assert list(count(4)) == [0, 1, 2, 3]\n",
      "def test_sum():\n    assert sum(count(10)) == 45\n"),
     ("passed", "passed")),
    ("error", "def half(x):\n    return x / 0\n",
     ("def test_half():\n    assert half(4) == 2\n",), ("error",)),
]


def control_jobs() -> list[Job]:
    return [Job(f"control/{name}", code, tests, expected)
            for name, code, tests, expected in _CONTROLS]


def all_jobs(quick: bool = False) -> list[Job]:
    return humaneval_jobs(30 if quick else None) + payload_jobs() + control_jobs()


# -- the loads ---------------------------------------------------------------------------------

_LOAD_SCRIPT = r"""
import ctypes, os, signal, sys, time
kind, parent, counter, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
counter = counter.replace("{pid}", str(os.getpid()))
ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the benchmark
if os.getppid() != parent:  # it died before prctl took effect
    sys.exit(0)
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)  # finish the step: a forked child is always reaped
n, shown = 0, 0.0
if kind == "mem":
    buf = bytearray(size)
    pages = len(range(0, size, 4096))
elif kind == "io":
    out = open(os.path.join(os.path.dirname(counter), f"io-{os.getpid()}.bin"), "wb")
    chunk = os.urandom(1 << 20)
while not stop:
    if kind == "cpu":
        for _ in range(100000):
            pass
    elif kind == "mem":  # one byte per page, every page, every pass
        buf[::4096] = bytes([n & 255]) * pages
    elif kind == "io":
        out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
        if out.tell() >= size:
            out.seek(0)
    elif kind == "fork":
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    n += 1
    if time.monotonic() - shown > 0.2:  # progress, so a test can see the load is real
        shown = time.monotonic()
        with open(counter + ".tmp", "w") as fh:
            fh.write(str(n))
        os.replace(counter + ".tmp", counter)
"""


def mem_bytes() -> int:
    """3 GiB, or a quarter of the memory available now if that is less."""
    with open("/proc/meminfo") as fh:
        avail = next(int(line.split()[1]) << 10 for line in fh if line.startswith("MemAvailable"))
    return min(3 << 30, avail // 4)


def load_plan(kinds: Sequence[str], mem_size: int | None = None) -> list[tuple[str, int]]:
    """``(kind, size)`` per load process."""
    plan: list[tuple[str, int]] = []
    for kind in kinds:
        if kind == "cpu":
            plan += [("cpu", 0)] * (3 * (os.cpu_count() or 1))
        elif kind == "mem":
            plan.append(("mem", mem_size or mem_bytes()))
        elif kind == "io":
            plan.append(("io", 64 << 20))  # the file wraps at 64 MiB
        elif kind == "fork":
            plan += [("fork", 0)] * 2
        else:
            raise ValueError(f"unknown load {kind!r}; known: cpu, mem, io, fork")
    return plan


def group_members(pgids: Sequence[int]) -> list[int]:
    """Processes (zombies too) still in any of these process groups."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2:].split()[2]) in pgids:
            found.append(int(entry))
    return found


@dataclass
class Load:
    procs: list[subprocess.Popen]
    folder: Path

    def progress(self) -> list[int]:
        """Steps each load process has done (busy loops, buffer passes, fsyncs, forks)."""
        counts = []
        for p in self.procs:
            try:
                counts.append(int((self.folder / f"{p.pid}.count").read_text()))
            except (OSError, ValueError):
                counts.append(0)
        return counts


def _stop(procs: list[subprocess.Popen], grace_s: float = 5.0) -> None:
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:  # what is left (a child between fork and exit) dies with its group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


@contextlib.contextmanager
def load(kinds: Sequence[str], mem_size: int | None = None) -> Iterator[Load]:
    """Run the loads while the block runs; on leaving it, nothing of them is left. Enter it
    from a thread that outlives the block (``PR_SET_PDEATHSIG`` follows the parent thread)."""
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="sandbox-load-") as folder:
        try:
            for kind, size in load_plan(kinds, mem_size):
                procs.append(subprocess.Popen(
                    [sys.executable, "-c", _LOAD_SCRIPT, kind, str(os.getpid()),
                     os.path.join(folder, "{pid}.count"), str(size)],
                    start_new_session=True, stdin=subprocess.DEVNULL))
            yield Load(procs, Path(folder))
        finally:
            _stop(procs)
            left = group_members([p.pid for p in procs])
            if left:
                raise RuntimeError(f"load processes left behind: {left}")


# -- the runs ----------------------------------------------------------------------------------

@dataclass
class Row:
    scenario: str
    jobs: int
    tests: int
    wrong: list[str]   # one line per wrong verdict
    infra: int
    retried: int       # jobs that took more than one attempt
    wall_s: float


def judge_jobs(jobs: Sequence[Job], scenario: str = "quiet", *, mem_size: int | None = None,
               timeout_s: float = TIMEOUT_S, workers: int = WORKERS,
               settle_s: float = 1.0) -> Row:
    """Run ``jobs`` under the scenario's loads (started ``settle_s`` before the jobs) and
    compare every verdict with the expected one."""
    with load(SCENARIOS[scenario], mem_size):
        time.sleep(settle_s if SCENARIOS[scenario] else 0.0)
        t0 = time.perf_counter()
        try:
            results = execute_many([(j.code, list(j.tests)) for j in jobs],
                                   Limits(timeout_s=timeout_s), workers=workers)
        except SandboxError as exc:  # no worker starts at all: no verdict on anything
            print(f"{scenario}: SandboxError {exc}", file=sys.stderr)
            results = None
        wall = time.perf_counter() - t0
    row = Row(scenario, len(jobs), sum(len(j.tests) for j in jobs), [], 0, 0, wall)
    if results is None:
        row.infra = row.tests
        return row
    for job, result in zip(jobs, results, strict=True):
        row.retried += result.attempts > 1
        got = [o.status for o in result.outcomes]
        if len(got) != len(job.expected):
            row.wrong.append(f"{scenario} {job.name}: {len(got)} outcomes for "
                             f"{len(job.expected)} tests")
            continue
        for i, (o, want) in enumerate(zip(result.outcomes, job.expected, strict=True)):
            if o.status == "infra":
                row.infra += 1
            elif o.status != want:
                row.wrong.append(f"{scenario} {job.name} test {i}: expected {want}, got "
                                 f"{o.status} (attempts {result.attempts}): {o.message[:200]!r}")
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="30 HumanEval problems and the quiet, cpu and all scenarios")
    parser.add_argument("--scenarios", type=lambda s: s.split(","), default=None,
                        help=f"comma-separated, of {','.join(SCENARIOS)}")
    parser.add_argument("--timeout-s", type=float, default=TIMEOUT_S,
                        help="per-step CPU (and idle) budget; lower it to probe the margins")
    args = parser.parse_args(argv)
    scenarios = args.scenarios or (["quiet", "cpu", "all"] if args.quick else list(SCENARIOS))
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}")
    t_start = time.perf_counter()
    jobs = all_jobs(args.quick)
    print(f"{len(jobs)} jobs, {sum(len(j.tests) for j in jobs)} tests; workers={WORKERS}, "
          f"timeout_s={args.timeout_s}; {os.cpu_count()} cores; mem load {mem_bytes() >> 20} MiB",
          flush=True)
    execute_many([("x = 1", ["assert x == 1"])] * WORKERS, workers=WORKERS)  # warm the pool
    rows = []
    for scenario in scenarios:
        rows.append(judge_jobs(jobs, scenario, timeout_s=args.timeout_s))
        r = rows[-1]
        print(f"  {r.scenario:6s} done: {r.wall_s:.1f} s", file=sys.stderr, flush=True)
    print(f"{'scenario':8s} {'jobs':>5s} {'tests':>6s} {'wrong':>6s} {'infra':>6s} "
          f"{'retried':>8s} {'wall_s':>7s}")
    for r in rows:
        print(f"{r.scenario:8s} {r.jobs:5d} {r.tests:6d} {len(r.wrong):6d} {r.infra:6d} "
              f"{r.retried:8d} {r.wall_s:7.1f}")
    for r in rows:
        for line in r.wrong:
            print(f"WRONG {line}")
    print(f"total {time.perf_counter() - t_start:.1f} s")
    wrong, infra = sum(len(r.wrong) for r in rows), sum(r.infra for r in rows)
    print(f"wrong_verdicts={wrong} infra={infra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
