"""Process state a test and its candidate share in one process, kept shared across two: the
environment (``monkeypatch.setenv``), the working directory (``monkeypatch.chdir``), the
recursion limit, the test's patches of standard-library modules and builtins
(``monkeypatch.setattr(time, "sleep", ...)``, ``patch("builtins.open")``, ``sys.argv``) and
the seeding of the ``random`` generator. The test process tracks its own (``Tracker``) and,
before a request, tells the candidate process what changed since it last did (the ``state``
request, applied there by ``apply``).

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import functools
import importlib
import os
import random
import sys
import types

from .stdnames import is_stdlib_module

ENV_IGNORED = frozenset({"PYTEST_CURRENT_TEST"})  # pytest's, changed at every test phase


_GETCWD = os.getcwd  # the process's own: a test's patch of ``os.getcwd`` moves nothing


def _cwd() -> str | None:
    try:
        return _GETCWD()
    except OSError:  # the directory was removed
        return None


def _raw_environ() -> dict:
    """``os.environ``'s own dict (compared as is: the fast path of ``Tracker.changes``)."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else dict(os.environ)


def _shared_state() -> tuple:
    return ({k: v for k, v in os.environ.items() if k not in ENV_IGNORED}, _cwd(),
            sys.getrecursionlimit())


class Tracker:
    """T: the state the candidate process was last told (at first: the one it started
    with, as both were forked from the same setup), the test's patches of the standard
    library (``Patches``) and the version of the test's ``random`` generator
    (``TestRandom``)."""

    def __init__(self):
        self.synced = _shared_state()
        self.raw = None
        self.random = TestRandom()
        self.patches = Patches(is_stdlib_module)

    def changes(self) -> list | None:
        """``[changed, removed, cwd, limit, patches, random]`` since C was last told, or None
        when nothing changed (``cwd``/``limit``/``random`` None when those did not)."""
        env = self._environment()
        patches, state = self.patches.changes(), self.random.give()
        if env is None and patches is None and state is None:
            return None
        return [*(env or [{}, [], None, None]), patches or [], state]

    def _environment(self) -> list | None:
        raw = (_raw_environ(), _cwd(), sys.getrecursionlimit())
        if raw == self.raw:  # the common case, at the cost of one dict comparison
            return None
        self.raw = (dict(raw[0]), raw[1], raw[2])
        now = _shared_state()
        if now == self.synced:
            return None
        (env, cwd, limit), (old_env, old_cwd, old_limit) = now, self.synced
        changed = {k: v for k, v in env.items() if old_env.get(k) != v}
        removed = [k for k in old_env if k not in env]
        self.synced = now
        return [changed, removed, cwd if cwd != old_cwd else None,
                limit if limit != old_limit else None]


def apply(changed, removed, cwd, limit, patches, state) -> None:
    """C: take the test's changes (``ValueError`` for malformed ones)."""
    apply_patches(patches, is_stdlib_module)
    apply_random(state)
    if type(changed) is not dict or type(removed) is not list or not all(
            type(x) is str for x in [*changed, *changed.values(), *removed]):
        raise ValueError("malformed environment")
    for key in removed:
        os.environ.pop(key, None)
    os.environ.update(changed)
    if isinstance(cwd, str):
        os.chdir(cwd)
    if type(limit) is int:
        sys.setrecursionlimit(limit)


# ----- the standard library and builtins, patched by the test -------------------------------
# Modules whose attributes the judge's own machinery uses, or that pytest sets per test: a
# test's patch of them is not sent (``monkeypatch`` of these stays the test's own).
_UNSHARED_MODULES = frozenset({
    "json", "struct", "select", "threading", "_thread", "io", "_io", "warnings", "logging",
    "types", "inspect", "copy", "operator", "dataclasses", "collections", "functools", "abc",
    "typing", "traceback", "linecache", "enum", "weakref", "gc", "signal", "posix", "codecs",
    "importlib", "encodings", "re", "sre_compile", "sre_parse", "ast", "tokenize", "pathlib",
    "contextlib", "site", "atexit", "faulthandler", "zipimport", "marshal", "_weakref",
    "datetime", "zoneinfo", "decimal", "fractions",  # the codec builds their values by name
})
_UNSHARED = {
    "math": frozenset({"nan", "inf"}),
    "sys": frozenset({"stdout", "stderr", "stdin", "__stdout__", "__stderr__", "__stdin__",
                      "last_type", "last_value", "last_traceback", "last_exc", "displayhook",
                      "excepthook", "unraisablehook", "breakpointhook", "modules", "path",
                      "meta_path", "path_hooks", "path_importer_cache", "ps1", "ps2",
                      "tracebacklimit", "settrace", "setprofile", "setrecursionlimit",
                      "exit", "audit", "addaudithook"}),
    "os": frozenset({"write", "read", "set_blocking", "chdir", "getcwd", "environ", "_exit",
                     "fspath", "close", "open", "fstat", "getpid", "putenv", "unsetenv",
                     "environb", "kill", "dup", "dup2", "pipe"}),
    "builtins": frozenset({"__import__", "__build_class__", "isinstance", "type", "object",
                           "getattr", "setattr", "hasattr", "len", "id", "iter", "next",
                           "super", "BaseException", "Exception", "str", "int", "list", "dict",
                           "tuple", "bytes", "float", "bool", "callable", "vars", "repr",
                           "exec", "compile", "globals", "locals"}),
}


SYS_SHARED = ("argv", "platform", "maxsize", "byteorder", "version_info", "orig_argv")


def _sys_get(name: str):
    return sys.__dict__.get(name, _GONE)


def shared_attribute(module: str, name: str) -> bool:
    """Whether a test's patch of ``module.name`` is sent to the candidate process."""
    return module not in _UNSHARED_MODULES and not name.startswith("__") \
        and name not in _UNSHARED.get(module, ())


class Patches:
    """T: the attributes of standard-library modules (and ``builtins``) the test set or
    deleted since the candidate process was last told (``monkeypatch.setattr(time, "sleep",
    ...)``, ``patch("builtins.open")``, ``sys.argv = [...]``): each module loaded at the start
    is made a ``Watched`` module, whose ``setattr`` notes the name; one imported later is
    from the next request on (a patch made before that is not seen)."""

    def __init__(self, is_stdlib):
        self.dirty: set[tuple[str, str]] = set()
        self.original: dict[tuple[str, str], object] = {}
        self.sent: dict[tuple[str, str], object] = {}
        # ``sys`` keeps its class (``type(sys)`` is how code names the module type): its
        # shareable attributes are compared at each request instead.
        self.sys_now = tuple(map(_sys_get, SYS_SHARED))
        self.is_stdlib, self.loaded = is_stdlib, 0
        _ACTIVE[:] = [self]
        self._watch_new()

    def _watch_new(self) -> None:
        self.loaded = len(sys.modules)
        watch_modules(self.is_stdlib)

    def note(self, module: str, name: str, old) -> None:
        if shared_attribute(module, name):
            self.original.setdefault((module, name), old)
            self.dirty.add((module, name))

    def changes(self) -> list | None:
        """``[[module, name, mode, value], ...]``, ``mode`` ``set``, ``del`` (the test
        deleted it) or ``restore`` (the test put back the value it had at the start: the
        candidate's own comes back)."""
        if len(sys.modules) != self.loaded:
            self._watch_new()
        now = tuple(map(_sys_get, SYS_SHARED))
        if now != self.sys_now:  # a cheap test first: these rarely change
            for name, value, seen in zip(SYS_SHARED, now, self.sys_now, strict=True):
                if value is not seen:
                    self.note("sys", name, seen)
            self.sys_now = now
        if not self.dirty:
            return None
        out = []
        for module, name in sorted(self.dirty):
            value = sys.modules[module].__dict__.get(name, _GONE)
            key = (module, name)
            if value is self.original[key]:
                if key in self.sent:
                    del self.sent[key]
                    out.append([module, name, "restore", None])
            elif key not in self.sent or self.sent[key] is not value:
                self.sent[key] = value
                out.append([module, name, "del", None] if value is _GONE
                           else [module, name, "set", value])
        self.dirty.clear()
        return out or None


_GONE = object()


_ACTIVE: list[Patches] = []  # T: the session's ``Patches`` (none in the fork server)


class Watched(types.ModuleType):
    """A standard-library module whose attribute writes the test process notes
    (``Patches``)."""

    def __setattr__(self, name: str, value) -> None:
        for patches in _ACTIVE:
            patches.note(self.__name__, name, self.__dict__.get(name, _GONE))
        types.ModuleType.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        for patches in _ACTIVE:
            patches.note(self.__name__, name, self.__dict__.get(name, _GONE))
        types.ModuleType.__delattr__(self, name)


def watch_modules(is_stdlib) -> None:
    """Make every standard-library module loaded (and ``builtins``) a ``Watched`` one. The
    test process's fork server does it once for the modules it preloads, so a test process
    only makes the ones imported since (changing a module's class writes to it, a page
    copied in every forked process)."""
    for name, module in list(sys.modules.items()):
        if type(module) is types.ModuleType and module.__name__ == name \
                and (name == "builtins" or is_stdlib(name)) \
                and name not in _UNSHARED_MODULES and name != "sys":
            try:
                module.__class__ = Watched
            except TypeError:
                continue


_ORIGINALS: dict[tuple[str, str], object] = {}  # C: its own values the test's patches replaced


def apply_patches(patches, is_stdlib) -> None:
    """C: set (or put back) the attributes the test patched in its standard library."""
    if type(patches) is not list:
        raise ValueError("malformed patches")
    for entry in patches:
        if type(entry) is not list or len(entry) != 4 or type(entry[0]) is not str \
                or type(entry[1]) is not str or entry[2] not in ("set", "del", "restore"):
            raise ValueError("malformed patches")
        module_name, name, mode, value = entry
        if not (module_name == "builtins" or is_stdlib(module_name)) \
                or not shared_attribute(module_name, name):
            raise ValueError(f"{module_name}.{name} is not shared")
        module = sys.modules.get(module_name)
        if module is None:  # imported here later (``import`` in a call) gets the patch too
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
        key = (module_name, name)
        if mode == "restore":
            old = _ORIGINALS.pop(key, _GONE)
            if old is not _GONE:
                _put(module, name, old)
            continue
        _ORIGINALS.setdefault(key, module.__dict__.get(name, _GONE))
        _put(module, name, _GONE if mode == "del" else value)


def _put(module, name: str, value) -> None:
    if value is _GONE:
        module.__dict__.pop(name, None)
    else:
        setattr(module, name, value)


class TestRandom:
    """T: the test's ``random`` generator stays the test's own. Every function of its
    ``random`` module that may change the generator (``seed``, ``setstate``, the draws) bumps
    ``version``; the candidate process is told the new version before the next request
    (``give``) and, the first time its code uses ``random`` after that, takes the test's state
    (``CandidateRandom``): ``random.seed(0)`` in a test reaches the candidate's draws, as in
    one process. What the candidate draws or sets never comes back, so it cannot choose the
    test's random inputs (in one process ``random.setstate`` in the candidate's code would
    steer every draw the test makes afterwards): the test's later draws go on from its own
    state, a documented deviation."""

    def __init__(self):
        self.version = self.sent = 0
        _wrap_random(self._wrap, skip=("getstate",))

    def _wrap(self, fn):
        @functools.wraps(fn)
        def counted(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            finally:
                self.version += 1

        return counted

    def give(self) -> int | None:
        """The version to tell the candidate process, when it has changed since (else None)."""
        if self.version == self.sent:
            return None
        self.sent = self.version
        return self.version


def _wrap_random(wrap, skip: tuple[str, ...] = ()) -> None:
    """Replace each function of the ``random`` module that is a method of its one generator
    (``seed``, ``random``, ``randint``...) by ``wrap(function)``, but those in ``skip``."""
    inst = random._inst
    for name, fn in list(vars(random).items()):
        if getattr(fn, "__self__", None) is inst and callable(fn) and name not in skip:
            random.__dict__[name] = wrap(fn)


def test_random_state():
    """T: its generator's state, for the candidate process (the ``randstate`` request)."""
    return random._inst.getstate()


class CandidateRandom:
    """C: before its code uses ``random``, it takes the test's generator state if the test
    changed it since C last took it (``TestRandom``)."""

    def __init__(self, fetch):
        self.fetch = fetch
        self.wanted = self.have = 0
        _wrap_random(self._wrap)

    def _wrap(self, fn):
        @functools.wraps(fn)
        def synced(*args, **kwargs):
            if self.wanted > self.have:
                self.have = self.wanted
                try:
                    random._inst.setstate(self.fetch())
                except (RuntimeError, TypeError, ValueError):
                    pass  # asked outside a call (a thread of its own): its own state serves
            return fn(*args, **kwargs)

        return synced


_CANDIDATE_RANDOM: list[CandidateRandom] = []


def share_random(fetch) -> None:
    """C, at start: its ``random`` functions follow the test's seeding (``CandidateRandom``)."""
    _CANDIDATE_RANDOM.append(CandidateRandom(fetch))


def apply_random(version) -> None:
    """C: the test's generator is now at ``version`` (None: unchanged)."""
    if version is None:
        return
    if type(version) is not int:
        raise ValueError("malformed random version")
    for shared in _CANDIDATE_RANDOM:
        shared.wanted = max(shared.wanted, version)
