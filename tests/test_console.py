"""What the entry points keep off the console."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PARSE = "import ast; ast.parse('x = 1if 2 else 3'); compile('y = 1if 1 else 2', '<test 3>', 'exec')"


def _stderr(code: str) -> str:
    return subprocess.run([sys.executable, "-W", "default", "-c", code], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True).stderr


def test_generated_codes_syntax_warnings_stay_off_the_console():
    assert "SyntaxWarning" in _stderr(PARSE)  # the control: Python does warn
    assert _stderr("import flows; " + PARSE) == ""
    # the project's own files still warn
    assert "SyntaxWarning" in _stderr("import flows, warnings; compile('z = 1if 1 else 2', "
                                      "'pipeline/x.py', 'exec')")


def test_the_summary_says_how_to_browse_a_flow_run_after_its_server_is_gone(monkeypatch):
    """A run's temporary Prefect server dies with it, so its live link is dead afterwards: the
    summary names the command that serves the same database's UI and the page to open; a
    server that outlives the run is linked directly."""
    from prefect.settings import PREFECT_API_URL, PREFECT_HOME, temporary_settings

    import deployments.server as server

    with temporary_settings(updates={PREFECT_HOME: "/srv/home/.prefect"}):
        monkeypatch.setattr(server, "_TEMPORARY", server.TemporaryServer())
        url, command = server.flow_run_page("1234-abcd")
        assert command.startswith("PREFECT_HOME=/srv/home/.prefect ")
        prefect = Path(sys.executable).parent / "prefect"
        assert f" {prefect.relative_to(ROOT) if prefect.is_relative_to(ROOT) else prefect} " \
               "--no-prompt server start" in f" {command}"
        assert url == f"http://127.0.0.1:{server.UI_PORT}/runs/flow-run/1234-abcd"
        monkeypatch.setattr(server, "_TEMPORARY", None)
        with temporary_settings(updates={PREFECT_API_URL: "http://prefect.example:4200/api"}):
            assert server.flow_run_page("1234-abcd") == \
                ("http://prefect.example:4200/runs/flow-run/1234-abcd", None)


@pytest.mark.slow
def test_the_printed_prefect_command_serves_its_ui_quietly_in_a_fresh_shell(tmp_path,
                                                                            monkeypatch):
    """The summary's ``prefect server start`` command, as printed, in a shell with no venv
    activated and none of the Makefile's variables: it serves the UI with its telemetry off
    (on by default, its service logs an error at every start where it cannot reach Prefect)
    and writes nothing to the user's home."""
    import json
    import time
    import urllib.request

    from prefect.settings import PREFECT_HOME, temporary_settings
    from procs import kill_group, log_tail, start

    import deployments.server as server

    monkeypatch.setattr(server, "_TEMPORARY", server.TemporaryServer())
    with temporary_settings(updates={PREFECT_HOME: str(tmp_path / "prefect")}):
        _, command = server.flow_run_page("x")
    home, log, port = tmp_path / "home", tmp_path / "server.log", server.free_port()
    home.mkdir()
    proc = start(["bash", "-c", f"{command} --port {port}"],
                 {"PATH": "/usr/bin:/bin", "HOME": str(home)}, ROOT, log)
    try:
        deadline, settings = time.monotonic() + 300, None
        while settings is None and time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/admin/settings",
                                            timeout=5) as response:
                    settings = json.load(response)
            except OSError:
                time.sleep(0.5)
        assert settings is not None, log_tail(log)
        page = urllib.request.Request(f"http://127.0.0.1:{port}/runs/flow-run/x",
                                      headers={"Accept": "text/html"})  # as a browser asks
        with urllib.request.urlopen(page, timeout=30) as response:
            assert b"<html" in response.read()  # the UI, which then shows the flow run
    finally:
        kill_group(proc, term_grace_s=20)
    assert settings["server"]["analytics_enabled"] is False, command
    assert "telemetry" not in log.read_text().lower(), log_tail(log)
    assert [p.relative_to(home) for p in home.rglob("*")] == [], command


def test_weight_loading_and_shard_writing_bars_stay_off_the_console(tiny_model_dir, tmp_path):
    """transformers draws a bar per weight load and shard write; the entry points turn them
    off before transformers is imported (a user's own setting of the variable wins)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    load = ("from transformers import AutoModelForCausalLM; "
            f"AutoModelForCausalLM.from_pretrained({str(tiny_model_dir)!r})"
            f".save_pretrained({str(tmp_path)!r})")

    def stderr(code: str) -> str:
        return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300, check=True).stderr

    control = stderr(load)
    assert "Loading weights" in control and "Writing model shards" in control
    quiet = stderr("import flows; " + load)
    assert "Loading weights" not in quiet and "Writing model shards" not in quiet


# --- progress with an ETA, short held-out lines, no empty or overlong console lines ---------

def test_the_eta_is_the_units_left_at_the_mean_pace_of_those_done():
    from pipeline.progress import eta, progress_line

    assert eta(30.0, 3, 7) == "ETA 1m10s"
    assert eta(30.0, 0, 7) == "" and eta(30.0, 3, 0) == ""  # nothing done yet, nothing left
    assert progress_line("evaluate", 3, 10, "problems", 30.0).endswith(", ETA 1m10s")


def test_the_bar_counts_the_time_remaining_down_between_updates():
    import time
    from types import SimpleNamespace

    from pipeline.progress import _time_column

    column = _time_column()
    task = SimpleNamespace(elapsed=63.0, remaining=3.0,
                           fields={"eta_s": 70.0, "eta_at": time.monotonic() - 10.0})
    assert str(column.render(task)) == "1m03s elapsed, ETA 1m00s"
    task.fields["eta_s"] = None  # no unit done yet
    assert str(column.render(task)) == "1m03s elapsed"


def _progress(monkeypatch, total: int, done: int, steps_s: list[float]) -> list[str]:
    """The console lines of a piped training Progress whose steps take ``steps_s``."""
    import io
    import sys
    from types import SimpleNamespace

    import tasks.progress as progress
    from pipeline.schedule import PlannedStep

    now = [100.0]
    monkeypatch.setattr(progress, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(progress, "create_progress_artifact", lambda *a, **k: None)
    monkeypatch.setattr(progress, "update_progress_artifact", lambda *a, **k: None)
    monkeypatch.setattr(progress, "get_run_logger",
                        lambda: SimpleNamespace(info=lambda *a, **k: None))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with progress.Progress(SimpleNamespace(run_id="r"), total=total, done=done,
                           interactive=False) as p:
        for i, seconds in enumerate(steps_s):
            now[0] += seconds
            p.advance(PlannedStep(done + i + 1, 1, "generator", "generator"), {})
    return out.getvalue().splitlines()


def test_each_step_line_ends_with_the_eta_of_the_steps_done_in_this_process(monkeypatch):
    """A run resumed after 4 of 10 steps: the ETA comes from this process's steps only."""
    lines = _progress(monkeypatch, total=10, done=4, steps_s=[10.0, 20.0, 30.0])
    assert lines[0].startswith("step 5/10 ") and lines[0].endswith("| 10.0 s | ETA 50s")
    assert lines[1].endswith("| 20.0 s | ETA 1m00s")  # mean 15 s x 4 left
    assert lines[2].endswith("| 30.0 s | ETA 1m00s")  # mean 20 s x 3 left
    last = _progress(monkeypatch, total=2, done=0, steps_s=[5.0, 5.0])[-1]
    assert last.endswith("| 5.0 s")  # nothing left: no ETA


def test_a_held_out_line_is_short_and_leads_with_pass_at_1():
    from configs.names import STAGES
    from tasks.heldout import heldout_line

    metrics = {"pass_at_1": 0.4167, "edge_pass_rate": 0.4167, "test_validity": 0.786,
               "mutation_kill_rate": 0.569, "bugs_caught": 0.083, "wrong_caught": 0.25,
               **{f"caught_s{k}": 0.05 for k in STAGES}, **{f"new_s{k}": 0.67 for k in STAGES},
               "stage_new_tests": 0.05, "late_catch": 0.0, "problems": 12.0, "samples": 1.0}
    line = heldout_line("stage 5", metrics)
    assert line == ("held-out stage 5: pass@1 0.417, edge 0.417, valid 0.786, mutants 0.569, "
                    "bugs 0.083, wrong 0.250")
    assert len(line) < 120


def test_a_blank_log_message_stays_off_the_console():
    import logging

    from tasks.progress import _ConsoleFilter

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("prefect.flow_runs", logging.INFO, __file__, 1, msg, None, None)

    assert not _ConsoleFilter().filter(record(""))
    assert not _ConsoleFilter().filter(record(" \n"))
    assert _ConsoleFilter().filter(record("Training finished."))


def test_mlflows_database_creation_notes_stay_off_the_console(tmp_path):
    create = ("import mlflow; from mlflow import MlflowClient; {quiet}"
              "MlflowClient('sqlite:///{db}').search_experiments()")
    control = _stderr(create.format(quiet="", db=tmp_path / "a.db"))
    assert "Creating initial MLflow database tables" in control
    quiet = _stderr(create.format(quiet="import tasks.progress as p; p.quiet_console(); ",
                                  db=tmp_path / "b.db"))
    assert "MLflow database" not in quiet and "alembic" not in quiet, quiet


def _in_terminal(cmd: list[str], env: dict[str, str], cwd: Path, timeout_s: float,
                 columns: int = 300) -> tuple[int | None, str]:
    """Run ``cmd`` with a pseudo-terminal of ``columns`` as its stdin, stdout and stderr, as a
    user's terminal; returns its exit code (None: killed at ``timeout_s``) and what it wrote."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    import time

    from procs import kill_group

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(cmd, cwd=cwd, env={**env, "TERM": "xterm-256color"}, stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out, deadline = bytearray(), time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        kill_group(proc)
        os.close(master)
    return proc.poll(), out.decode("utf-8", errors="replace")


def _screen_lines(raw: str) -> list[str]:
    """The lines ``raw`` leaves on a terminal, roughly: per line, what follows the last carriage
    return (a redrawn bar), without colour and cursor codes."""
    import re

    csi = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
    return [csi.sub("", line.rstrip("\r").split("\r")[-1]) for line in raw.split("\n")]


BAR = "━"  # rich's bar glyph: a line with it is a bar being drawn (and redrawn)


def test_log_lines_print_above_a_live_bar_not_into_its_line(tmp_path):
    """Prefect's console handler keeps the stderr it was made with; while a bar is live its
    lines go through the bar's console, above the bar, as printed lines do, and a line wider
    than the terminal stays one line (the terminal wraps it, as without a bar). The bar itself
    fits an 80-column terminal."""
    import os

    long = "a log line while the bar shows, " + "wider than the terminal " * 4
    code = ("import logging, sys, time\n"
            "from prefect.logging.handlers import PrefectConsoleHandler\n"
            "from pipeline.progress import LiveBar\n"
            "root = logging.getLogger(); root.handlers = [PrefectConsoleHandler(sys.stderr)]\n"
            "bar = LiveBar('warm start discriminator', 400, 'steps'); assert bar.start()\n"
            "bar.update(12, 599.0, 'loss 10.759'); time.sleep(0.3)\n"
            f"root.warning({long!r}); time.sleep(0.3)\n"
            "print('a printed line'); time.sleep(0.3)\n"
            "bar.stop(); root.warning('a log line after it')\n")
    rc, raw = _in_terminal([sys.executable, "-c", code],
                           {**os.environ, "PYTHONPATH": str(ROOT)}, ROOT, timeout_s=120,
                           columns=80)
    assert rc == 0, raw
    lines = [line for line in _screen_lines(raw) if line.strip()]
    assert long in lines, lines
    assert "a printed line" in lines and "a log line after it" in lines, lines
    frames = _screen_lines(raw.replace("\r", "\n"))  # every state the bar was drawn in
    assert any(BAR in line and "ETA 9m" in line and "loss 10.759" in line
               for line in frames), frames  # the time remaining, the detail, on one line
    shown = {line.strip() for line in lines}
    assert all(line.strip() in shown for line in frames if line.strip() and BAR not in line), \
        frames  # no second line of a bar


@pytest.mark.slow
@pytest.mark.timeout(720)
def test_a_short_training_runs_console_in_a_terminal(tiny_model_dir, tmp_path):
    """What a user's terminal shows of a short run with a warm start, held-out evaluations,
    registered models and a new MLflow database: no blank ``Flow run '...' -`` line, no log
    line written into the bar's line, no database or tqdm noise, short held-out lines, step
    lines and the bar with an ETA, and no line over 200 characters while it trains (the
    end-of-run tables are the summary's, checked for blank lines only)."""
    import os
    import re

    from test_train_flow import overrides

    sets = overrides(tiny_model_dir, tmp_path) + [
        "problems.source=family:piecewise:train", "warm_start.enabled=true",
        "warm_start.steps=2", "warm_start.batch_size=2",
        "warm_start.source=family:piecewise:warmstart", "warm_start.limit=3",
        "evaluation.source=family:piecewise:heldout", "evaluation.limit=2"]
    cmd = [sys.executable, "-m", "flows.train", "--config", str(ROOT / "configs/minimal.yaml"),
           "--run-id", "console-test"]
    for item in sets:
        cmd += ["--set", item]
    quiet = ("HF_HUB_DISABLE_PROGRESS_BARS", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
    env = {k: v for k, v in os.environ.items() if k not in quiet} | {
        "PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(ROOT)}
    rc, raw = _in_terminal(cmd, env, tmp_path, timeout_s=660)
    lines = _screen_lines(raw)
    shown = "\n".join(lines)[-8000:]
    assert rc == 0, shown
    assert "Traceback" not in raw, shown
    assert not [s for s in lines if re.search(r"(Flow|Task) run '[^']*' -\s*$", s)], shown
    assert not [s for s in lines if BAR in s and re.search(r"\| (INFO|WARNING) ", s)], shown
    frames = _screen_lines(raw.replace("\r", "\n"))  # every state the bar was drawn in
    assert any(BAR in s and "ETA" in s for s in frames), shown  # the bar's time remaining
    for noise in ("MLflow database", "alembic", "%|", "it/s]"):
        assert noise not in raw, (noise, shown)

    end = next(i for i, s in enumerate(lines) if "mean over each training stage" in s)
    training = [s for s in lines[:end] if BAR not in s]
    assert not [s for s in training if len(s) > 200], shown
    steps = [s for s in training if s.startswith("step ")]
    assert len(steps) == 4, shown
    assert all(re.search(r"\| [0-9.]+ s \| ETA \S+$", s) for s in steps[:-1]), steps
    assert steps[-1].endswith(" s"), steps
    heldout = [s.split(" - ", 1)[1] for s in training if " - held-out " in s]
    assert [h.split(":")[0] for h in heldout] == ["held-out before", "held-out stage 1",
                                                  "held-out stage 2"], shown
    assert all(h.startswith(h.split(":")[0] + ": pass@1 ") and len(h) < 120 for h in heldout)


def test_an_evaluation_leaves_its_summary_to_main_to_print_once(prefect_harness, monkeypatch,
                                                                 capsys):
    """The evaluate flow logs its summary to the flow run's logs only: ``main`` prints it, so
    the console shows it once (under ``log_prints`` a print in the flow was a second copy)."""
    import logging

    import flows.evaluate as evaluate
    from tasks.progress import _ConsoleFilter

    monkeypatch.setattr(evaluate, "evaluate_model",
                        lambda *a: ([], {"eval/pass_at_1": 0.5}, "weights: base"))
    monkeypatch.setattr(evaluate, "record_evaluation",
                        lambda *a: {"run_store": "S", "mlflow_run_id": "M",
                                    "mlflow_tracking_uri": "U"})
    console: list[str] = []

    class Console(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            console.append(record.getMessage())

    handler = Console()
    handler.addFilter(_ConsoleFilter())
    logging.getLogger().addHandler(handler)
    try:
        out = evaluate.evaluate(config=str(ROOT / "configs/tiny.yaml"), problems="demo",
                                limit=1, run_id="console-eval")
    finally:
        logging.getLogger().removeHandler(handler)
    first = out["summary"].splitlines()[0]
    assert first.startswith("Evaluation console-eval: ")
    assert not [m for m in console if first in m], console
    assert first not in capsys.readouterr().out
