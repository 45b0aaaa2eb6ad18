"""The Prefect API a command-line flow run talks to: one temporary server per run, dying with it.

Without ``PREFECT_API_URL`` Prefect starts a temporary ("ephemeral") API server as a child
process the first time anything asks for a client, from whichever thread that is, and waits at
most ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS`` (20 s) for it. Two things go wrong:

- ``kill -9`` of the run leaves that uvicorn child running, orphaned: Prefect stops it from an
  ``atexit`` hook, which a killed process never runs;
- in a fresh ``PREFECT_HOME`` the server first creates and migrates its SQLite database before
  it answers, which on a small or busy machine takes longer than that (docs/training.md,
  *Prefect server*), so the run dies with ``Timed out while attempting to connect to ephemeral
  Prefect API server`` before its first task.

:func:`ensure_prefect_api` replaces that start-up for the command-line entry points
(``python -m flows.train``, ``python -m flows.evaluate``). It starts the same server
Prefect would (``uvicorn prefect.server.api.server:create_app`` in ephemeral mode, the same
database) from the main thread, but

- the child asks the kernel to SIGKILL it when its parent dies (``PR_SET_PDEATHSIG``, set by a
  small boot snippet before it ``exec``s uvicorn, then a check that the parent is still the one
  that started it, which closes the race of a parent killed in between); SIGKILL, because a
  server without its run has nothing left to do and SQLite's commits are atomic. ``prctl`` is
  Linux-only; elsewhere the server is still stopped on every ordinary exit;
- it waits on ``/api/health`` for as long as the child is alive, up to
  ``max(STARTUP_TIMEOUT_S, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS)`` and fails at once,
  with the exit code, if the child exits (a port taken between choosing and binding: another
  port, as Prefect does);
- then it points ``PREFECT_API_URL`` at it (environment and Prefect's global settings), so
  nothing in the process starts a second, unmanaged one;
- what the server prints goes to ``PREFECT_HOME/temporary-server.log``, not to the run's
  console: its services are cancelled mid-query when the run stops it, and SQLAlchemy logs each
  cancelled connection reset as an ERROR with a traceback, under the run's last lines. A server
  that fails to start shows that log's last lines in its error.

A server per run, not one per checkout shared by runs: nothing to discover, lock or clean up,
and a run's server lives exactly as long as the run. A run with ``PREFECT_API_URL`` set (a
``prefect server start`` of its own, a worker's flow run) uses that server and starts nothing.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

STARTUP_TIMEOUT_S = 600
"""The least time the server gets to answer: well above what migrating a fresh database takes on a
small, busy machine."""
PORT_RETRIES = 5
PORT_IN_USE = 3  # uvicorn's exit code when it cannot bind
LOG_NAME = "temporary-server.log"
"""The file in ``PREFECT_HOME`` the temporary servers write their output to."""
LOG_KEEP_BYTES = 8 << 20
"""A log longer than this when a server starts is started afresh."""
LOG_TAIL_LINES = 20
"""How many of the log's last lines a start-up failure shows."""

# Runs in the child before it execs the real command: die with the parent (argv[1], its pid).
_BOOT = """\
import ctypes, os, signal, sys
parent, cmd = int(sys.argv[1]), sys.argv[2:]
if sys.platform.startswith("linux"):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:   # PR_SET_PDEATHSIG
        sys.exit("prctl(PR_SET_PDEATHSIG) failed: errno %d" % ctypes.get_errno())
    if os.getppid() != parent:                              # the parent died before prctl
        sys.exit(0)
os.execv(cmd[0], cmd)                                       # pdeathsig survives exec
"""


def dies_with_this_process(cmd: list[str]) -> list[str]:
    """``cmd`` (absolute executable first) wrapped so the kernel SIGKILLs it when this process
    dies, however it dies. Start it from the main thread: the signal is tied to the thread
    that forks the child."""
    return [sys.executable, "-c", _BOOT, str(os.getpid()), *cmd]


class ServerStartError(RuntimeError):
    """The temporary Prefect server exited, or did not answer in time."""


def free_port() -> int:
    """A loopback TCP port free now (another process may take it before it is bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TemporaryServer:
    """One Prefect API server in a child process that dies with this one."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self.log: Path | None = None
        self._log_start = 0  # where this server's own lines begin in the shared log

    def _open_log(self, home: Path):
        """``PREFECT_HOME``'s server log, opened to append this server's lines (several runs of
        one checkout share the file: each marks where its own lines start)."""
        home.mkdir(parents=True, exist_ok=True)
        self.log = home / LOG_NAME
        if self.log.exists() and self.log.stat().st_size > LOG_KEEP_BYTES:
            self.log.unlink()
        handle = open(self.log, "ab")
        self._log_start = handle.tell()
        handle.write(f"== {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}: server on "
                     f"port {self.port}\n".encode())
        handle.flush()
        return handle

    def log_tail(self) -> str:
        """The last lines this server wrote, or ``""``."""
        if self.log is None or not self.log.exists():
            return ""
        with open(self.log, "rb") as handle:
            handle.seek(self._log_start)
            lines = handle.read().decode(errors="replace").splitlines()[1:]
        return "\n".join(lines[-LOG_TAIL_LINES:])

    def _failure(self, what: str) -> ServerStartError:
        tail = self.log_tail()
        where = f"; its output is in {self.log}" if self.log else ""
        return ServerStartError(f"{what}{where}" + (f":\n{tail}" if tail else ""))

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _command(self) -> tuple[list[str], dict[str, str]]:
        """The server's command line and environment, for ``self.port``."""
        # Prefect deferred in this module: deployments.stack imports it (free_port) and
        # starts its servers without loading Prefect
        import prefect
        from prefect.settings import get_current_settings

        env = {**os.environ,
               **get_current_settings().to_environment_variables(exclude_unset=True),
               # as Prefect's own temporary server: no UI, ephemeral services only
               "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1"}
        env.pop("PREFECT_API_URL", None)
        cmd = [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
               "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
               "--port", str(self.port), "--log-level", "error", "--lifespan", "on"]
        return cmd, env

    def _home(self) -> Path:
        from prefect.settings import get_current_settings  # deferred: see _command

        return Path(get_current_settings().home)

    def _spawn(self) -> subprocess.Popen:
        self.port = free_port()
        cmd, env = self._command()
        # A session of its own: a Ctrl-C in the terminal signals the run's whole process
        # group, and a server that died first left the stopping run retrying its API for
        # minutes (httpx.ConnectError); the run stops it itself (flows.stopping).
        with self._open_log(self._home()) as log:
            return subprocess.Popen(dies_with_this_process(cmd), env=env,
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout_s: float, meanwhile: Callable[[], object] | None = None) -> str:
        """Start the server and wait for ``/api/health``; returns the API URL. ``meanwhile``
        runs once between the spawn and the wait: work the caller needs anyway (heavy
        imports) overlaps the server's own start-up."""
        import httpx  # deferred like Prefect (see _command): it imports rich

        if threading.current_thread() is not threading.main_thread():
            # PR_SET_PDEATHSIG fires when the *thread* that forked the child exits
            raise RuntimeError("start the temporary Prefect server from the main thread")
        started = time.monotonic()
        deadline = started + timeout_s
        retries = PORT_RETRIES
        self.process = self._spawn()
        if meanwhile is not None:
            meanwhile()
        told = False
        with httpx.Client(timeout=10.0) as client:
            while True:
                code = self.process.poll()
                if code == PORT_IN_USE and retries > 0:
                    retries -= 1
                    self.process = self._spawn()
                    continue
                if code is not None:
                    self.process = None
                    raise self._failure(f"the temporary Prefect server exited with code "
                                        f"{code} before it answered")
                try:
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        return self.api_url
                except httpx.TransportError:
                    pass
                now = time.monotonic()
                if now > deadline:
                    self.stop()
                    raise self._failure(
                        f"the temporary Prefect server did not answer on {self.api_url}/health "
                        f"within {timeout_s:.0f} s; set PREFECT_API_URL to a running server")
                if not told and now - started > 10:
                    told = True
                    print(f"waiting for the temporary Prefect server on {self.api_url} (a fresh "
                          "PREFECT_HOME creates its database first) ...", file=sys.stderr,
                          flush=True)
                time.sleep(0.1)

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def startup_timeout_s() -> float:
    """``STARTUP_TIMEOUT_S`` or Prefect's ephemeral start-up timeout, whichever is longer."""
    # deferred: see TemporaryServer._command
    from prefect.settings import get_current_settings

    return float(max(STARTUP_TIMEOUT_S,
                     get_current_settings().server.ephemeral.startup_timeout_seconds))


_TEMPORARY: TemporaryServer | None = None  # this process's own server, once started
UI_PORT = 4200  # where `prefect server start` serves its UI by default
REPO = Path(__file__).resolve().parent.parent


def flow_run_page(flow_run_id: str) -> tuple[str, str | None]:
    """Where to look at a flow run after this process: ``(url, command)``. When the API's
    server outlives us, its page (command None); when the API was this process's temporary
    server (gone with it), the command that serves the same database's UI (``PREFECT_HOME``'s)
    from the repository root, and the page to open then.

    The command is for a shell without the Makefile's environment: no usage telemetry (the
    server's telemetry service otherwise logs an error at every start where it cannot reach
    Prefect), and no prompt (in a terminal, ``prefect server start`` first asks to save the
    server's address in a profile)."""
    from prefect.settings import get_current_settings  # deferred as in TemporaryServer._command

    settings = get_current_settings()
    page = f"/runs/flow-run/{flow_run_id}"
    if _TEMPORARY is None and settings.api.url:
        return (settings.ui_url or settings.api.url.removesuffix("/api")) + page, None
    prefect = Path(sys.executable).parent / "prefect"
    if prefect.is_relative_to(REPO):
        prefect = prefect.relative_to(REPO)
    return (f"http://127.0.0.1:{UI_PORT}{page}",
            f"PREFECT_HOME={settings.home} PREFECT_SERVER_ANALYTICS_ENABLED=false {prefect} "
            "--no-prompt server start")


def ensure_prefect_api(meanwhile: Callable[[], object] | None = None) -> str | None:
    """The Prefect API URL this process talks to from now on: ``PREFECT_API_URL`` (or the
    active profile's) when set; else a temporary server started here, from the main thread,
    which dies with this process (see the module docstring) and is stopped at exit, after
    Prefect's own exit hooks have sent the last logs and events; ``None`` where the profile
    allows no temporary server (Prefect then raises its own error). Idempotent.
    ``meanwhile`` (see :meth:`TemporaryServer.start`) runs in every case."""
    # deferred: see TemporaryServer._command
    import prefect.context
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        if meanwhile is not None:
            meanwhile()
        return settings.api.url or None
    global _TEMPORARY
    server = _TEMPORARY = TemporaryServer()
    url = server.start(startup_timeout_s(), meanwhile)
    atexit.register(server.stop)  # after Prefect's log and event workers drained (LIFO)
    os.environ["PREFECT_API_URL"] = url   # and for any child process of the run
    prefect.context.refresh_global_settings_context()
    return url
