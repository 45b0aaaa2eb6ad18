"""A pytest plugin that records what pytest decided, item by item, and changes nothing.

The jail's test process loads it into every session it runs; the differential check loads the
very same plugin into real pytest outside the jail, so both sides read pytest's reports the
same way. It only listens: it never alters a report, an outcome or the order of anything.

``PYTEST_ARGS`` are the command-line options of every session, jailed or not:

- ``-p no:cacheprovider`` and ``-p no:stepwise``: no ``.pytest_cache`` (nothing a test leaves
  may steer a later session), ``--noconftest`` and ``-c /dev/null``: no conftest, ini file or
  ``pyproject.toml`` is read (a test cannot plant one for the next session);
- ``--capture=sys``: pytest captures per test as usual (``capsys``/``capfd`` work), without
  taking over the process's file descriptors;
- ``--continue-on-collection-errors``: one test module that fails to import does not stop the
  others (each test string is judged on its own);
- ``-p no:terminal``: nobody reads a terminal report (the outcomes come from this plugin);
- ``-W default``: warnings are shown, never turned into errors or ignored by a global filter.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .verdicts import MODULE_ITEM, ItemResult, short

PYTEST_ARGS = ("-p", "no:cacheprovider", "-p", "no:stepwise", "--noconftest", "-c",
               "/dev/null", "--capture=sys", "--continue-on-collection-errors",
               "-p", "no:terminal", "-W", "default")


def _is_assertion(exc: BaseException | None) -> bool:
    """An assert (or pytest's own failure: ``fail``, DID NOT RAISE / WARN) decided it."""
    if exc is None:
        return False
    if isinstance(exc, AssertionError):
        return True
    import pytest  # the test process and the differential check both have it

    return isinstance(exc, pytest.fail.Exception)


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # a hostile __str__
        text = "(unprintable)"
    return short(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def _message(report, exc: BaseException | None) -> str:
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return short(crash.message)
    if isinstance(getattr(report, "longrepr", None), tuple):  # a skip: (path, line, reason)
        return short(report.longrepr[2])
    if exc is not None:
        return _describe(exc)
    return short(getattr(report, "longreprtext", "") or "")


class Recorder:
    """Turns pytest's reports into ``ItemResult``s and hands them to ``emit``.

    ``emit(module, item)``: ``module`` is the test module's file name (``test_0003.py``).
    ``phase(module, what)`` is told when pytest starts to collect (``"collect"``) or to run
    (``"run"``) a module's items, so a caller can budget each module on its own."""

    def __init__(self, emit: Callable[[str, ItemResult], None],
                 phase: Callable[[str, str], None] | None = None):
        self.emit, self.phase = emit, phase or (lambda module, what: None)
        self._items: dict[str, dict] = {}
        self._collect_excs: dict[str, BaseException] = {}
        self._running: str | None = None

    @staticmethod
    def _split(nodeid: str) -> tuple[str, str]:
        module, _, rest = nodeid.partition("::")
        return module.rsplit("/", 1)[-1], rest

    def pytest_collectstart(self, collector) -> None:
        module, rest = self._split(collector.nodeid)
        if module.endswith(".py") and not rest:
            self.phase(module, "collect")

    def pytest_exception_interact(self, node, call, report) -> None:
        # pytest calls this for a failed collection before its collect report, with the
        # exception (the report itself does not carry it).
        if call.when == "collect" and call.excinfo is not None:
            self._collect_excs[node.nodeid] = call.excinfo.value

    def pytest_collectreport(self, report) -> None:
        module, rest = self._split(report.nodeid)
        if not module.endswith(".py") or report.outcome == "passed":
            return
        exc = self._collect_excs.pop(report.nodeid, None)
        cause = exc.__cause__ if exc is not None else None
        syntax = (isinstance(cause, SyntaxError) and not rest
                  and str(getattr(cause, "filename", "") or "").endswith(module))
        if report.outcome == "skipped":
            outcome, message = "skipped", _message(report, None)
        else:
            outcome = "error"
            shown = cause if isinstance(cause, SyntaxError | ImportError) else exc
            message = (_describe(shown) if shown is not None
                       else _message(report, None))
        self.emit(module, ItemResult(rest or MODULE_ITEM, outcome, _is_assertion(exc), syntax,
                                     message))

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:
        module, _ = self._split(nodeid)
        if module != self._running:
            self._running = module
            self.phase(module, "run")

    def pytest_runtest_makereport(self, item, call):
        # A plain hook returning None, so pytest's own makereport decides the report; the
        # exception is kept for the logreport of the same phase.
        state = self._items.setdefault(item.nodeid, {"start": time.perf_counter()})
        state.setdefault("excs", {})[call.when] = (
            call.excinfo.value if call.excinfo is not None else None)

    def pytest_runtest_logreport(self, report) -> None:
        state = self._items.setdefault(report.nodeid, {"start": time.perf_counter()})
        state[report.when] = report
        if report.when == "teardown":
            self._finish(report.nodeid, self._items.pop(report.nodeid))

    def _finish(self, nodeid: str, state: dict) -> None:
        module, name = self._split(nodeid)
        excs = state.get("excs", {})
        setup, call, teardown = state.get("setup"), state.get("call"), state.get("teardown")
        failing = None
        if setup is not None and setup.failed:
            outcome, failing = "error", setup
        elif setup is not None and setup.skipped:
            outcome = "xfailed" if hasattr(setup, "wasxfail") else "skipped"
        elif call is not None and call.failed:
            outcome, failing = "failed", call
        elif call is not None and call.skipped:
            outcome = "xfailed" if hasattr(call, "wasxfail") else "skipped"
        elif call is not None and hasattr(call, "wasxfail"):
            outcome = "xpassed"
        else:
            outcome = "passed"
        if outcome in ("passed", "xpassed") and teardown is not None and teardown.failed:
            outcome, failing = "error", teardown
        exc = excs.get(failing.when) if failing is not None else None
        shown = failing or call or setup
        message = _message(shown, exc) if outcome != "passed" else ""
        self.emit(module, ItemResult(name, outcome, _is_assertion(exc), False, message))


def make_recorder(emit: Callable[[str, ItemResult], None],
                  phase: Callable[[str, str], None] | None = None) -> Recorder:
    """A ``Recorder`` (the name the jail's test process and the differential check use)."""
    return Recorder(emit, phase)
