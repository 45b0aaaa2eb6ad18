"""The files a job stands for: what the sandbox judges is what pytest would make of these.

A job ``(code, tests)`` is judged as this layout, run by real pytest in one session:

- ``solution.py`` holds ``code`` verbatim: the candidate module, imported once per session;
- test string ``i`` is the module ``test_000i.py`` (``test_file(i)``), holding the string
  verbatim, whose globals start with the names the candidate exports already bound, as
  ``from solution import <names>`` binds them (``exported_names``): the names in ``__all__``
  when the candidate defines one, else every name not starting with ``_``, leaving out the
  names of builtins (a candidate's own ``len`` or ``sorted`` never replaces the real one in
  a test, so an expected value stays the test's own) and every name pytest reads from a test
  module (``pytest_is_read``): the candidate's public surface reaches the tests, never
  pytest, whose collection would otherwise run the candidate's ``test_*`` functions as tests,
  load its ``pytest_plugins`` or obey its ``pytestmark`` and ``__test__``;
- the session runs the test modules in order with ``plugin.PYTEST_ARGS``.

``header_source`` writes that binding as a line of Python for the same layout on disk (the
differential check runs real pytest on exactly these files).

Stdlib-only: the jail imports it.
"""

from __future__ import annotations

import ast
import builtins

MODULE = "solution"
_BUILTIN_NAMES = frozenset(dir(builtins))
# Module-level names pytest (9.x, default ini) reads from a test module besides its tests:
# xunit-style module and function setup, marks, and plugin declarations.
_PYTEST_MODULE_NAMES = frozenset({"setup_module", "setUpModule", "teardown_module",
                                  "tearDownModule", "setup_function", "teardown_function",
                                  "pytestmark"})


def test_file(index: int) -> str:
    """File name of test string ``index`` (its pytest module)."""
    return f"test_{index:04d}.py"


FANOUT = 16  # entries per placeholder folder (see ``test_path``)


def test_path(index: int) -> str:
    """Where the placeholder of test string ``index`` lies under the placeholder folder:
    ``a/b/test_000i.py``, 16 entries per folder. pytest lists the folder of every file it is
    given (and does not cache that listing for files named on its command line), so 4096
    placeholders side by side cost about half a second of collection per test module; in a
    tree of 16 they cost nothing measurable. Only the file's name matters to the verdicts."""
    return (f"{index // (FANOUT * FANOUT):x}/{index // FANOUT % FANOUT:x}/"
            f"{test_file(index)}")


def test_index(file_name: str) -> int | None:
    """Inverse of ``test_file`` (None for any other name)."""
    stem = file_name[:-3] if file_name.endswith(".py") else ""
    if stem.startswith("test_") and stem[5:].isdigit():
        return int(stem[5:])
    return None


def exported_names(namespace: dict) -> list[str]:
    """The names a test module sees of the candidate, in the candidate's order."""
    declared = namespace.get("__all__")
    if isinstance(declared, list | tuple) and all(type(n) is str for n in declared):
        names = [n for n in dict.fromkeys(declared) if n in namespace]
    else:
        names = [n for n in namespace if type(n) is str]
    return [n for n in names if not n.startswith("_") and n not in _BUILTIN_NAMES
            and n.isidentifier() and not pytest_is_read(n)]


def pytest_is_read(name: str) -> bool:
    """Whether pytest reads ``name`` from a test module: its default ``python_functions``
    and ``python_classes`` prefixes (``test``, ``Test``: collected as tests), hooks and plugin
    lists (``pytest_*``), and the module-level setup and mark names. Dunder names (``__test__``,
    ``__builtins__``) never leave the candidate: they start with ``_``."""
    return (name.startswith(("test", "Test", "pytest")) or name in _PYTEST_MODULE_NAMES)


def header_source(test: str, names: list[str]) -> str:
    """``test`` with ``from solution import <names>`` inserted where Python allows it (after
    a docstring and ``from __future__`` imports), for the layout on disk."""
    if not names:
        return test
    line = f"from {MODULE} import " + ", ".join(names) + "\n"
    try:
        body = ast.parse(test).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return line + test
    after = 0
    for i, node in enumerate(body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            after = node.end_lineno
        elif isinstance(node, ast.ImportFrom) and node.module == "__future__":
            after = node.end_lineno
        else:
            break
    lines = test.splitlines(keepends=True)
    if after and lines and not lines[after - 1].endswith("\n"):
        lines[after - 1] += "\n"
    return "".join(lines[:after]) + line + "".join(lines[after:])
