"""What the entry points keep off the console."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
        line = server.flow_run_page("1234-abcd")
        assert line.startswith("PREFECT_HOME=/srv/home/.prefect ")
        assert f"{Path(sys.executable).parent / 'prefect'} server start" in line
        assert line.endswith(f"http://127.0.0.1:{server.UI_PORT}/runs/flow-run/1234-abcd)")
        monkeypatch.setattr(server, "_TEMPORARY", None)
        with temporary_settings(updates={PREFECT_API_URL: "http://prefect.example:4200/api"}):
            assert server.flow_run_page("1234-abcd") == \
                "http://prefect.example:4200/runs/flow-run/1234-abcd"


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
