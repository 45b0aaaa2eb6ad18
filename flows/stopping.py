"""How a command-line run stops: Ctrl-C or SIGTERM ends it within seconds, with one line.

    python -m flows.train ...   # Ctrl-C, or kill -TERM <pid>
    stopped (SIGINT): run tiny-20261126-101500 keeps steps 1-3 in runs/run_id=... ; ...

The entry points (``flows.train``, ``flows.evaluate``, ``flows.replay``, ``flows.infer``) call
:func:`install` first thing, before their heavy imports, and :func:`keeping` once they know
what a stop would leave behind. On the first SIGINT or SIGTERM:

1. the line ``stopped (<signal>): <what was kept>`` is written to stderr, computed from what is
   on disk at that moment (a step's manifest is written last and atomically, so a step either
   is complete or is not; after the signal nothing more is completed). A thread of this module
   writes it as soon as the signal arrives (through ``signal.set_wakeup_fd``), since Python
   runs a signal's handler only when the main thread next executes bytecode;
2. the process's stdout and stderr are pointed at ``/dev/null`` first: what follows (Prefect's
   "Crash detected" lines, tracebacks of the unwinding, threads' complaints) is not for the
   console, and Prefect's own logs still reach its API;
3. ``KeyboardInterrupt`` (``Stopped`` for SIGTERM) unwinds the main thread, so ``finally``
   blocks run: the vLLM engine is stopped, the MLflow run ended; the entry point then runs
   the exit hooks and leaves without the interpreter's teardown (:func:`leave`);
4. a deadline exits the process (``os._exit``) :data:`GRACE_S` seconds after the signal if
   the unwinding has not finished by then; a second signal exits at once.

Exit status 130 for SIGINT, 143 for SIGTERM, as a shell reports a process killed by them.

A Ctrl-C in a terminal signals the whole foreground process group. The temporary Prefect
server therefore runs in a session of its own (``deployments.server``), as the sandbox's workers
and the vLLM engine already do, so none of them dies before the run has stopped talking to it
(a dead server meant minutes of ``httpx.ConnectError`` retries); each dies with the run
(``PR_SET_PDEATHSIG``, closed pipes, the engine's own watch on its parent).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

GRACE_S = 3.0
"""Seconds between the first signal and a forced exit: unwinding a run (stopping a vLLM
engine, ending its MLflow run, Prefect's last API calls) takes a fraction of this when the
machine is idle; the rest is margin for a busy one, below the promised 5 s."""
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM (SIGINT raises a plain ``KeyboardInterrupt``)."""


_lock = threading.RLock()  # a handler may run inside another
_kept: Callable[[], str] = lambda: "nothing was kept"  # noqa: E731
_signum: int | None = None
_line: str | None = None
_installed = False
_seen = 0  # stop signals seen
_raised = False  # the main thread was interrupted


def install() -> None:
    """Handle SIGINT and SIGTERM as the module docstring says. Main thread only."""
    global _installed
    _installed = True
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    # Python runs a signal's handler in the main thread between two bytecodes, which can be
    # seconds away (a long C call, interpreter teardown). The C-level handler also writes the
    # signal's number to this pipe at once, and a thread of ours acts on it.
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    threading.Thread(target=_watch, args=(read,), name="stop-watch", daemon=True).start()
    previous = sys.excepthook

    def hook(kind, value, tb):  # an interrupt that escapes main(), e.g. during imports
        if issubclass(kind, KeyboardInterrupt):
            finish()
            return
        previous(kind, value, tb)

    sys.excepthook = hook


def reclaim() -> None:
    """Inside a flow run: take SIGTERM back from Prefect's flow engine, which installs its own
    handler for the run (it marks the run Crashed, then re-sends the signal to the handler it
    replaced: ours, but only after its log lines reached the console). Only where
    :func:`install` ran (the command line); a deployment's run keeps Prefect's."""
    if _installed and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_signal)


def keeping(describe: Callable[[], str]) -> None:
    """``describe()`` says what a stop keeps (called once, when the signal comes)."""
    global _kept
    _kept = describe


def stop_line(signum: int) -> str:
    """The one line of a stop: the signal and what was kept."""
    try:
        kept = _kept()
    except Exception as exc:  # never let the description hide the stop itself
        kept = f"(could not tell what was kept: {type(exc).__name__}: {exc})"
    return f"stopped ({signal.Signals(signum).name}): {kept}"


def exit_code() -> int:
    return EXIT_CODES.get(_signum or signal.SIGINT, 130)


def finish() -> int:
    """Write the stop line once (if no signal came, for an interrupt raised otherwise, as a
    SIGINT); returns the exit status. Safe from any thread."""
    global _line
    with _lock:
        if _line is None:
            _line = stop_line(_signum or signal.SIGINT)
            _write(_line, _silence())
    return exit_code()


def _write(line: str, fd: int) -> None:
    try:
        if os.isatty(fd):
            os.write(fd, b"\r\x1b[2K\x1b[?25h")  # clear a progress bar, show the cursor
        os.write(fd, (line + "\n").encode(errors="replace"))
    finally:
        os.close(fd)


def _silence() -> int:
    """Point fds 1 and 2 at /dev/null, first, so that nothing another thread writes lands
    after the stop line; returns a duplicate of the old stderr for the line itself."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        pass
    console = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    return console


def _arrived(signum: int) -> None:
    """A stop signal arrived (seen from either side; the first call per signal wins): the
    line, then a deadline; a second signal exits at once."""
    global _signum, _seen
    with _lock:
        _seen += 1
        first = _seen == 1
        if first:
            _signum = signum
    if not first:
        os._exit(finish())
    finish()
    threading.Thread(target=_deadline, name="stop-deadline", daemon=True).start()


def _watch(fd: int) -> None:
    """The wakeup pipe's reader: one byte per signal delivered to the process."""
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum in EXIT_CODES:
                _arrived(signum)


def _on_signal(signum: int, frame: object) -> None:
    """The Python-level handler, in the main thread: unwind it (``finally`` blocks run)."""
    global _raised
    if _seen == 0:  # the wakeup pipe is not ours any more (someone replaced it)
        _arrived(signum)
    finish()  # the watch thread may have counted the signal and not written the line yet
    if _raised:  # the main thread got a second signal
        os._exit(finish())
    _raised = True
    raise Stopped() if signum == signal.SIGTERM else KeyboardInterrupt()


def _deadline() -> None:
    time.sleep(GRACE_S)
    os._exit(finish())


def leave() -> int:
    """After an interrupt has unwound the main thread: the stop line (if not written yet),
    then the exit hooks (Prefect's last sends to its API, the temporary server's stop), then
    exit without the interpreter's teardown, whose seconds of freeing models nobody waits
    for. Returns the exit status instead where :func:`install` did not run (a caller in
    Python)."""
    code = finish()
    if not _installed:
        return code
    try:
        atexit._run_exitfuncs()
    finally:
        os._exit(code)


def steps_text(steps: list[int]) -> str:
    """Step numbers as ranges.

    >>> steps_text([1, 2, 3, 5]), steps_text([4]), steps_text([])
    ('1-3, 5', '4', '')
    """
    out: list[str] = []
    for s in sorted(steps):
        if out and s == int(out[-1].split("-")[-1]) + 1:
            out[-1] = f"{out[-1].split('-')[0]}-{s}"
        else:
            out.append(str(s))
    return ", ".join(out)
