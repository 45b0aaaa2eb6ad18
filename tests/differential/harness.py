"""Both sides of the differential check on the same pairs, and a readable diff of the two.

``reference(pairs)`` runs real pytest unjailed (``reference.py``, in a subprocess that imports
pytest once and forks one child per pair); ``sandbox_side(pairs)`` runs every pair as the job
``(code, [test])`` through one ``execute_many`` call. ``compare`` lists the pairs whose verdict
or items differ.

What must be equal, per pair: the module's status, and each item's name, outcome, whether an
assert decided it and whether it was the test's own ``SyntaxError``, in order. Messages are
shown in a diff but not compared: they hold memory addresses and file paths (``<function f at
0x7f..>``, the temp dir of the reference), which differ between any two runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .corpus import Pair

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("reference.py")
SANDBOX_TIMEOUT_S = 5.0  # generous: no pair depends on timing
REFERENCE_WORKERS = 2


@dataclass(frozen=True)
class Outcome:
    status: str
    items: tuple[tuple, ...]  # (name, outcome, assertion, syntax) per item
    messages: tuple[str, ...]
    message: str = ""

    @classmethod
    def from_lists(cls, status: str, message: str, items: list[list]) -> Outcome:
        return cls(status, tuple(tuple(i[:4]) for i in items), tuple(i[4] for i in items),
                   message)

    def show(self) -> str:
        lines = [f"    {self.status}: {self.message[:160]!r}"]
        for item, message in zip(self.items, self.messages, strict=True):
            name, outcome, assertion, syntax = item
            flags = "".join(f for f, on in (("A", assertion), ("S", syntax)) if on)
            lines.append(f"      {name} {outcome} {flags} {message[:160]!r}")
        return "\n".join(lines)


class Reference:
    """The reference run, started in the background (``start``) so the sandbox side can run
    at the same time; ``results()`` waits for it."""

    def __init__(self, pairs: list[Pair], workers: int = REFERENCE_WORKERS):
        self.dir = tempfile.TemporaryDirectory(prefix="diffref-run-")
        self.inp = os.path.join(self.dir.name, "in.json")
        self.out = os.path.join(self.dir.name, "out.json")
        with open(self.inp, "w", encoding="utf-8") as f:
            json.dump([[p.code, p.test] for p in pairs], f)
        # pytest options of the outer run (PYTEST_ADDOPTS, PYTEST_PLUGINS...) are not the
        # judge's: the reference runs with ``plugin.PYTEST_ARGS`` alone, as the jail does.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env["PYTHONPATH"] = str(REPO)
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), self.inp, self.out, str(workers)], env=env,
            cwd=self.dir.name, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def results(self, timeout_s: float = 600) -> list[Outcome]:
        try:
            _, err = self.proc.communicate(timeout=timeout_s)
            if self.proc.returncode != 0:
                raise RuntimeError(f"the reference run failed: {err.decode()[-2000:]}")
            with open(self.out, encoding="utf-8") as f:
                raw = json.load(f)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.dir.cleanup()
        return [Outcome.from_lists(r["status"], r["message"], r["items"]) for r in raw]


def reference(pairs: list[Pair]) -> list[Outcome]:
    return Reference(pairs).results()


def sandbox_side(pairs: list[Pair]) -> list[Outcome]:
    from sandbox import Sandbox

    with Sandbox() as sb:
        results = sb.execute_many([(p.code, [p.test]) for p in pairs],
                                  timeout_s=SANDBOX_TIMEOUT_S)
    out = []
    for r in results:
        (o,) = r.outcomes
        out.append(Outcome.from_lists(o.status, o.message, [i.to_list() for i in o.items]))
    return out


def compare(pairs: list[Pair], ref: list[Outcome], got: list[Outcome]) -> list[str]:
    """One readable block per pair whose verdict or items differ."""
    diffs = []
    for pair, r, g in zip(pairs, ref, got, strict=True):
        if (r.status, r.items) != (g.status, g.items):
            diffs.append(f"{pair.name}\n  sandbox:\n{g.show()}\n  pytest:\n{r.show()}")
    return diffs
