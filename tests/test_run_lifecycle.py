"""A training run's lifecycle: its Prefect server dies with it (even under ``kill -9``) and may
take as long as it needs to start; a config whose updates can never carry signal is refused at
start; the run's summary says how many updates were skipped and why."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from configs import ConfigError, SamplingConfig, TrainConfig, load_config
from configs.schema import check_learnable, learnability

REPO = Path(__file__).resolve().parent.parent
MINIMAL = str(REPO / "configs/minimal.yaml")


# -- processes, from /proc ----------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, str, str] | None:
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
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
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
        st = _stat(pid)
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


# -- the child that dies with its parent --------------------------------------------------------

PARENT = """
import subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from flows.server import dies_with_this_process
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
    procs = {child: _stat(child)[2]}
    parent.kill()
    parent.wait()
    assert wait_gone(procs, 5) == {}


def test_an_unwrapped_child_outlives_its_killed_parent():
    """The control: what Prefect's own temporary server does (the test above can fail)."""
    parent, child = _parent_with_child("plain")
    procs = {child: _stat(child)[2]}
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


def fake_server(*behaviours: tuple[float, str]):
    """A TemporaryServer whose n-th start sleeps, then serves /api/health or exits with a code."""
    from flows.server import TemporaryServer, _free_port, dies_with_this_process

    class Fake(TemporaryServer):
        spawned: list[subprocess.Popen] = []

        def _spawn(self) -> subprocess.Popen:
            delay, then = behaviours[min(len(self.spawned), len(behaviours) - 1)]
            self.port = _free_port()
            proc = subprocess.Popen(dies_with_this_process(
                [sys.executable, "-c", FAKE_SERVER, str(self.port), str(delay), then]))
            self.spawned.append(proc)
            return proc
    return Fake()


def test_a_slow_server_is_waited_for_past_prefects_own_timeout():
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS as TIMEOUT
    from prefect.settings import temporary_settings

    from flows.server import STARTUP_TIMEOUT_S, startup_timeout_s

    server = fake_server((3.0, "serve"))
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


def test_a_server_that_exits_fails_at_once_with_its_exit_code():
    from flows.server import ServerStartError

    t0 = time.monotonic()
    with pytest.raises(ServerStartError, match="exited with code 5"):
        fake_server((0.0, "5")).start(600)
    assert time.monotonic() - t0 < 30


def test_a_taken_port_is_retried_on_another():
    server = fake_server((0.0, "3"), (0.0, "serve"))  # uvicorn exits 3 when it cannot bind
    try:
        server.start(60)
        assert len(server.spawned) == 2
    finally:
        server.stop()


def test_a_server_that_never_answers_is_stopped_at_the_deadline():
    from flows.server import ServerStartError

    server = fake_server((600.0, "serve"))
    with pytest.raises(ServerStartError, match="did not answer"):
        server.start(1)
    proc = server.spawned[0]
    assert proc.poll() is not None


def test_a_configured_api_url_is_used_and_nothing_started():
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.server import ensure_prefect_api

    with temporary_settings({PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        before = descendants(os.getpid())
        assert ensure_prefect_api() == "http://127.0.0.1:9/api"
        assert descendants(os.getpid()).keys() <= before.keys()


# -- configs that cannot learn ------------------------------------------------------------------

def errors_of(*sets: str) -> list[str]:
    return learnability(load_config(MINIMAL, list(sets)))[0]


def warnings_of(*sets: str) -> list[str]:
    return learnability(load_config(MINIMAL, list(sets)))[1]


@pytest.mark.parametrize("path", ["configs/tiny.yaml", "configs/minimal.yaml",
                                  "configs/qwen2.5-coder-1.5b.yaml"])
def test_the_shipped_configs_can_learn(path):
    assert learnability(load_config(REPO / path)) == ([], [])


def test_one_sample_per_problem_with_group_advantages_is_refused_naming_both():
    (error,) = errors_of("sampling.samples_per_problem=1")
    assert error.startswith("sampling.samples_per_problem=1 with ppo.advantage='group':")
    assert "every update would be skipped" in error
    with pytest.raises(ConfigError, match=re.escape(
            "configs/minimal.yaml: sampling.samples_per_problem=1 with ppo.advantage='group'")):
        check_learnable(load_config(MINIMAL, ["sampling.samples_per_problem=1"]), MINIMAL)


def test_one_sample_per_problem_is_fine_with_gae():  # a value head is the baseline
    assert errors_of("sampling.samples_per_problem=1", "ppo.advantage=gae") == []


def test_constant_rewards_of_a_trained_role_are_refused():
    (error,) = errors_of("rewards.generator={pass_rate: 0}")
    assert error.startswith("rewards.generator.pass_rate=0.0: every generator reward")
    (error,) = errors_of("rewards.discriminator={mutation_kill: 1}",
                         "rewards.mutants_per_problem=0")
    assert "rewards.discriminator.mutation_kill with rewards.mutants_per_problem=0" in error
    # a role the schedule never trains may have any rewards
    assert errors_of("rewards.generator={pass_rate: 0}", "schedule.n_generator_steps=0",
                     "schedule.k_alternating=0") == []
    assert errors_of("rewards.discriminator={mutation_kill: 1}", "rewards.mutants_per_problem=0",
                     "schedule.n_discriminator_steps=0", "schedule.k_alternating=1") == []


def test_a_learning_rate_of_zero_is_a_control_and_only_warns():
    assert errors_of("ppo.learning_rate=0") == []
    (warning,) = warnings_of("ppo.learning_rate=0")
    assert warning.startswith("ppo.learning_rate=0.0: a control run")
    assert check_learnable(load_config(MINIMAL, ["ppo.learning_rate=0"])) == [warning]


def test_a_schedule_of_no_steps_is_a_dry_run_and_only_warns():
    sets = ("schedule.n_discriminator_steps=0", "schedule.n_generator_steps=0",
            "schedule.k_alternating=0")
    assert errors_of(*sets) == []
    (warning,) = warnings_of(*sets)
    assert "schedule.k_alternating=0: the schedule plans no step" in warning


def test_inference_configs_are_not_checked():  # one sample per problem is right there
    assert TrainConfig(sampling=SamplingConfig(samples_per_problem=1)).sampling


def test_the_cli_refuses_before_prefect_starts_with_exit_2(capsys, monkeypatch):
    from flows.train import main

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    before = descendants(os.getpid())
    assert main(["--config", MINIMAL, "--set", "sampling.samples_per_problem=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {MINIMAL}: sampling.samples_per_problem=1 with "
                          "ppo.advantage='group'"), err
    assert "Traceback" not in err
    assert "PREFECT_API_URL" not in os.environ                       # no server was started
    assert descendants(os.getpid()).keys() <= before.keys()


def test_the_flow_refuses_too_when_called_without_the_cli():  # a deployment's run
    from flows.train import train

    with pytest.raises(ConfigError, match="sampling.samples_per_problem=1"):
        train.fn(config=MINIMAL, overrides=["sampling.samples_per_problem=1"])


# -- skipped updates in the summary -------------------------------------------------------------

def _update(step, role, n_sequences, n_tokens):
    return {"step": step, "role": role, "n_sequences": n_sequences, "n_tokens": n_tokens}


def _reward(step, problem, masked=False, gen_skipped=False, disc_skipped=False):
    return {"step": step, "problem_id": problem, "masked": masked,
            "generator_group_skipped": gen_skipped, "discriminator_group_skipped": disc_skipped}


def test_skipped_updates_are_counted_by_reason():
    from tasks.reporting import (
        SKIP_MASKED,
        SKIP_NO_SPREAD,
        SKIP_NO_TOKENS,
        SKIP_SINGLETONS,
        skipped_updates,
    )

    updates = [_update(1, "generator", 2, 0), _update(2, "discriminator", 4, 0),
               _update(3, "generator", 0, 0), _update(4, "generator", 4, 0),
               _update(5, "generator", 4, 37)]
    rewards = ([_reward(1, "a", gen_skipped=True), _reward(1, "b", gen_skipped=True)]
               + [_reward(2, p, disc_skipped=True) for p in "aabb"]
               + [_reward(3, p, masked=True) for p in "aabb"]
               + [_reward(4, "a"), _reward(4, "a"), _reward(4, "b"), _reward(4, "b")]
               + [_reward(5, p) for p in "aabb"])
    assert skipped_updates(updates, rewards) == {
        SKIP_SINGLETONS: 1, SKIP_NO_SPREAD: 1, SKIP_MASKED: 1, SKIP_NO_TOKENS: 1}
    # a masked sample leaves its group: one live sample per problem is a group of one
    rewards_4 = [_reward(1, "a"), _reward(1, "a", masked=True), _reward(1, "b"),
                 _reward(1, "b", masked=True)]
    assert skipped_updates([_update(1, "generator", 2, 0)], rewards_4) == {SKIP_SINGLETONS: 1}
    # GAE skips no group: an update without tokens had none to train on
    assert skipped_updates([_update(1, "generator", 2, 0)], rewards_4,
                           group_relative=False) == {SKIP_NO_TOKENS: 1}


def test_finish_run_says_how_many_updates_were_skipped_and_why(capsys, monkeypatch):
    import tasks.runtime as runtime
    from tasks.reporting import SKIP_NO_SPREAD

    class Store:
        run_dir = "runs/run_id=x"

        def read(self, table):
            if table == "updates":
                return pd.DataFrame([_update(1, "generator", 4, 0),
                                     _update(2, "discriminator", 4, 12)])
            return pd.DataFrame([_reward(s, p, gen_skipped=True, disc_skipped=False)
                                 for s in (1, 2) for p in "aabb"])

    monkeypatch.setattr(runtime, "stage_table", lambda ctx: "(table)")
    ctx = SimpleNamespace(run_id="x", store=Store(), cfg=TrainConfig(), mlflow_run_id="m",
                          tracker=SimpleNamespace(end_run=lambda run: None,
                                                  tracking_uri="sqlite:///m.db"))
    summary = runtime.finish_run(ctx)
    assert summary["updates"] == 2 and summary["skipped_updates"] == {SKIP_NO_SPREAD: 1}
    out = capsys.readouterr().out
    assert (f"  updates     : 1 of 2 skipped, no optimizer step (1: {SKIP_NO_SPREAD})\n"
            in out), out

    Store.read = lambda self, table: (pd.DataFrame([_update(1, "generator", 4, 0)])
                                      if table == "updates" else
                                      pd.DataFrame([_reward(1, "a", gen_skipped=True)]))
    runtime.finish_run(ctx)
    out = capsys.readouterr().out
    assert "1 of 1 skipped" in out and "no update carried signal" in out, out


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


def tail(log: Path, chars: int = 5000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"


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
        assert proc.poll() is None, f"the run ended (exit {proc.returncode})\n{tail(log)}"
        assert store.list_parts("executions", 1), f"step 1 never executed\n{tail(log)}"
        seen.update(descendants(proc.pid))
        servers = [cmdline(p) for p in seen if "prefect.server.api.server" in cmdline(p)]
        assert len(servers) == 1, (servers, tail(log))
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
        assert proc.returncode == 0, tail(log)
        assert store.complete_steps() == [1, 2], tail(log)
        print(f"first step complete after {first_step_s:.0f} s, run "
              f"{time.monotonic() - t0:.0f} s")
        assert "Timed out while attempting to connect" not in text
        assert text.count("ppo.learning_rate=0.0: a control run") == 1, tail(log)
        assert re.search(r"  updates     : (2, none skipped|[12] of 2 skipped)", text), \
            tail(log)
        assert len(servers) == 1, servers  # its own, stopped when the run ended
        assert wait_gone(seen) == {}, "the server outlived a run that ended normally"
    finally:
        kill_all(p.pid for p in busy)
        for p in busy:
            p.wait()
        kill_all(alive(seen))
