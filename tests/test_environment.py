"""Every command runs under the same environment, through make or typed from the README."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from configs import environment

REPO = Path(__file__).resolve().parent.parent


def makefile_exports() -> dict[str, str]:
    """The variables the Makefile exports, with their values as make expands them here."""
    text = (REPO / "Makefile").read_text()
    names = re.findall(r"^export (\w+) \??:?= ", text, re.M)
    assert names, "the Makefile exports no variable"
    script = "".join(f"\t@echo {n}=$${n}\n" for n in names)
    out = subprocess.run(["make", "-s", "-f", "-", "show"], input=text + "\nshow:\n" + script,
                         capture_output=True, text=True, cwd=REPO, check=True,
                         env={k: v for k, v in os.environ.items() if k not in names})
    return dict(line.split("=", 1) for line in out.stdout.splitlines())


def test_the_makefile_exports_exactly_the_entry_points_defaults_for_what_both_set():
    exported = makefile_exports()
    defaults = environment.defaults()
    assert set(exported) <= set(defaults), "the Makefile exports a variable no entry point sets"
    assert {name: defaults[name] for name in exported} == exported


def test_a_python_entry_point_sets_what_the_user_has_not_and_keeps_what_they_set(tmp_path):
    probe = ("import os, flows, json; print(json.dumps({k: os.environ.get(k) for k in "
             f"{sorted(environment.defaults())!r}}}))")
    env = {k: v for k, v in os.environ.items() if k not in environment.defaults()}
    env["HF_HUB_OFFLINE"] = "0"  # set by the user: kept
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO)}, check=True)
    seen = json.loads(out.stdout)
    assert seen == {**environment.defaults(), "HF_HUB_OFFLINE": "0"}
    assert seen["PREFECT_HOME"] == str(REPO / ".prefect")  # the checkout's, from any cwd
