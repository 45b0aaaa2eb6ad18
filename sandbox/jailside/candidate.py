"""The candidate process (C): the candidate module, loaded exactly as CPython imports a module,
serving the test process's requests.

The code is compiled as ``solution.py`` with its own compile flags (``dont_inherit``: nothing
of the sandbox's ``from __future__`` imports leaks in), into a real module registered as
``sys.modules["solution"]`` (so ``dataclasses``, ``typing.get_type_hints``, ``pickle`` and
``inspect`` find it), with no name injected. Whatever it prints while loading is written to
this process's log as it is printed (its stdout and stderr: the worker keeps the start of it
as the job's ``output``, for people to read), and sent to the test process with what it
warns, in its first frame:

    ["ready", {"names": [[name, value], ...], "module": handle, "error": exception or None,
               "out": [stdout, stderr], "warns": [...]}]

``names`` are ``layout.exported_names`` of the module, each as a ``codec`` value (a copy, a
standard-library name, or a handle); ``error`` is the exception the import raised, if any
(then ``names`` is empty, and every test module fails to import, as under pytest). After
that, C answers requests (``rpc``) until the test process goes away.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import builtins
import io
import linecache
import logging
import os
import sys
import threading
import types
import warnings

from . import procstate
from .describe import describe
from .layout import MODULE, exported_names
from .relay import MAX_LOGS, MAX_OUTPUT, Capped, text
from .rpc import Endpoint
from .stdnames import is_stdlib_module
from .wire import write_frame

SOURCE_NAME = f"{MODULE}.py"
MAX_FROM_TEST = 1 << 30  # the test process is the judge's side: it is not bounded like C


def load(code: str) -> tuple[types.ModuleType, BaseException | None]:
    """Import ``code`` as the module ``solution``; the exception it raised, if any."""
    module = types.ModuleType(MODULE)
    module.__file__ = SOURCE_NAME
    sys.modules[MODULE] = module
    linecache.cache[SOURCE_NAME] = (len(code), None, code.splitlines(keepends=True),
                                    SOURCE_NAME)
    try:
        exec(compile(code, SOURCE_NAME, "exec", dont_inherit=True), module.__dict__)
    except BaseException as exc:  # SystemExit at import included: the import failed
        sys.modules.pop(MODULE, None)
        return module, exc
    return module, None


def candidate_main(code: str, from_test: int, to_test: int) -> None:
    """Body of C."""
    def gone(status: str, message: str) -> None:
        raise SystemExit(0)  # the test process died: nothing left to serve

    endpoint = Endpoint(from_test, to_test, max_frame=MAX_FROM_TEST, capture=True,
                        restricted=False, strict=False, fatal=gone)
    _share_process_state(endpoint)
    saved = sys.stdout, sys.stderr
    out, err = Logged(1), Logged(2)
    sys.stdout, sys.stderr = out, err
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module, error = load(code)
        finally:
            sys.stdout, sys.stderr = saved
    codec = endpoint.codec
    manifest: dict = {"out": [out.value(), err.value()], "warns": endpoint._warnings(caught),
                      "names": [], "error": None, "module": None}
    if error is not None:
        manifest["error"] = _encode_error(codec, error)
    else:
        namespace = module.__dict__
        for name in exported_names(namespace):
            value = namespace[name]
            try:
                entry = [name, codec.encode(value, describe)]
                if isinstance(value, types.ModuleType) and is_stdlib_module(value.__name__):
                    # The test reads its own copy of the module (by name), and patches it
                    # in the candidate's too (``testproc.SharedModule``): this is its handle.
                    entry.append(codec.encode_handle(value, describe))
            except BaseException:  # a hostile object that cannot even be described
                continue
            manifest["names"].append(entry)
        manifest["module"] = codec.ref_of(module)
    write_frame(to_test, ["ready", manifest])
    endpoint.depth = 0
    endpoint.serve_forever()


class Logged(Capped):
    """The candidate's ``sys.stdout``/``sys.stderr`` while it imports: kept for the test
    process, and written through to the log descriptor ``fd`` at once (so what it printed
    before an import that hangs or kills its process is there too), up to the same cap."""

    def __init__(self, fd: int):
        super().__init__()
        self.fd = fd

    def write(self, text) -> int:
        room = MAX_OUTPUT - self.size
        written = super().write(text)
        if room > 0 and text:
            data = text[:room].encode("utf-8", "replace")
            try:
                while data:
                    data = data[os.write(self.fd, data):]
            except OSError:  # the candidate closed its own log: nothing more to keep
                pass
        return written


def _share_process_state(endpoint: Endpoint) -> None:
    """What a test and its candidate share in one process, and a test changes for the
    candidate to see: ``input()`` and ``sys.stdin`` (``monkeypatch.setattr("builtins.input",
    ...)``, a ``StringIO`` as ``sys.stdin``) are read from the test's side while the test is
    calling the candidate, and log records reach the test's loggers (``caplog``). The
    environment, working directory and recursion limit are sent by the test process
    (``Endpoint._sync``)."""
    fallback_input, fallback_stdin = builtins.input, sys.stdin

    def serving() -> bool:
        return endpoint.depth > 0 and threading.get_ident() == endpoint.serving_thread

    def ask(method: str, arg, fallback):
        if not serving():  # at import, or from a thread of its own: its own stdin
            return fallback()
        out, err = (stream.drain() if isinstance(stream, Capped) else ""
                    for stream in (sys.stdout, sys.stderr))
        return endpoint.request("stdin", method, [] if arg is None else [arg], out, err)

    def relay_input(prompt=None):
        return ask("input", prompt, lambda: fallback_input(*([] if prompt is None
                                                                else [prompt])))

    class Stdin(io.TextIOBase):
        def readable(self) -> bool:
            return True

        def read(self, size=-1):
            return ask("read", size, lambda: fallback_stdin.read(size))

        def readline(self, size=-1):
            return ask("readline", size, lambda: fallback_stdin.readline(size))

        def readlines(self, hint=-1):
            return ask("readlines", hint, lambda: fallback_stdin.readlines(hint))

    class Forward(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if endpoint.logs is not None and serving() and len(endpoint.logs) < MAX_LOGS:
                endpoint.logs.append([str(record.name), int(record.levelno),
                                      text(record.getMessage()), str(record.pathname),
                                      int(record.lineno or 0), str(record.funcName)])

    builtins.input, sys.stdin = relay_input, Stdin()
    procstate.share_random(lambda: endpoint.request("randstate"))
    root = logging.getLogger()
    root.addHandler(Forward())
    root.setLevel(logging.NOTSET)  # every record goes over; the test's levels decide


def _encode_error(codec, error: BaseException):
    try:
        return codec.encode(error, describe)
    except BaseException as exc:
        return codec.encode(RuntimeError(f"the candidate failed to import "
                                         f"({type(error).__name__}): {text(exc)}"))
