"""Long-running subprocesses of the slow tests (flows, ``prefect server``, workers): each in its
own session with its output in a log file, killed as a group, its log's tail quoted in
failure messages; and the processes a test left behind, read from /proc."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path


def start(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen:
    """``cmd`` with stdout and stderr in ``log``, in its own session: killing the group takes
    what it starts too (a temporary Prefect server, a flow run's process)."""
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def kill_group(proc: subprocess.Popen, term_grace_s: float | None = None) -> None:
    """Kill ``proc``'s session if ``proc`` still runs: SIGKILL at once or, with
    ``term_grace_s``, SIGTERM first and SIGKILL only if it is still running that much later."""
    if proc.poll() is not None:
        return
    if term_grace_s is not None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=term_grace_s)
            return
        except subprocess.TimeoutExpired:
            pass
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def log_tail(log: Path, chars: int = 6000) -> str:
    text = log.read_text(errors="replace") if log.exists() else "(no log written)"
    return f"--- {log.name} (last {chars} chars) ---\n{text[-chars:]}"


def proc_stat(pid: int) -> tuple[int, str, str] | None:
    """``(ppid, state, start time)`` of ``pid``, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0], fields[19]


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid`` -> its start time (to tell a reused pid from the same one)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := proc_stat(int(entry))) is not None:
            table[int(entry)] = st
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, _state, start) in table.items():
            if ppid == parent and child not in found:
                found[child] = start
                frontier.append(child)
    return found


def alive(procs: dict[int, str]) -> dict[int, str]:
    """Those of ``procs`` still running (a zombie has exited: only its entry is left)."""
    out = {}
    for pid, start in procs.items():
        st = proc_stat(pid)
        if st is not None and st[2] == start and st[1] != "Z":
            out[pid] = cmdline(pid)
    return out


def wait_gone(procs: dict[int, str], timeout_s: float = 15.0) -> dict[int, str]:
    deadline = time.monotonic() + timeout_s
    while (left := alive(procs)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


def kill_all(procs) -> None:
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def serve_and_poll(command: str, cwd: Path, env: dict[str, str], port: int) -> str:
    """Start a server command, wait for HTTP 200 on ``port`` (up to 120 s), stop it; what was
    wrong, or "". An MLflow server that started its job queue is wrong too: the queue's folder
    in ``/dev/shm`` outlives the server (it is removed here, after the check)."""
    proc = subprocess.Popen(["bash", "-c", command], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        problem = f"no HTTP 200 on port {port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                    if r.status == 200:
                        problem = ""
                        break
            except OSError:
                time.sleep(0.5)
    finally:
        stores = job_queue_folders(proc.pid)  # read while the server's processes are alive
        exit_code = proc.poll()
        kill_group(proc, term_grace_s=20)
        for store in stores:
            shutil.rmtree(store, ignore_errors=True)
    if problem:
        return f"{problem} (exit code {exit_code})"
    if stores:
        return f"started MLflow's job queue, whose folder outlives it: {sorted(stores)}"
    return ""


def job_queue_folders(pid: int) -> set[str]:
    """The job-queue folders (``_MLFLOW_HUEY_STORAGE_PATH``) of an MLflow server's processes
    under ``pid``: with job execution on (MLflow's default) the server makes one in
    ``/dev/shm`` at every start and never removes it."""
    import psutil

    stores = set()
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return stores
    for child in children:
        try:
            store = child.environ().get("_MLFLOW_HUEY_STORAGE_PATH")
        except psutil.Error:
            continue
        if store:
            stores.add(store)
    return stores
