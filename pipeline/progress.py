"""Progress of a long job, with an ETA: a rich bar in a terminal, plain lines when piped.

    with WorkProgress("evaluate", total=164, unit="problems") as progress:
        for chunk in chunks:
            ...
            progress.advance(len(chunk))

In a terminal (stdout is a TTY) it draws a rich bar (done/total, elapsed, time remaining) that
disappears when the job ends, leaving one summary line. Piped (a log file, CI, a test), it
writes plain lines such as ``evaluate: 12/164 problems, 1m03s elapsed, ETA 7m40s``: one when
the job starts, then at most one per ``every_s`` seconds, and one at the end. The warm start,
the evaluation and the replay all use it, so their progress looks and behaves the same; the
training loop's bar and step lines (``tasks.progress``) use its :class:`LiveBar` and
:func:`eta`. Prefect-free; the lines go through ``print``, so inside a flow with
``log_prints`` they reach the run's logs too.

The ETA is the units left at the mean pace of the units done so far in this process: a job
resumed after some units were done elsewhere counts only its own.
"""

from __future__ import annotations

import io
import logging
import sys
import time
from typing import Any, TextIO

EVERY_S = 5.0  # plain mode: seconds between lines (the first and last are always written)
DETAIL_WIDTH = 12  # what a bar leaves for its detail, e.g. "loss 10.759"


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


def remaining_s(elapsed: float, done: int, left: int) -> float | None:
    """Seconds the ``left`` units take at the mean pace of the ``done`` units that took
    ``elapsed`` seconds (None before the first is done).

    >>> remaining_s(30.0, 3, 7), remaining_s(5.0, 0, 7)
    (70.0, None)
    """
    return elapsed / done * max(left, 0) if done > 0 else None


def eta(elapsed: float, done: int, left: int) -> str:
    """``ETA <duration>`` of :func:`remaining_s`; empty before the first unit is done and
    when none is left.

    >>> eta(30.0, 3, 7), eta(5.0, 0, 7), eta(30.0, 3, 0)
    ('ETA 1m10s', '', '')
    """
    seconds = remaining_s(elapsed, done, left)
    return "" if seconds is None or left <= 0 else f"ETA {duration(seconds)}"


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
        remaining = eta(elapsed, done, total - done)
        line += f", {remaining}" if remaining else ""
    return line + (f", {detail}" if detail else "")


def _time_column(table_column: Any = None) -> Any:
    """The bar's ``<elapsed> elapsed, ETA <left>`` column: the time left is the task's
    ``eta_s`` field counted down from its ``eta_at`` (rich is imported when a bar is drawn)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class TimeColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            text = f"{duration(task.elapsed or 0.0)} elapsed"
            eta_s = task.fields.get("eta_s")
            if eta_s is not None and task.remaining:
                text += f", ETA {duration(eta_s - (time.monotonic() - task.fields['eta_at']))}"
            return Text(text, style="progress.remaining")

    return TimeColumn(table_column)


def _stream_handlers() -> list[logging.StreamHandler]:
    """Every stream handler of the root logger and of the named loggers."""
    loggers = [logging.getLogger()] + [
        lg for lg in list(logging.Logger.manager.loggerDict.values())
        if isinstance(lg, logging.Logger)]
    seen: dict[int, logging.StreamHandler] = {}
    for lg in loggers:
        for handler in lg.handlers:
            if isinstance(handler, logging.StreamHandler):
                seen.setdefault(id(handler), handler)
    return list(seen.values())


class LiveBar:
    """A transient rich bar in a terminal: label, bar, done/total, unit, elapsed, ETA (the
    seconds left that :meth:`update` was last given, counted down until the next update) and a
    detail such as the current loss.

    While it shows, the log handlers that write to the terminal (Prefect's console, MLflow's)
    write through it: their lines appear above the bar, as printed lines do, instead of being
    written into the bar's own line."""

    def __init__(self, label: str, total: int, unit: str = "", completed: int = 0) -> None:
        self.label, self.total, self.unit, self.completed = label, total, unit, completed
        self._bar: Any = None
        self._task: Any = None
        self._rerouted: list[tuple[logging.StreamHandler, Any, Any]] = []

    def start(self) -> bool:
        """Draw the bar; False (and nothing drawn) when another bar is live in this process."""
        from rich.errors import LiveError
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
        from rich.table import Column

        def one_line() -> Column:  # a column cut short rather than wrapped onto a second line
            return Column(no_wrap=True, overflow="ellipsis")

        gauge = BarColumn()
        bar = Progress(TextColumn("{task.description}", table_column=one_line()), gauge,
                       MofNCompleteColumn(table_column=one_line()),
                       TextColumn(self.unit, table_column=one_line()),
                       _time_column(one_line()),
                       TextColumn("{task.fields[detail]}", table_column=one_line()),
                       transient=True)
        # the gauge takes what the terminal leaves of its width (up to rich's 40): the bar is
        # one line in an 80-column terminal too
        others = (len(self.label) + 2 * len(str(self.total)) + 1 + len(self.unit)
                  + len("00m00s elapsed, ETA 00m00s") + DETAIL_WIDTH + 5)
        gauge.bar_width = max(10, min(40, bar.console.width - others))
        try:
            bar.start()
        except LiveError:  # another bar is live (a training run's): its caller goes plain
            return False
        self._bar = bar
        self._task = bar.add_task(self.label, total=self.total, completed=self.completed,
                                  detail="", eta_s=None, eta_at=0.0)
        self._reroute()
        return True

    def update(self, completed: int, eta_s: float | None, detail: str = "") -> None:
        """``completed`` units done, ``eta_s`` seconds left from now (None: not known yet)."""
        self._bar.update(self._task, completed=completed, detail=detail, eta_s=eta_s,
                         eta_at=time.monotonic())

    def print(self, line: str) -> None:
        """``line`` above the bar."""
        self._bar.console.print(line, soft_wrap=True, markup=False, highlight=False)

    def stop(self) -> None:
        if self._bar is None:
            return
        if self._rerouted:
            self._rerouted[0][0].stream.flush()  # a line not ended yet
        for handler, stream, console_file in reversed(self._rerouted):
            handler.setStream(stream)
            if console_file is not None:
                handler.console.file = console_file  # type: ignore[attr-defined]
        self._rerouted.clear()
        self._bar.stop()

    def _reroute(self) -> None:
        """Point the handlers that write to the terminal's stderr at the bar's console while
        the bar shows (rich stands in for stderr then, when stdout is a terminal)."""
        from rich.console import Console
        from rich.file_proxy import FileProxy

        if not isinstance(sys.stderr, FileProxy):
            return
        terminal = sys.stderr.rich_proxied_file
        if not terminal.isatty():
            return
        through = _Through(self._bar.console, terminal)
        for handler in _stream_handlers():
            if handler.stream is not terminal:
                continue
            console = getattr(handler, "console", None)  # Prefect's handler prints through it
            console_file = None
            if isinstance(console, Console):
                console_file = console.file
                console.file = through
            self._rerouted.append((handler, handler.setStream(through), console_file))


class _Through(io.TextIOBase):
    """A stream whose lines a live bar's console prints above the bar, colours kept and not
    wrapped (a long line wraps in the terminal as it would without the bar)."""

    def __init__(self, console: Any, terminal: TextIO) -> None:
        from rich.ansi import AnsiDecoder

        self._console, self._terminal, self._decoder = console, terminal, AnsiDecoder()
        self._buffer = ""

    def write(self, text: str) -> int:
        *lines, self._buffer = (self._buffer + text).split("\n")
        if lines:
            self._print(lines)
        return len(text)

    def flush(self) -> None:
        if self._buffer:
            self._print([self._buffer])
            self._buffer = ""

    def _print(self, lines: list[str]) -> None:
        from rich.text import Text

        self._console.print(Text("\n").join(self._decoder.decode_line(line) for line in lines),
                            soft_wrap=True)

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._terminal.fileno()


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
        self._bar: LiveBar | None = None

    def __enter__(self) -> WorkProgress:
        self._start = time.perf_counter()
        if self.interactive:
            self._bar = self._start_bar()
        if self._bar is None:
            self._write(progress_line(self.label, 0, self.total, self.unit, 0.0))
        self._last = self._start
        return self

    def _start_bar(self) -> LiveBar | None:
        bar = LiveBar(self.label, self.total, self.unit)
        return bar if bar.start() else None  # another bar is live: plain lines instead

    def advance(self, n: int = 1, detail: str = "") -> None:
        """``n`` more units done; ``detail`` (e.g. the current loss) is shown beside them."""
        self.done = min(self.done + n, self.total) if self.total else self.done + n
        self.detail = detail or self.detail
        now = time.perf_counter()
        if self._bar is not None:
            self._bar.update(self.done, remaining_s(now - self._start, self.done,
                                                    self.total - self.done), self.detail)
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
