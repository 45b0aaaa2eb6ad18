"""A training run's lifecycle: its Prefect server dies with it (even under ``kill -9``) and may
take as long as it needs to start (configs refused at start and the run summary:
``test_run_checks.py``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from procs import alive, cmdline, descendants, kill_all, log_tail, proc_stat, wait_gone

REPO = Path(__file__).resolve().parent.parent
MINIMAL = str(REPO / "configs/minimal.yaml")


# -- the child that dies with its parent --------------------------------------------------------

PARENT = """
import subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from deployments.server import dies_with_this_process
cmd = ["/bin/sleep", "600"]
child = subprocess.Popen(dies_with_this_process(cmd) if sys.argv[2] == "wrapped" else cmd)
print(child.pid, flush=True)
time.sleep(600)
"""


def _parent_with_child(mode: str) -> tuple[subprocess.Popen, int]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(REPO), mode],
                              stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 30
    while "sleep" not in cmdline(child).split(" ")[0] and time.monotonic() < deadline:
        time.sleep(0.05)  # until the boot snippet has set the signal and exec'd
    assert cmdline(child).startswith("/bin/sleep 600"), cmdline(child)
    return parent, child


def test_a_wrapped_child_dies_when_its_parent_is_killed():
    parent, child = _parent_with_child("wrapped")
    procs = {child: proc_stat(child)[2]}
    parent.kill()
    parent.wait()
    assert wait_gone(procs, 5) == {}


def test_an_unwrapped_child_outlives_its_killed_parent():
    """The control: what Prefect's own temporary server does (the test above can fail)."""
    parent, child = _parent_with_child("plain")
    procs = {child: proc_stat(child)[2]}
    try:
        parent.kill()
        parent.wait()
        time.sleep(1)
        assert alive(procs), "the plain child died too: the test above proves nothing"
    finally:
        kill_all(procs)


# -- waiting for the server ---------------------------------------------------------------------

FAKE_SERVER = """
import http.server, sys, time
port, delay, then = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
print("fake server: stdout line", flush=True)
print("fake server: stderr line", file=sys.stderr, flush=True)
time.sleep(delay)
if then != "serve":
    sys.exit(int(then))
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()
        self.wfile.write(b"true")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def fake_server(home: Path, *behaviours: tuple[float, str]):
    """A TemporaryServer whose n-th start sleeps, then serves /api/health or exits with a code;
    its log in ``home``."""
    from deployments.server import TemporaryServer

    class Fake(TemporaryServer):
        spawned: list[subprocess.Popen] = []

        def _command(self):
            delay, then = behaviours[min(len(self.spawned), len(behaviours) - 1)]
            return ([sys.executable, "-c", FAKE_SERVER, str(self.port), str(delay), then],
                    dict(os.environ))

        def _home(self) -> Path:
            return home

        def _spawn(self) -> subprocess.Popen:
            proc = super()._spawn()
            self.spawned.append(proc)
            return proc
    return Fake()


def test_a_slow_server_is_waited_for_past_prefects_own_timeout(tmp_path):
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS as TIMEOUT
    from prefect.settings import temporary_settings

    from deployments.server import STARTUP_TIMEOUT_S, startup_timeout_s

    server = fake_server(tmp_path, (3.0, "serve"))
    with temporary_settings({TIMEOUT: 1}):  # Prefect alone would give up after 1 s
        assert startup_timeout_s() == STARTUP_TIMEOUT_S
        t0 = time.monotonic()
        try:
            assert server.start(startup_timeout_s()) == server.api_url
            assert time.monotonic() - t0 >= 3.0
        finally:
            server.stop()
    with temporary_settings({TIMEOUT: STARTUP_TIMEOUT_S + 100}):  # a longer one is kept
        assert startup_timeout_s() == STARTUP_TIMEOUT_S + 100


def test_a_server_that_exits_fails_at_once_with_its_exit_code(tmp_path):
    from deployments.server import ServerStartError

    t0 = time.monotonic()
    with pytest.raises(ServerStartError, match="exited with code 5"):
        fake_server(tmp_path, (0.0, "5")).start(600)
    assert time.monotonic() - t0 < 30


def test_a_taken_port_is_retried_on_another(tmp_path):
    # uvicorn exits 3 when it cannot bind
    server = fake_server(tmp_path, (0.0, "3"), (0.0, "serve"))
    try:
        server.start(60)
        assert len(server.spawned) == 2
    finally:
        server.stop()


def test_the_servers_output_goes_to_its_log_and_not_to_the_runs_console(tmp_path, capfd):
    """What the server prints while it runs and as it is stopped (SQLAlchemy's tracebacks of
    the queries a stop cancels) stays off the run's console."""
    server = fake_server(tmp_path, (0.0, "serve"))
    try:
        server.start(60)
    finally:
        server.stop()
    console = capfd.readouterr()
    assert "fake server" not in console.out + console.err
    log = (tmp_path / "temporary-server.log").read_text()
    assert "fake server: stdout line" in log and "fake server: stderr line" in log


def test_a_server_that_fails_to_start_shows_its_logs_last_lines_and_names_the_log(tmp_path):
    from deployments.server import ServerStartError

    earlier = fake_server(tmp_path, (0.0, "serve"))  # an earlier server's lines in the log
    try:
        earlier.start(60)
    finally:
        earlier.stop()
    assert (tmp_path / "temporary-server.log").read_text().count("fake server: stderr line") == 1
    with pytest.raises(ServerStartError) as failed:
        fake_server(tmp_path, (0.0, "5")).start(60)
    message = str(failed.value)
    assert str(tmp_path / "temporary-server.log") in message
    assert message.count("fake server: stderr line") == 1  # its own lines, not the earlier's
    assert "== " not in message  # nor the header that marks where they start


def test_a_server_that_never_answers_is_stopped_at_the_deadline(tmp_path):
    from deployments.server import ServerStartError

    server = fake_server(tmp_path, (600.0, "serve"))
    with pytest.raises(ServerStartError, match="did not answer"):
        server.start(1)
    proc = server.spawned[0]
    assert proc.poll() is not None


def test_a_configured_api_url_is_used_and_nothing_started():
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.server import ensure_prefect_api

    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        before = descendants(os.getpid())
        assert ensure_prefect_api() == "http://127.0.0.1:9/api"
        assert descendants(os.getpid()).keys() <= before.keys()


# -- real runs in subprocesses ------------------------------------------------------------------

def run_cmd(tiny_model_dir: Path, tmp: Path, run_id: str, *extra: str) -> list[str]:
    # Shrunk for wall-clock time only (one training stage, two steps, two problems, two samples,
    # short outputs); everything else is the real pipeline and the real CLI.
    sets = [f"model.generator={tiny_model_dir}", f"artifacts.root={tmp / 'runs'}",
            f"tracking.tracking_uri=sqlite:///{tmp / 'mlflow.db'}", "schedule.stages=[1]",
            "schedule.n_discriminator_steps=1", "schedule.n_generator_steps=1",
            "schedule.k_alternating=0", "sampling.max_new_tokens=12",
            "sampling.samples_per_problem=2", "problems.limit=2", "schedule.problems_per_step=2",
            "rewards.mutants_per_problem=2", *extra]
    cmd = [sys.executable, "-m", "flows.train", "--config", MINIMAL, "--run-id", run_id]
    for item in sets:
        cmd += ["--set", item]
    return cmd


def fresh_env(tmp: Path) -> dict[str, str]:
    """No Prefect server to talk to, a PREFECT_HOME without a database, and Prefect's own
    start-up timeout at its default (the one that killed runs)."""
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect-home"), "PYTHONPATH": str(REPO),
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "20"}
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_PROFILE", None)
    return env


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_killed_run_leaves_no_process_behind(tiny_model_dir, tmp_path):
    """kill -9 of the run alone (not its process group): its server and sandbox workers die
    with it."""
    from artifacts import RunStore

    log = tmp_path / "run.log"
    store = RunStore(str(tmp_path / "runs"), "killed")
    with open(log, "wb") as out:
        proc = subprocess.Popen(run_cmd(tiny_model_dir, tmp_path, "killed"), cwd=tmp_path,
                                env=fresh_env(tmp_path), stdout=out, stderr=subprocess.STDOUT)
    seen: dict[int, str] = {}
    try:  # kill it in step 1, once the sandbox has run tests: the most processes it ever has
        deadline = time.monotonic() + 420
        while proc.poll() is None and time.monotonic() < deadline:
            seen.update(descendants(proc.pid))
            if store.list_parts("executions", 1):
                break
            time.sleep(0.1)
        assert proc.poll() is None, f"the run ended (exit {proc.returncode})\n{log_tail(log)}"
        assert store.list_parts("executions", 1), f"step 1 never executed\n{log_tail(log)}"
        seen.update(descendants(proc.pid))
        servers = [cmdline(p) for p in seen if "prefect.server.api.server" in cmdline(p)]
        assert len(servers) == 1, (servers, log_tail(log))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        left = wait_gone(seen)
        assert left == {}, f"still running after the run was killed: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(alive(seen))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_fresh_prefect_home_under_load_starts_and_finishes(tiny_model_dir, tmp_path):
    """Two busy loops on the cores, a PREFECT_HOME without a database: the server takes
    longer than Prefect's own 20 s to answer here, and the run still trains. It is a
    learning-rate-0 control, so it also shows the warning once and the summary's line."""
    from artifacts import RunStore

    log = tmp_path / "run.log"
    store = RunStore(str(tmp_path / "runs"), "loaded")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    seen: dict[int, str] = {}
    try:
        t0 = time.monotonic()
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                run_cmd(tiny_model_dir, tmp_path, "loaded", "ppo.learning_rate=0"),
                cwd=tmp_path, env=fresh_env(tmp_path), stdout=out, stderr=subprocess.STDOUT)
        first_step_s = None
        servers = set()
        while proc.poll() is None and time.monotonic() - t0 < 540:
            seen.update(descendants(proc.pid))
            servers |= {p for p in seen if "prefect.server.api.server" in cmdline(p)}
            if first_step_s is None and store.is_complete(1):
                first_step_s = time.monotonic() - t0
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        text = log.read_text(errors="replace")
        assert proc.returncode == 0, log_tail(log)
        assert store.complete_steps() == [1, 2], log_tail(log)
        print(f"first step complete after {first_step_s:.0f} s, run "
              f"{time.monotonic() - t0:.0f} s")
        assert "Timed out while attempting to connect" not in text
        assert text.count("ppo.learning_rate=0.0: a control run") == 1, log_tail(log)
        assert re.search(r"  updates     : (2, none skipped|[12] of 2 skipped)", text), \
            log_tail(log)
        assert len(servers) == 1, servers  # its own, stopped when the run ended
        assert wait_gone(seen) == {}, "the server outlived a run that ended normally"
    finally:
        kill_all(p.pid for p in busy)
        for p in busy:
            p.wait()
        kill_all(alive(seen))
