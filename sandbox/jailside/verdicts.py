"""What pytest's reports mean as verdicts: the one table, shared by the sandbox and by the
differential check that runs real pytest outside it.

A job's tests are strings; each is one pytest test *module*, run as pytest runs it. pytest
reports *items* (test functions, methods, parametrized cases) and module *collection*; this
module turns those reports into one verdict per test string.

Item outcome, in pytest's own words (``ITEM_OUTCOMES``), from its setup/call/teardown reports:

==========================================  ==========
pytest reported                             item
==========================================  ==========
setup, call and teardown passed             passed
call failed                                 failed
setup or teardown failed                    error
skipped (mark, ``pytest.skip``, SkipTest)   skipped
skipped with ``wasxfail`` (xfail held)      xfailed
passed with ``wasxfail`` (non-strict)       xpassed
module collection failed                    error     (item ``<module>``)
module collection skipped                   skipped   (item ``<module>``)
==========================================  ==========

Verdict of a test string (``verdict``), read top to bottom, first match wins:

======================================================  =========  =========================
the module's items                                      verdict    why
======================================================  =========  =========================
collection failed on a ``SyntaxError`` in the test      invalid    the test cannot run
collection failed by an assert (module-level asserts)   failed
collection failed otherwise (``NameError``, ...)        error
an item failed or errored, by an assert or              failed     the first such item
``pytest.fail``/``raises``/``warns`` (``Failed``)                  decides
an item failed or errored otherwise                     error
an item passed (others may be skipped/xfailed)          passed
items exist, all skipped/xfailed/xpassed                skipped    no credit: not judged
no items, the module body ran statements and held       passed     module-level asserts
no items, nothing but definitions                       invalid    nothing pytest would run
======================================================  =========  =========================

``timeout``, ``crashed`` and ``infra`` never come from pytest: the sandbox decides them (see
``sandbox.result``). A skip or an xfail never earns credit: ``skipped`` is not ``passed``.

Stdlib-only: the jail's test process and the differential harness both import it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

ITEM_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
MODULE_ITEM = "<module>"  # the name of a module's collection outcome, when it did not pass
MAX_MESSAGE = 400
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                ast.ClassDef, ast.Pass)


@dataclass(frozen=True)
class ItemResult:
    """One pytest item (or a module's failed or skipped collection)."""

    name: str
    """Node id inside the module: ``test_a``, ``test_a[1-2]``, ``TestX::test_y`` or
    ``<module>``."""
    outcome: str
    """One of ``ITEM_OUTCOMES``."""
    assertion: bool = False
    """The failure came from an assert or a pytest failure (``AssertionError`` or pytest's
    ``Failed``: ``pytest.fail``, DID NOT RAISE, DID NOT WARN)."""
    syntax: bool = False
    """Collection failed on a ``SyntaxError`` in the test itself."""
    message: str = ""

    def to_list(self) -> list:
        return [self.name, self.outcome, self.assertion, self.syntax, self.message]

    @classmethod
    def from_list(cls, data: object) -> ItemResult:
        """Strictly from ``to_list``'s form (the jail sends it; anything malformed raises
        ``ValueError``)."""
        if not (isinstance(data, list) and len(data) == 5):
            raise ValueError("malformed item result")
        name, outcome, assertion, syntax, message = data
        if (not isinstance(name, str) or outcome not in ITEM_OUTCOMES
                or type(assertion) is not bool or type(syntax) is not bool
                or not isinstance(message, str)):
            raise ValueError("malformed item result")
        return cls(name[:200], outcome, assertion, syntax, short(message))


def short(text: object, limit: int = MAX_MESSAGE) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def has_body(source: str) -> bool:
    """Whether a test module runs statements at import (module-level asserts, loops, calls),
    not only imports and definitions. Such a module is its own test: it holds when its import
    does. A module that does not parse has no body (pytest reports its ``SyntaxError``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return tree_has_body(tree)


def tree_has_body(tree: ast.Module) -> bool:
    """``has_body`` of a module already parsed."""
    for node in tree.body:
        if isinstance(node, _DEFINITIONS):
            continue
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            continue  # a docstring
        return True
    return False


def verdict(items: Sequence[ItemResult], body: bool) -> tuple[str, str]:
    """``(status, message)`` of one test module from its item results (see the table)."""
    for item in items:
        if item.name == MODULE_ITEM and item.outcome == "error":
            if item.syntax:
                return "invalid", f"test does not compile: {item.message}"
            return ("failed" if item.assertion else "error"), item.message
    for item in items:
        if item.outcome in ("failed", "error"):
            where = "" if item.name == MODULE_ITEM else f"{item.name}: "
            return ("failed" if item.assertion else "error"), short(where + item.message)
    if any(item.outcome == "passed" for item in items):
        return "passed", ""
    if items:
        first = items[0]
        return "skipped", short(f"{first.outcome}: {first.name}: {first.message}")
    if body:
        return "passed", ""
    return "invalid", "the test defines nothing pytest would run (no test function, no test " \
                      "class, no module-level statement)"
