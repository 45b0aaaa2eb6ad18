"""Progress of a long job, with an ETA: a rich bar in a terminal, plain lines when piped.

    with WorkProgress("evaluate", total=164, unit="problems") as progress:
        for chunk in chunks:
            ...
            progress.advance(len(chunk))

In a terminal (stdout is a TTY) it draws a rich bar (done/total, elapsed, time remaining) that
disappears when the job ends, leaving one summary line. Piped (a log file, CI, a test), it
writes plain lines such as ``evaluate: 12/164 problems, 1m03s elapsed, ETA 7m40s``: one when
the job starts, then at most one per ``every_s`` seconds, and one at the end. The warm start,
the evaluation and the replay all use it, so their progress looks and behaves the same.
Prefect-free; the lines go through ``print``, so inside a flow with ``log_prints`` they reach
the run's logs too.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

EVERY_S = 5.0  # plain mode: seconds between lines (the first and last are always written)


def duration(seconds: float) -> str:
    """A short human duration.

    >>> duration(7.4), duration(63), duration(460), duration(3725)
    ('7s', '1m03s', '7m40s', '1h02m')
    """
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def progress_line(label: str, done: int, total: int, unit: str, elapsed: float,
                  detail: str = "") -> str:
    """The plain progress line; the ETA assumes the remaining units take as long as the done.

    >>> progress_line("evaluate", 12, 164, "problems", 63.0)
    'evaluate: 12/164 problems, 1m03s elapsed, ETA 13m18s'
    >>> progress_line("replay", 0, 4, "parts", 0.2)
    'replay: 0/4 parts, 0s elapsed'
    >>> progress_line("warm start generator", 400, 400, "steps", 30.0, "loss 0.120")
    'warm start generator: 400/400 steps, 30s, loss 0.120'
    """
    line = f"{label}: {done}/{total} {unit}, {duration(elapsed)}"
    if done < total:
        line += " elapsed"
        if done > 0:
            line += f", ETA {duration(elapsed / done * (total - done))}"
    return line + (f", {detail}" if detail else "")


class WorkProgress:
    """A job of ``total`` units (see the module docstring). ``interactive`` defaults to
    whether ``stream`` (stdout) is a terminal."""

    def __init__(self, label: str, total: int, unit: str = "", *,
                 interactive: bool | None = None, every_s: float = EVERY_S,
                 stream: TextIO | None = None) -> None:
        self.label, self.total, self.unit, self.every_s = label, max(int(total), 0), unit, every_s
        self.stream = stream
        out = stream or sys.stdout
        self.interactive = (out.isatty() if interactive is None else interactive)
        self.done = 0
        self.detail = ""
        self._start = self._last = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> WorkProgress:
        self._start = time.perf_counter()
        if self.interactive:
            self._bar = self._start_bar()
        if self._bar is None:
            self._write(progress_line(self.label, 0, self.total, self.unit, 0.0))
        self._last = self._start
        return self

    def _start_bar(self) -> Any:
        from rich.errors import LiveError
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn(self.unit), TimeElapsedColumn(), TextColumn("ETA"),
                       TimeRemainingColumn(), TextColumn("{task.fields[detail]}"),
                       transient=True)
        try:
            bar.start()
        except LiveError:  # another bar is live (a training run's): plain lines instead
            return None
        self._task = bar.add_task(self.label, total=self.total, detail="")
        return bar

    def advance(self, n: int = 1, detail: str = "") -> None:
        """``n`` more units done; ``detail`` (e.g. the current loss) is shown beside them."""
        self.done = min(self.done + n, self.total) if self.total else self.done + n
        self.detail = detail or self.detail
        now = time.perf_counter()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, detail=self.detail)
        elif now - self._last >= self.every_s and self.done < self.total:
            self._write(self.line(now))
            self._last = now

    def line(self, now: float | None = None) -> str:
        elapsed = (time.perf_counter() if now is None else now) - self._start
        return progress_line(self.label, self.done, self.total, self.unit, elapsed, self.detail)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
        if exc_type is None:  # the last line; an interrupted job says nothing more here
            self._write(self.line())

    def _write(self, line: str) -> None:
        if self.stream is not None:
            self.stream.write(line + "\n")
            self.stream.flush()
        else:
            print(line, flush=True)
