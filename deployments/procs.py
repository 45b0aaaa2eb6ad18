"""The stack's processes: each service runs in a session of its own (its pid is the session
id), so stopping it reaches everything it started, however deep; and the waits around
starting one (its log's tail in every error)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

START_TIMEOUT_S = 300.0  # room for a fresh Prefect database's migration on a small, busy machine
STOP_GRACE_S = 20.0


class StackError(RuntimeError):
    """A service of the stack could not be started, reached or stopped."""


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def session_members(sid: int) -> list[int]:
    """Every live process of session ``sid`` (what a service started, however deep)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            out.append(int(entry))
    return out


def spawn(cmd: list[str], log: Path, env: dict[str, str], *, user: int | None = None,
          group: int | None = None) -> subprocess.Popen:
    """``cmd`` in a session of its own (its pid is the session id), output in ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                cwd=log.parent, user=user, group=group,
                                extra_groups=[] if user is not None else None)


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _wait_empty(sid: int, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def stop_session(sid: int, sig: int = signal.SIGTERM, grace_s: float = STOP_GRACE_S) -> list[int]:
    """Stop session ``sid`` (a service and what it started): ``sig`` to its leader, which
    shuts its children down in order; after ``grace_s``, ``sig`` to every member left, then
    SIGKILL. Returns the pids that were still there at the end (none, normally)."""
    _signal_all([sid], sig)
    if not _wait_empty(sid, grace_s):
        return []
    _signal_all(session_members(sid), sig)
    if not _wait_empty(sid, 5):
        return []
    _signal_all(session_members(sid), signal.SIGKILL)
    return _wait_empty(sid, 5)


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def wait_until(check, proc: subprocess.Popen, what: str, log: Path,
               timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StackError(f"{what} exited with code {proc.returncode}; its log "
                             f"({log}) ends:\n{tail(log)}")
        if check():
            return
        time.sleep(0.3)
    raise StackError(f"{what} did not answer within {timeout_s:.0f} s; its log ({log}) ends:\n"
                     f"{tail(log)}")


def tail(log: Path, chars: int = 2000) -> str:
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"
