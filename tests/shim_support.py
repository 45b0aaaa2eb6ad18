"""Helpers of the ``test_sandbox_pytest_shim*`` files: sandbox/pytest_shim.py loaded the way the
jail loads it (its source exec'd into a fresh module object), and a body's outcome under the shim
compared with its outcome under real pytest. The ``shim`` fixture itself is in conftest.py."""

from __future__ import annotations

import types
import warnings
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parent.parent / "sandbox" / "pytest_shim.py"


def load_shim() -> types.ModuleType:
    mod = types.ModuleType("pytest")
    exec(compile(SHIM.read_text(), "pytest_shim", "exec"), mod.__dict__)
    return mod


def outcome(body, p) -> tuple[str, str]:
    """What ``body(p)`` did: ("ok", "") or the name and text of what it raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # re-emitted warnings are not the point here
        try:
            body(p)
        except BaseException as exc:  # noqa: BLE001 - pytest's outcomes are BaseExceptions
            return type(exc).__name__, str(exc)
    return "ok", ""


def same_as_pytest(body, shim) -> tuple[str, str]:
    got, want = outcome(body, shim), outcome(body, pytest)
    assert got == want, body.__name__
    return got
