"""The suite's own scheduling (tests/conftest.py): the longest files start first."""

from __future__ import annotations

from pathlib import Path

from conftest import LONGEST_FIRST

TESTS = Path(__file__).resolve().parent


def test_the_longest_first_files_exist():
    """A renamed slow test file would silently lose its early start under ``make test``."""
    assert [n for n in LONGEST_FIRST if not (TESTS / n).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_collection_puts_them_first_in_their_order(pytester, monkeypatch):
    """Collected in the real conftest's order: the listed files first, as listed, then the
    rest; each file's own tests in their order."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS.parent))  # the conftest imports the project
    pytester.makeconftest((TESTS / "conftest.py").read_text())
    names = ["test_a.py", LONGEST_FIRST[1], "test_b.py", LONGEST_FIRST[0]]
    for name in names:
        pytester.makepyfile(**{name[:-3]: "def test_1(): pass\ndef test_2(): pass\n"})
    # a subprocess: this process may have imported the real modules of those names already
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [line.split("::")[0] for line in result.outlines if "::" in line]
    assert ids == [LONGEST_FIRST[0]] * 2 + [LONGEST_FIRST[1]] * 2 + ["test_a.py"] * 2 + \
        ["test_b.py"] * 2
