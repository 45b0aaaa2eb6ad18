"""Helpers of the ``test_problems*`` files: the repository root, one good problem record, and
writing records to a JSON file."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

GOOD = {
    "id": "add",
    "description": "Add two integers.",
    "function_signature": "def add(a: int, b: int) -> int:",
    "baseline_tests": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"],
    "reference_solution": "def add(a, b):\n    return a + b\n",
    "difficulty": "easy",
    "tags": ["math"],
}


def write(tmp_path: Path, name: str, data) -> Path:
    """``data`` as JSON in ``tmp_path / name``; the path."""
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path
