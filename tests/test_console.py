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
