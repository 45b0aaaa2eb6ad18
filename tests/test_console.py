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
