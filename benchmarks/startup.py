"""Start-up time of the command-line entry points: seconds until a command starts working.

    .venv/bin/python benchmarks/startup.py train [--repeats 3] [--trace]
    .venv/bin/python benchmarks/startup.py evaluate [--repeats 3]
    .venv/bin/python benchmarks/startup.py replay --run-id ID [--recorded runs] [--repeats 3]

Runs the command as a user would (a subprocess, output piped, so the plain progress lines),
timestamps every output line, and (training) stops it with SIGINT once the line that marks
its first unit of work appears, timing the stop too:

- ``train``: ``python -m flows.train --config configs/tiny.yaml``, until ``step 1/``;
- ``evaluate``: ``python -m flows.evaluate --limit 2 --samples 1 --no-direct`` (the config's
  base model, demo problems), to its first progress line (``evaluate: 0/``) and its end;
- ``replay``: ``python -m flows.replay --run-id ID --step 5 --stage execute`` of a recorded
  run of ``configs/tiny.yaml``, to its first progress line (``replay of step 5: 0/``) and its
  end.

For code without those progress lines (``--repo`` of an older commit) the time to the flow
run's start (``Beginning flow run``) and to the exit are the comparable figures.

``PREFECT_HOME`` is a folder of this benchmark's, created (and its database migrated) by one
unmeasured run first, so the figures are those of a machine where Prefect has run before; the
warm-start cache (``.cache/warmstart``) is the checkout's. Prints each run's time to the marker
with the time of every line (``--trace``), then the medians. Last line:
``<command>_to_first_s=<median>``.

Goal (issue #25): under 5 s to the first step.

Recorded results: docs/benchmarks.md, section benchmarks/startup.py.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOW = "Beginning flow run"


def command(which: str, run_id: str | None, root: str, recorded: str
            ) -> tuple[list[str], str]:
    """The command line and the marker of its first unit of work."""
    py = str(ROOT / ".venv" / "bin" / "python")
    if which == "train":
        return ([py, "-m", "flows.train", "--config", "configs/tiny.yaml",
                 "--artifacts-root", root], "step 1/")
    if which == "evaluate":
        return ([py, "-m", "flows.evaluate", "--config", "configs/tiny.yaml", "--limit", "2",
                 "--samples", "1", "--no-direct", "--problems", "demo",
                 "--set", f"artifacts.root={root}"], "evaluate: 0/")
    if not run_id:
        raise SystemExit("replay needs --run-id of a recorded run under --recorded")
    return ([py, "-m", "flows.replay", "--artifacts-root", recorded, "--run-id", run_id,
             "--step", "5", "--stage", "execute"], "replay of step 5: 0/")


def timed_run(cmd: list[str], marker: str, env: dict[str, str], trace: bool, stop: bool
              ) -> dict[str, float]:
    """Seconds from start to the flow run's start (``flow``), to the first line holding
    ``marker`` (``first``; then SIGINT when ``stop``), to the exit (``exit``)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    found: dict[str, float] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            t = time.perf_counter() - start
            if trace:
                print(f"  {t:7.2f}  {line.rstrip()[:150]}", flush=True)
            if FLOW in line:
                found.setdefault("flow", t)
            if "first" not in found and marker in line:
                found["first"] = t
                if stop:
                    found["signal"] = time.perf_counter()
                    proc.send_signal(signal.SIGINT)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=900)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    found["exit"] = time.perf_counter() - start
    if "signal" in found:
        found["stop"] = time.perf_counter() - found.pop("signal")
    reader.join(timeout=10)
    return found


def main() -> int:
    global ROOT
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=["train", "evaluate", "replay"])
    parser.add_argument("--run-id", help="replay: a recorded run under --recorded")
    parser.add_argument("--recorded", default=str(ROOT / "runs"), help="replay: its store")
    parser.add_argument("--repo", help="measure this checkout's code (e.g. an older commit)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trace", action="store_true", help="print every line with its time")
    args = parser.parse_args()
    ROOT = Path(args.repo).resolve() if args.repo else ROOT
    stop = args.which == "train"  # evaluate and replay (shrunk) run to their end
    runs = []
    with tempfile.TemporaryDirectory(prefix="startup-") as tmp:
        env = {**os.environ, "PREFECT_HOME": f"{tmp}/prefect", "PYTHONPATH": str(ROOT),
               "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db",
               "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
        cmd, marker = command(args.which, args.run_id, f"{tmp}/runs", args.recorded)
        print("warm-up run (creates PREFECT_HOME's database, not measured) ...", flush=True)
        timed_run(cmd, marker, env, False, stop)
        for i in range(args.repeats):
            found = timed_run(cmd, marker, env, args.trace, stop)
            print(f"run {i + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in found.items()),
                  flush=True)
            runs.append(found)
    med = {k: statistics.median(r[k] for r in runs) for k in ("flow", "first", "exit", "stop")
           if all(k in r for r in runs)}
    print(f"{args.which} medians of {len(runs)}: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in med.items()))
    if "first" not in med:
        return 1
    print(f"{args.which}_to_first_s={med['first']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
