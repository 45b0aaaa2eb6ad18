"""The reference side of the differential check: real pytest, unjailed, on the judge's layout.

Run as a script (``python reference.py IN.json OUT.json [WORKERS]``, repository root on
``PYTHONPATH``): ``IN.json`` is a list of ``[code, test]`` pairs; ``OUT.json`` gets, per pair,
``{"items": [ItemResult.to_list(), ...], "body": bool, "status": str, "message": str}``.

Each pair is laid out as ``sandbox.jailside.layout`` defines the job ``(code, [test])``:
``solution.py`` holding the code verbatim and ``test_0000.py`` holding the test with the
candidate's exported names bound by ``layout.header_source``. Real pytest runs it with
``plugin.PYTEST_ARGS`` and the judge's own ``plugin.make_recorder`` (so both sides read
pytest's reports with the same code), and ``verdicts.verdict`` turns the items into the
module's verdict.

A session that pytest does not complete (a ``KeyboardInterrupt`` or ``pytest.exit`` in the
test or the candidate, which pytest reports as *Interrupted*, exit code 2; a ``SystemExit``
while it collects, which it reports as an *INTERNALERROR*, exit code 3) judges nothing: the
module's status is ``error`` and its items are dropped, whatever pytest reported of it before
it stopped, as the sandbox does with a module whose session ended early.

pytest is imported once, here; every pair runs in a child forked from this process (a fresh
``sys.modules`` for ``solution`` and the test module, its own temp dir, its own pytest
``basetemp``), ``WORKERS`` children at a time. A child that hangs past ``CHILD_TIMEOUT_S`` is
killed and reported as ``timeout`` (no pair of the corpus should: the status then differs
from the sandbox's and the check shows it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time

import pytest

from sandbox.jailside import layout, plugin, verdicts

CHILD_TIMEOUT_S = 60.0


def _exported(directory: str) -> list[str] | None:
    """The names the layout binds: the candidate imported once, as the session's
    ``solution``; None when its import raises (then every test module fails to import it)."""
    sys.path.insert(0, directory)
    try:
        import solution  # noqa: F401  (the layout's one import of the candidate)
    except BaseException:
        sys.modules.pop(layout.MODULE, None)
        return None
    return layout.exported_names(vars(sys.modules[layout.MODULE]))


def _child(code: str, test: str, directory: str) -> None:
    """Body of one forked child: lay the pair out, run pytest, write ``result.json``."""
    log = os.open(os.path.join(directory, "output.log"), os.O_WRONLY | os.O_CREAT, 0o600)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # as the jail's processes: nothing to read
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.chdir(directory)
    tempfile.tempdir = directory  # pytest's tmp_path basetemp: this pair's own
    with open(layout.MODULE + ".py", "w", encoding="utf-8") as f:
        f.write(code)
    names = _exported(directory)
    # A candidate that does not import: the test module's import of it fails, as in the jail.
    header = layout.header_source(test, ["*"] if names is None else names)
    path = os.path.join(directory, layout.test_file(0))
    with open(path, "w", encoding="utf-8") as f:
        f.write(header)
    items: list[verdicts.ItemResult] = []
    stopped: list[str] = []  # how pytest stopped the session before its end, if it did

    def emit(module: str, item: verdicts.ItemResult) -> None:
        if module == layout.test_file(0):
            items.append(item)

    def finish() -> None:
        body = verdicts.has_body(test)
        status, message = verdicts.verdict(items, body)
        if stopped:
            items.clear()
            status, message = "error", f"pytest stopped: {stopped[0]}"[:verdicts.MAX_MESSAGE]
        result = {"items": [i.to_list() for i in items], "body": body, "status": status,
                  "message": message}
        with open(os.path.join(directory, "result.json"), "w", encoding="utf-8") as f:
            json.dump(result, f)

    class Finish:
        """Every item is reported by the end of the session: write the result and exit
        there, as the jail's test process does, without pytest's unconfigure (its forced
        garbage collections are most of a small session's cost, and decide nothing)."""

        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self) -> None:
            finish()
            os._exit(0)

        def pytest_keyboard_interrupt(self, excinfo) -> None:  # KeyboardInterrupt, exit()
            stopped.append(f"{excinfo.typename}: {excinfo.value}")

        def pytest_internalerror(self, excinfo) -> None:  # SystemExit while collecting...
            stopped.append(f"internal error, {excinfo.typename}: {excinfo.value}")

    recorder = plugin.make_recorder(emit)
    pytest.main([*plugin.PYTEST_ARGS, "--rootdir", directory, path],
                plugins=[recorder, Finish()])
    finish()  # a session that ended before its finish (a usage error): what was reported


def _fork(code: str, test: str) -> tuple[int, str]:
    directory = tempfile.mkdtemp(prefix="diffref-")
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            _child(code, test, directory)
            status = 0
        finally:
            os._exit(status)
    return pid, directory


def _collect(directory: str, wait_status: int | None) -> dict:
    try:
        with open(os.path.join(directory, "result.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(directory, "output.log"), encoding="utf-8") as f:
            tail = f.read()[-300:]
    except OSError:
        tail = ""
    status = "timeout" if wait_status is None else "crashed"
    return {"items": [], "body": False, "status": status,
            "message": f"reference child ended with {wait_status}: {tail}"}


def run(pairs: list[list[str]], workers: int) -> list[dict]:
    results: list[dict | None] = [None] * len(pairs)
    running: dict[int, tuple[int, str, float]] = {}  # pid -> (index, dir, start)
    queue = list(range(len(pairs)))[::-1]
    while queue or running:
        while queue and len(running) < workers:
            index = queue.pop()
            pid, directory = _fork(*pairs[index])
            running[pid] = (index, directory, time.monotonic())
        pid, wait_status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for other, (index, directory, start) in list(running.items()):
                if time.monotonic() - start > CHILD_TIMEOUT_S:
                    os.kill(other, 9)
                    os.waitpid(other, 0)
                    del running[other]
                    results[index] = _collect(directory, None)
                    shutil.rmtree(directory, ignore_errors=True)
            time.sleep(0.002)
            continue
        if pid not in running:
            continue
        index, directory, _ = running.pop(pid)
        results[index] = _collect(directory, wait_status)
        shutil.rmtree(directory, ignore_errors=True)
    return results  # type: ignore[return-value]


def _warm() -> None:
    """Import what every child would import on its own (pytest's plugins, the modules its
    assertion reports use), once, before the first fork: the same list the jail's pytest fork
    server imports (``testproc.prepare``)."""
    from sandbox.jailside.testproc import warm_imports

    warm_imports()


def main(argv: list[str]) -> None:
    # No installed plugin is loaded, as in the jail's test process (set here, not at import:
    # the suite's doctest collection imports this module and must not change its process).
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    with open(argv[1], encoding="utf-8") as f:
        pairs = json.load(f)
    workers = int(argv[3]) if len(argv) > 3 else 2
    _warm()
    results = run(pairs, workers)
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv)
