"""The test process (T): real pytest running a job's test modules against the candidate.

The pytest fork server calls ``prepare`` once, before any job: it imports pytest and its
plugins and builds one pytest session up to ``pytest_sessionstart`` with ``plugin.PYTEST_ARGS``
(the part of a pytest run that is the same for every job), so each T forked from it starts
warm. T then (``test_main``):

1. reads the candidate process's first frame (its exported names, or its import error) and
   makes ``sys.modules["solution"]`` a module whose names are those values and proxies
   (attribute reads it lacks, and ``setattr`` from ``monkeypatch``, go to the candidate);
2. runs pytest's own collection and run loop over the job's test modules. Each test module is
   a read-only empty placeholder file ``test_000i.py`` on disk (pytest's collection walks real
   paths); its source comes from T's memory, never from a file another process could read,
   and is imported the way pytest's ``import_path`` imports it (assertion rewriting included)
   with the candidate's names bound first (``layout``);
3. reports to the worker, on a pipe only T holds, which module pytest is collecting or running
   (for the per-module budgets) and each item's outcome (``plugin.Recorder``), then ``done``.

T holds no candidate code: every call into the candidate goes to C (``rpc``), and whatever
C answers arrives as data. T exits without pytest's unconfigure (nothing after the last report
matters, and it would spend a forced garbage collection).

Stdlib-only until ``prepare`` imports pytest: the jail runs it.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
import threading
import types
from pathlib import Path

from . import procstate
from .layout import MODULE, test_index, test_path
from .plugin import PYTEST_ARGS, make_recorder
from .rpc import Endpoint, Fatal, write_frame
from .stdnames import is_stdlib_module
from .verdicts import ItemResult, tree_has_body

MAX_FROM_CANDIDATE = 16 << 20  # bytes in one frame from C (a bigger answer fails the test)
PRELOAD = ("difflib", "pprint", "unittest", "unittest.mock", "doctest", "dataclasses",
           "decimal", "fractions", "typing", "enum", "inspect", "itertools", "functools",
           "collections", "math", "re", "json", "random", "string", "heapq", "bisect",
           "operator", "copy", "statistics", "datetime", "textwrap", "warnings", "io",
           "contextlib", "abc", "numbers", "array", "queue", "threading", "time", "timeit",
           "tempfile", "shutil", "glob", "fnmatch", "pathlib", "traceback", "types")

_STATE: dict = {}


class Report:
    """T's frames to the worker (see the module docstring). ``trips``: the round trips to the
    candidate T has started so far, told every ``rpc.TRIPS_EVERY`` of them (from whichever
    thread makes the request, hence the lock: frames are never interleaved) and before each
    phase, so the step that ends is credited all of its own. Written with ``rpc``'s
    ``write_frame``, the judge's own ``os.write``: a test's patch of it is in force while it
    calls the candidate."""

    def __init__(self, fd: int):
        self.fd = fd
        self.current = -1
        self.lock = threading.Lock()
        self.count = lambda: 0  # the round trips started so far (``test_main``)
        self.told = 0

    def send(self, frame: list) -> None:
        with self.lock:
            write_frame(self.fd, frame)

    def trips(self, count: int) -> None:
        with self.lock:
            if count > self.told:
                self.told = count
                write_frame(self.fd, ["trips", count])

    def phase(self, module: str | int, what: str) -> None:
        index = module if isinstance(module, int) else test_index(module)
        if index is not None:
            self.trips(self.count())
            self.current = index
            self.send(["phase", index, what])

    def item(self, module: str, item) -> None:
        index = test_index(module)
        if index is not None:
            self.send(["item", index, ItemResult.from_list(item.to_list()).to_list()])

    def poison(self, status: str, message: str) -> None:
        """The candidate process died or broke the protocol: this module's verdict is
        ``status``; nothing more can run in this session."""
        self.send(["poison", self.current, status, message[:400]])
        os._exit(0)


def job_files_only(root: str, wanted):
    """A pytest plugin: the placeholder files (and folders) that are not this job's test
    modules are not collected. pytest is given the folders that hold the job's modules
    (``job_folders``) and offers every entry it lists there to ``pytest_ignore_collect``;
    the placeholders that are not the job's (``wanted()`` is the set of its paths) would not
    exist in a folder holding only the job's files, so they are ignored at once, before
    pytest's own (slower) checks and before a ``Module`` is made for each."""
    import pytest  # jail-side: pytest is imported only in the fork server (module docstring)

    prefix = root.rstrip("/") + "/"

    class JobFilesOnly:
        @pytest.hookimpl(tryfirst=True)
        def pytest_ignore_collect(self, collection_path, config):
            path = str(collection_path)
            return True if path.startswith(prefix) and path not in wanted() else None

    return JobFilesOnly()


def job_folders(paths: list[str]) -> list[str]:
    """The folders holding ``paths``, in order: pytest's arguments for a job. Given each
    module's own path, pytest would list and collect its folder once per module (a job of
    n modules in one folder makes n * n ``Module`` nodes); given the folders, once each, in
    the sorted order of their files, which is the job's order (``layout.test_path``)."""
    return list(dict.fromkeys(str(Path(p).parent) for p in paths))


def warm_imports() -> None:
    """Every ``_pytest`` module and ``PRELOAD``, imported once before the first fork (so no
    test process pays for them); the differential reference warms itself the same way."""
    # jail-side: imported only in the fork server, once the jail is set up (module docstring)
    import importlib
    import pkgutil

    import _pytest

    for name in [f"_pytest.{info.name}" for info in pkgutil.iter_modules(_pytest.__path__)] \
            + list(PRELOAD):
        try:
            importlib.import_module(name)
        except Exception:  # an optional dependency missing: that module is simply not warm
            pass


def prepare(placeholder_dir: str) -> None:
    """In the pytest fork server, once: pytest imported and a session started."""
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # jail-side: pytest is imported only here, in the fork server (module docstring)
    import _pytest.python
    from _pytest.assertion.rewrite import rewrite_asserts
    from _pytest.config import _prepareconfig
    from _pytest.main import Session

    warm_imports()
    sink: dict = {}
    recorder = make_recorder(lambda m, item: sink["report"].item(m, item),
                             lambda m, what: sink["report"].phase(m, what))
    first = str(Path(placeholder_dir) / test_path(0))
    config = _prepareconfig([*PYTEST_ARGS, "--rootdir", placeholder_dir,
                             "--confcutdir", placeholder_dir, first],
                            plugins=[recorder, job_files_only(placeholder_dir,
                                                              lambda: _STATE["sources"])])
    session = Session.from_config(config)
    session.exitstatus = 0
    config._do_configure()
    config.hook.pytest_sessionstart(session=session)
    _STATE.update(config=config, session=session, sink=sink, dir=placeholder_dir,
                  rewrite=rewrite_asserts, original=_pytest.python.import_path)
    _pytest.python.import_path = _import_path
    procstate.watch_modules(is_stdlib_module)  # once here, not in every test process


def _import_path(path, *, mode, root, consider_namespace_packages):
    """pytest's ``import_path`` for the job's test modules: the source from memory."""
    entry = _STATE["sources"].get(str(path))
    if entry is None:
        return _STATE["original"](path, mode=mode, root=root,
                                  consider_namespace_packages=consider_namespace_packages)
    index, source = entry
    report: Report = _STATE["sink"]["report"]
    try:
        tree = ast.parse(source, filename=str(path))
    except BaseException:  # pytest reports it (a SyntaxError: the test is ``invalid``)
        report.send(["body", index, False])
        raise
    report.send(["body", index, tree_has_body(tree)])
    name = Path(path).stem
    module = types.ModuleType(name)
    module.__file__ = str(path)
    _STATE["rewrite"](tree, source.encode("utf-8", "surrogatepass"), str(path),
                      _STATE["config"])
    code = compile(tree, str(path), "exec", dont_inherit=True)
    # Only a module that compiles runs its ``from solution import ...``: a test with a
    # SyntaxError is reported as such (``invalid``) whether or not the candidate imports.
    error = _STATE.get("load_error")
    if error is not None:  # ``from solution import ...`` fails in every module, as pytest's
        raise _STATE["endpoint"].codec.decode(error)
    module.__dict__.update(_STATE["exports"])
    linecache.cache[str(path)] = (len(source), None, source.splitlines(keepends=True),
                                  str(path))
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


class SolutionModule(types.ModuleType):
    """``sys.modules["solution"]`` in T: the candidate's exported functions, classes, objects
    and modules, locally (so ``solution.f is f``); any other attribute, the module's data
    above all (``solution.count``), is read from the candidate module at each read, so a test
    sees what the candidate's calls did to its globals, as in one process. Setting one
    (``monkeypatch.setattr``) sets it there too, so the candidate's own code sees the
    patch."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _STATE["endpoint"].request("get", self, name)

    def __setattr__(self, name: str, value) -> None:
        if not (name.startswith("__") and name.endswith("__")):
            _STATE["endpoint"].request("set", self, name, value)
            if not self.kept_locally(value):  # data: read from the candidate from now on
                self.__dict__.pop(name, None)
                return
        types.ModuleType.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if not (name.startswith("__") and name.endswith("__")):
            _STATE["endpoint"].request("del", self, name)
        self.__dict__.pop(name, None)

    @staticmethod
    def kept_locally(value) -> bool:
        """Whether ``solution.<name>`` may be answered from T's copy: what has one identity on
        both sides (a proxy, a module, a function or class of either side) keeps it; a copied
        value does not (the candidate may rebind or change its global after any call)."""
        return callable(value) or isinstance(value, types.ModuleType) \
            or _STATE["endpoint"].mirrors.ref_of(value) is not None


_ABSENT = object()
_SHARED: dict[int, tuple] = {}  # id(SharedModule) -> (the candidate's module, undo stacks)


class SharedModule(types.ModuleType):
    """A standard-library module the candidate imported, as the test sees it through the
    candidate's names (``solution.random``, or ``random`` bound by the layout): reading is
    reading the test's own copy of the module (what the candidate did to its copy fools no
    test), and what the test sets or deletes (``patch("solution.random.randint")``,
    ``monkeypatch.setattr(solution.time, "sleep", ...)``) is set here and in the candidate's
    copy, so that the candidate calls the patch, as in one process. Setting back the value a
    patch replaced (the undo of ``monkeypatch`` and ``mock.patch``) restores the candidate's
    own attribute (``ops``' ``restore``), whatever it had done to it."""

    def __init__(self, local: types.ModuleType, remote) -> None:
        types.ModuleType.__init__(self, local.__name__)
        self.__dict__.update(vars(local))  # a snapshot: the test's copy, as at the start
        _SHARED[id(self)] = (remote, {})

    def __setattr__(self, name: str, value) -> None:
        remote, stacks = _SHARED[id(self)]
        stack = stacks.setdefault(name, [])
        if stack and stack[-1] is value:
            stack.pop()
            _STATE["endpoint"].request("restore", remote, name)
        else:
            stack.append(self.__dict__.get(name, _ABSENT))
            _STATE["endpoint"].request("set", remote, name, value)
        self.__dict__[name] = value

    def __delattr__(self, name: str) -> None:
        remote, stacks = _SHARED[id(self)]
        if name not in self.__dict__:
            raise AttributeError(name)
        stack = stacks.setdefault(name, [])
        if stack and stack[-1] is _ABSENT:
            stack.pop()
            _STATE["endpoint"].request("restore", remote, name)
        else:
            stack.append(self.__dict__[name])
            _STATE["endpoint"].request("del", remote, name)
        del self.__dict__[name]


def _solution(endpoint: Endpoint, manifest: dict) -> dict:
    """Bind the candidate's exports; returns them (name -> value)."""
    codec = endpoint.codec
    endpoint._echo(manifest.get("out"), manifest.get("warns"))
    if manifest.get("error") is not None:
        _STATE["load_error"] = manifest["error"]
        codec.decode(manifest["error"])  # malformed data fails here, not in each module
        return {}
    exports = {}
    names, ref = manifest.get("names"), manifest.get("module")
    if type(names) is not list or type(ref) is not int:
        raise ValueError("malformed manifest")
    # The module first: a name bound to the candidate's own module (``me =
    # sys.modules[__name__]``) is then this module, as in one process.
    module = SolutionModule(MODULE)
    codec.proxies[ref] = module
    endpoint.mirrors.ids[id(module)] = ref
    for entry in names:
        if type(entry) is not list or len(entry) not in (2, 3) or type(entry[0]) is not str \
                or not entry[0].isidentifier():
            raise ValueError("malformed manifest")
        exports[entry[0]] = value = codec.decode(entry[1])
        if len(entry) == 3:  # a standard-library module: the candidate's handle of its copy
            remote = codec.decode(entry[2])
            if isinstance(value, types.ModuleType) and sys.modules.get(value.__name__) is value \
                    and endpoint.mirrors.ref_of(remote) is not None:
                exports[entry[0]] = SharedModule(value, remote)
    module.__dict__.update({k: v for k, v in exports.items() if SolutionModule.kept_locally(v)})
    sys.modules[MODULE] = module
    return exports


def test_main(msg: dict, out_fd: int, from_cand: int, to_cand: int) -> None:
    """Body of T: ``msg["tests"]`` is ``[[index, source], ...]`` (the modules still to run)."""
    report = Report(out_fd)
    _STATE["sink"]["report"] = report
    report.phase(-1, "load")
    endpoint = Endpoint(from_cand, to_cand, max_frame=MAX_FROM_CANDIDATE, capture=False,
                        restricted=True, strict=True, fatal=report.poison)
    _STATE["endpoint"] = endpoint
    endpoint.on_trips, report.count = report.trips, lambda: endpoint.requests
    first = endpoint._read(("ready",))
    try:
        if not (len(first) == 2 and first[0] == "ready" and type(first[1]) is dict):
            raise ValueError("malformed first frame")
        _STATE["exports"] = _solution(endpoint, first[1])
    except (ValueError, TypeError, RecursionError, Fatal) as exc:
        report.poison("error", f"the candidate process sent a malformed first frame: {exc}")
    folder = Path(_STATE["dir"])
    _STATE["sources"] = {str(folder / test_path(i)): (i, src) for i, src in msg["tests"]}
    config, session = _STATE["config"], _STATE["session"]
    config.args = job_folders(list(_STATE["sources"]))
    try:
        config.hook.pytest_collection(session=session)
        config.hook.pytest_runtestloop(session=session)
        config.hook.pytest_sessionfinish(session=session, exitstatus=session.exitstatus)
    except (KeyboardInterrupt, SystemExit) as exc:
        report.send(["interrupted", report.current, f"{type(exc).__name__}: {exc}"[:400]])
        os._exit(0)
    except BaseException as exc:  # pytest's own machinery failed: not a verdict on the code
        report.send(["internal", report.current, f"{type(exc).__name__}: {exc}"[:400]])
        os._exit(0)
    report.send(["done"])
    os._exit(0)
