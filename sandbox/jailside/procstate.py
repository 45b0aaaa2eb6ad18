"""Process state a test and its candidate share in one process, kept shared across two: the
environment (``monkeypatch.setenv``), the working directory (``monkeypatch.chdir``) and the
recursion limit. The test process tracks its own (``Tracker``) and, before a request, tells
the candidate process what changed since it last did (the ``state`` request, applied there by
``apply``).

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import os
import sys

ENV_IGNORED = frozenset({"PYTEST_CURRENT_TEST"})  # pytest's, changed at every test phase


def _cwd() -> str | None:
    try:
        return os.getcwd()
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
    with, as both were forked from the same setup)."""

    def __init__(self):
        self.synced = _shared_state()
        self.raw = None

    def changes(self) -> list | None:
        """``[changed, removed, cwd, limit]`` since C was last told, or None when nothing
        changed (``cwd``/``limit`` None when those did not)."""
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


def apply(changed, removed, cwd, limit) -> None:
    """C: take the test's changes (``ValueError`` for malformed ones)."""
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
