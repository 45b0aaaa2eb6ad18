"""How a worker is launched: bubblewrap where it works, else a plain limited process.

``bwrap`` level: new user, pid, network, ipc, uts, cgroup and mount namespaces; a read-only
view of only the Python installation, the system libraries and the *judge site*
(``/judge/site``: the sandbox's jail-side modules and pytest with its dependencies, nothing
else of the project's environment) and the placeholder test files (``/judge/tests``); private
size-capped tmpfs on ``/tmp`` and ``/dev/shm``; ``/proc`` of the new pid namespace, whose pid 1
is the worker itself (``--as-pid-1``: undumpable, so no process a candidate sees holds an
openable host pipe); a minimal ``/dev``; environment cleared; uid 65534 inside;
``--die-with-parent`` and ``--new-session``. Every capability is dropped but ``CAP_SYS_ADMIN``
*inside the jail's own user namespace*, which the fork servers keep only to give each child a
pid namespace of its own (children drop it before anything else; the worker drops it once its
fork servers run). When the host runs as root and the Python installation is readable by
everyone, bubblewrap itself is started as ``nobody`` too, so the jail maps to an unprivileged
host uid; otherwise jailed processes map to the caller's uid (still without capabilities).

``process`` level (no bubblewrap): the same worker with a scrubbed environment, a private
temporary working folder, rlimits and seccomp (Linux x86_64), but the host's file system and
network namespace. Results record which level was in force.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.jailside.layout import test_path
from tempdirs import owned_tempdir

log = logging.getLogger("sandbox")
JUDGE_PACKAGES = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py")
ZONEINFO = "/usr/share/zoneinfo"  # the system's time-zone database, read-only in the jail
MAX_TESTS = 4096  # test modules per job (one placeholder file each)
SCRATCH_BYTES = 64 << 20  # size of each private tmpfs
JAIL_SITE, JAIL_TESTS = "/judge/site", "/judge/tests"
NOBODY = 65534
# glibc gives each thread that allocates a malloc arena of its own, up to 8 per core, each
# reserving 64 MB of address space: under the jail's RLIMIT_AS (512 MB by default) a process
# could start only about 13 threads (a ThreadPoolExecutor(32) of correct code failed). Two
# arenas cost no address space per thread; then a thread costs its stack (8 MB): ~54 threads.
MALLOC_ARENA_MAX = "2"
_detected: dict[str, str] = {}


class SandboxError(RuntimeError):
    """The sandbox itself cannot work (no worker starts, bubblewrap required but missing)."""


def _judge_sources() -> dict[str, str]:
    """Name -> host path of every package the jail's test process imports."""
    here = Path(__file__).resolve().parent
    found = {"jailside": str(here / "jailside")}
    for name in JUDGE_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise SandboxError(f"the sandbox needs {name!r} (pytest and its dependencies) "
                               "installed beside it")
        origin = Path(spec.origin)
        found[name] = str(origin.parent if origin.name == "__init__.py" else origin)
    return found


JUDGE_PREFIX = "sandbox-judge-"


def judge_files() -> tuple[dict[str, str], str]:
    """The judge site's packages and the folder of placeholder test files (empty, read-only
    to jailed code), made once per process."""
    if "tests" not in _detected:
        # pid-named: a worker that ends without atexit (os._exit, a kill) leaves it behind,
        # and the next process to make one removes it
        folder = str(owned_tempdir(JUDGE_PREFIX))
        tests = os.path.join(folder, "tests")
        os.mkdir(tests)
        for i in range(MAX_TESTS):
            path = os.path.join(tests, test_path(i))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "wb").close()
        os.chmod(folder, 0o755)
        _detected["tests"] = tests
        _detected["folder"] = folder
        atexit.register(shutil.rmtree, folder, True)
    return _judge_sources(), _detected["tests"]


def _command(site: str, tests: str) -> str:
    return (f"import sys; sys.path.insert(0, {site!r}); "
            f"from jailside.worker import main; main({site!r}, {tests!r})")


def python_paths() -> tuple[str, list[str]]:
    """The real interpreter (not a venv shim) and the folders it needs."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if prefix in ("/", "/usr"):  # system Python: /usr/lib is bound anyway
        return exe, [exe]
    return exe, [prefix] + ([exe] if not exe.startswith(prefix + "/") else [])


def _world_readable(path: str) -> bool:
    """Anyone may read ``path``: every folder above it searchable by others, and ``path``
    itself readable by others (and searchable, if it is a folder; a file such as the judge's
    ``py.py`` needs no execute bit)."""
    p = Path(path)
    for part in [p, *p.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        needs = stat.S_IXOTH if part != p else stat.S_IROTH | (
            stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
        if mode & needs != needs:
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
            "--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN",
            "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
            "--setenv", "HOME", "/tmp", "--setenv", "SANDBOX_SCRATCH", "/tmp:/dev/shm",
            "--setenv", "MALLOC_ARENA_MAX", MALLOC_ARENA_MAX]
    for lib in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32"):
        if os.path.islink(lib):
            argv += ["--symlink", os.readlink(lib), lib]
        elif os.path.isdir(lib):
            argv += ["--ro-bind", lib, lib]
    for path in binds:
        argv += ["--ro-bind", path, path]
    if os.path.isdir(ZONEINFO):  # zoneinfo.ZoneInfo("Europe/Paris") works as on the host
        argv += ["--ro-bind", ZONEINFO, ZONEINFO]
    packages, tests = judge_files()
    for name, path in packages.items():
        target = f"{JAIL_SITE}/{os.path.basename(path)}" if name != "jailside" \
            else f"{JAIL_SITE}/jailside"
        argv += ["--ro-bind", path, target]
    argv += ["--ro-bind", tests, JAIL_TESTS,
             "--proc", "/proc", "--dev", "/dev",
             "--size", str(SCRATCH_BYTES), "--tmpfs", "/tmp",
             "--size", str(SCRATCH_BYTES), "--tmpfs", "/dev/shm",
             # bwrap's root and /dev are tmpfs too: make them read-only (devices still work)
             "--remount-ro", "/dev", "--remount-ro", "/",
             "--chdir", "/tmp", "--", exe, "-I", "-S", "-B", "-c",
             _command(JAIL_SITE, JAIL_TESTS)]
    readable = [*binds, *packages.values(), tests]
    user = NOBODY if os.geteuid() == 0 and all(_world_readable(p) for p in readable) else None
    return Launch(argv, "bwrap", {"PATH": "/usr/bin:/bin"}, user=user)


def process_launch() -> Launch:
    exe, _ = python_paths()
    scratch = tempfile.mkdtemp(prefix="sandbox-")
    packages, tests = judge_files()
    site = os.path.join(os.path.dirname(tests), "site")
    if not os.path.isdir(site):  # the same layout as the jail's /judge/site, by symlinks
        os.mkdir(site)
        for name, path in packages.items():
            os.symlink(path, os.path.join(site, os.path.basename(path) if name != "jailside"
                                          else "jailside"))
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": scratch, "TMPDIR": scratch,
           "SANDBOX_SCRATCH": scratch, "MALLOC_ARENA_MAX": MALLOC_ARENA_MAX}
    return Launch([exe, "-I", "-S", "-B", "-c", _command(site, tests)], "process", env,
                  cwd=scratch, cleanup=[scratch])


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
