"""How a worker is launched: bubblewrap where it works, else a plain limited process.

``bwrap`` level: new user, pid, network, ipc, uts, cgroup and mount namespaces; a read-only
view of only the Python installation and the system libraries; private size-capped tmpfs on
``/tmp`` and ``/dev/shm``; ``/proc`` of the new pid namespace, whose pid 1 is the worker itself
(``--as-pid-1``: undumpable, so no process a candidate sees holds an openable host pipe, and the
worker reads run-queue delays there to tell a starved process from a slow one); a minimal
``/dev``; all capabilities dropped; environment cleared; uid 65534 inside; ``--die-with-parent`` and
``--new-session``. When the host runs as root and the Python installation is readable by
everyone, bubblewrap itself is started as ``nobody`` too, so the jail maps to an unprivileged
host uid; otherwise jailed processes map to the caller's uid (still without capabilities).

``process`` level (no bubblewrap): the same worker with a scrubbed environment, a private
temporary working folder, rlimits and seccomp (Linux x86_64), but the host's file system and
network namespace. Results record which level was in force.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.split import TEST_PRELUDE

log = logging.getLogger("sandbox")
_SOURCES = ("plain.py", "seccomp.py", "wire.py", "testrun.py", "child.py", "worker.py")
SCRATCH_BYTES = 64 << 20  # size of each private tmpfs
NOBODY = 65534
_detected: dict[str, str] = {}


class SandboxError(RuntimeError):
    """The sandbox itself cannot work (no worker starts, bubblewrap required but missing)."""


def worker_source() -> str:
    """The jail worker as one stdlib-only script (its modules concatenated in order)."""
    here = Path(__file__).resolve().parent
    parts = ["from __future__ import annotations\n"]
    for name in _SOURCES:
        text = (here / name).read_text(encoding="utf-8")
        parts.append(re.sub(r"^from __future__ import annotations\n", "", text, flags=re.M))
    # The fork server imports the fixed test prelude once, so whole tests start warm, and
    # installs the pytest shim as ``sys.modules["pytest"]``.
    shim = (here / "pytest_shim.py").read_text(encoding="utf-8")
    return ("\n".join(parts).replace("PRELOAD = ''", f"PRELOAD = {TEST_PRELUDE!r}", 1)
            .replace("PYTEST_SHIM = ''", f"PYTEST_SHIM = {shim!r}", 1))


def python_paths() -> tuple[str, list[str]]:
    """The real interpreter (not a venv shim) and the folders it needs."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if prefix in ("/", "/usr"):  # system Python: /usr/lib is bound anyway
        return exe, [exe]
    return exe, [prefix] + ([exe] if not exe.startswith(prefix + "/") else [])


def _world_readable(path: str) -> bool:
    p = Path(path)
    for part in [p, *p.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH or (part == p and not mode & stat.S_IROTH):
            return False
    return True


@dataclass
class Launch:
    """Everything needed to start one worker."""

    argv: list[str]
    level: str
    env: dict[str, str]
    cwd: str | None = None
    user: int | None = None
    cleanup: list[str] = field(default_factory=list)


def bwrap_launch() -> Launch:
    exe, binds = python_paths()
    bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
    # --as-pid-1: the worker itself is the jail's pid 1. Without it, pid 1 is bubblewrap's
    # init: same uid as jailed code, dumpable, unfiltered and holding the host's pipes, so a
    # candidate could read the next job from /proc/1/fd/0 or write /proc/1/mem.
    argv = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--as-pid-1", "--new-session", "--uid", str(NOBODY), "--gid", str(NOBODY),
            "--cap-drop", "ALL",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
            "--setenv", "HOME", "/tmp", "--setenv", "SANDBOX_SCRATCH", "/tmp:/dev/shm"]
    for lib in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32"):
        if os.path.islink(lib):
            argv += ["--symlink", os.readlink(lib), lib]
        elif os.path.isdir(lib):
            argv += ["--ro-bind", lib, lib]
    for path in binds:
        argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp",
             "--size", str(SCRATCH_BYTES), "--tmpfs", "/dev/shm",
             # bwrap's root and /dev are tmpfs too: make them read-only (devices still work)
             "--remount-ro", "/dev", "--remount-ro", "/",
             "--chdir", "/tmp", "--", exe, "-I", "-S", "-B", "-c", worker_source()]
    user = NOBODY if os.geteuid() == 0 and all(_world_readable(p) for p in binds) else None
    return Launch(argv, "bwrap", {"PATH": "/usr/bin:/bin"}, user=user)


def process_launch() -> Launch:
    exe, _ = python_paths()
    scratch = tempfile.mkdtemp(prefix="sandbox-")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": scratch, "TMPDIR": scratch,
           "SANDBOX_SCRATCH": scratch}
    return Launch([exe, "-I", "-S", "-B", "-c", worker_source()], "process", env, cwd=scratch,
                  cleanup=[scratch])


def _bwrap_problem() -> str | None:
    """Why bubblewrap cannot be used here, or None if a jailed Python runs."""
    if sys.platform != "linux":
        return f"bubblewrap needs Linux (this is {sys.platform})"
    if not (shutil.which("bwrap") or os.path.exists("/usr/bin/bwrap")):
        return "bwrap is not installed"
    probe = bwrap_launch()
    argv = probe.argv[: probe.argv.index("-c") + 1] + ["print(6 * 7)"]
    try:
        out = subprocess.run(argv, capture_output=True, timeout=30, env=probe.env,
                             user=probe.user, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bwrap failed to start: {exc}"
    if out.stdout.strip() != b"42":
        return f"bwrap failed (exit {out.returncode}): {out.stderr.decode(errors='replace')[:300]}"
    return None


def resolve(isolation: str) -> str:
    """``auto``/``bwrap``/``process`` -> the level to use; warns loudly (once) on fallback."""
    if isolation not in ("auto", "bwrap", "process"):
        raise ValueError(f"isolation must be auto, bwrap or process, got {isolation!r}")
    if isolation == "process":
        return "process"
    if "bwrap" not in _detected:
        _detected["bwrap"] = _bwrap_problem() or ""
    problem = _detected["bwrap"]
    if not problem:
        return "bwrap"
    if isolation == "bwrap":
        raise SandboxError(f"isolation='bwrap' was required but {problem}")
    if "warned" not in _detected:
        _detected["warned"] = "1"
        message = (f"SANDBOX RUNS WITHOUT BUBBLEWRAP: {problem}. Untrusted code gets only "
                   "rlimits, seccomp (Linux x86_64) and a scrubbed environment; it can read "
                   "the host's files. Every result records isolation='process'.")
        log.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
    return "process"


def launch(level: str) -> Launch:
    return bwrap_launch() if level == "bwrap" else process_launch()
