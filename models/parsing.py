"""Parse model output into code and test snippets. Never raises on model output.

* :func:`parse_code` finds the generator's implementation of the entry point: the fenced block
  that defines it, else any block or top-level code that does, with surrounding prose and
  example usage stripped, and checks that it compiles.
* :func:`parse_tests` turns the discriminator's output into independent test snippets (each one
  runs on its own in the sandbox): pytest-style ``def test_*`` functions (the snippet defines and
  then calls it), bare ``assert`` statements, and lists of ``(inputs, expected)`` tuples (turned
  into ``assert entry_point(*inputs) == expected``), and test classes (``unittest.TestCase``
  or ``Test*``: each ``test_*`` method a test of its own, :mod:`models.testclasses`).
  Imports, assignments, helper functions and classes before a test are its setup and are
  prepended to it. What does not parse is salvaged
  statement by statement; what still fails is recorded as dropped with a reason, as are
  duplicates (compared by ``ast.dump`` after normalising test names).
* :func:`parse_critique` reads the optional textual critique.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field

from models.testclasses import class_tests, is_test_class

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_LANGS = {"", "python", "py", "python3", "pycon"}
_CODE_START = re.compile(r"^(def |async def |class |import |from |@|[A-Za-z_][\w.]*\s*=)")
_MAX_MERGE = 40  # statements merged while salvaging one multi-line construct


@dataclass(frozen=True)
class ParsedCode:
    """The generator's code: ``ok`` when it compiles and defines the entry point."""

    code: str
    ok: bool
    reason: str


@dataclass(frozen=True)
class ParsedTest:
    """One test snippet. ``status == "ok"`` tests are unique and runnable on their own;
    ``dropped`` ones carry the raw text and why (``duplicate`` marks repeats of an ok test)."""

    snippet: str
    status: str
    reason: str = ""
    duplicate: bool = False


@dataclass(frozen=True)
class Critique:
    """A textual critique: the listed issues and the final verdict."""

    text: str
    verdict: str  # "correct", "incorrect" or "unknown"
    issues: list[str] = field(default_factory=list)


def fenced_blocks(text: str) -> list[str]:
    """Contents of Python (or untagged) fenced blocks; an unclosed last fence runs to the end
    (the model hit ``max_new_tokens`` mid-block)."""
    return [m.group(2) for m in _FENCE.finditer(text or "")
            if m.group(1).lower() in _CODE_LANGS]


def _parse(source: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():  # model output is full of "invalid decimal literal"
            warnings.simplefilter("ignore", SyntaxWarning)
            module = ast.parse(source)
            compile(module, "<generated>", "exec")  # catches 'return' outside a function
        return module
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def _defines(module: ast.Module, name: str) -> bool:
    return any(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
               for node in module.body)


def _calls(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _is_example_usage(node: ast.stmt) -> bool:
    """Top-level asserts, prints and ``if __name__ == "__main__"`` blocks: a model's example
    usage, which would run (and possibly fail or print) every time the code is imported."""
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return True
    if isinstance(node, ast.If):
        return "__name__" in ast.unparse(node.test)
    return False


def _clean_code(module: ast.Module) -> tuple[str, bool]:
    kept = [n for n in module.body if not _is_example_usage(n)]
    stripped = len(kept) != len(module.body)
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) + "\n", stripped


def _statement_chunks(text: str) -> list[str]:
    """Split text into top-level statements: a line at column 0 starts a new one; indented and
    blank lines continue it."""
    chunks: list[list[str]] = []
    for line in (text or "").splitlines():
        if line.strip() and not line[0].isspace() or not chunks:
            chunks.append([line])
        else:
            chunks[-1].append(line)
    return ["\n".join(c) for c in chunks]


def _salvage(text: str) -> list[tuple[str, ast.Module | None]]:
    """Statement by statement: each chunk, merged with the next ones while that makes it parse
    (``else:`` or a closing bracket at column 0). Unparseable chunks come back with ``None``."""
    chunks = _statement_chunks(text)
    out: list[tuple[str, ast.Module | None]] = []
    i = 0
    while i < len(chunks):
        for j in range(i + 1, min(len(chunks), i + _MAX_MERGE) + 1):
            source = "\n".join(chunks[i:j])
            module = _parse(source)
            if module is not None:
                out.append((source, module))
                i = j
                break
        else:
            out.append((chunks[i], None))
            i += 1
    return out


def parse_code(text: str, entry_point: str) -> ParsedCode:
    """The code defining ``entry_point`` in a model's output (see module docstring)."""
    text = text or ""
    candidates = [("fenced block", b) for b in fenced_blocks(text)] + [("raw text", text)]
    for where, source in candidates:
        module = _parse(source)
        if module is not None and _defines(module, entry_point):
            code, stripped = _clean_code(module)
            note = "; example usage stripped" if stripped else ""
            return ParsedCode(code=code, ok=True, reason=f"{where}{note}")
    # Salvage: code-looking top-level statements from blocks and text, prose dropped.
    for where, source in candidates:
        pieces = [m for chunk, m in _salvage(source)
                  if m is not None and chunk.strip() and _CODE_START.match(chunk.lstrip())]
        body = [n for m in pieces for n in m.body]
        module = ast.Module(body=body, type_ignores=[])
        if _defines(module, entry_point):
            code, _ = _clean_code(module)
            if _parse(code) is not None:
                return ParsedCode(code=code, ok=True, reason=f"salvaged from {where}")
    blocks = fenced_blocks(text)
    if not text.strip():
        reason = "empty output"
    elif f"def {entry_point}" not in text:
        reason = f"no definition of {entry_point}"
    else:
        reason = f"definition of {entry_point} does not compile"
    return ParsedCode(code=blocks[0] if blocks else text, ok=False, reason=reason)


def _tuple_tests(node: ast.expr, entry_point: str, single: bool) -> list[str] | None:
    """``[(inputs, expected), ...]`` (or, when ``single``, one ``(inputs, expected)``) ->
    ``assert entry_point(*inputs) == expected`` snippets; ``None`` when not that shape."""
    def is_pair(n: ast.expr) -> bool:
        return isinstance(n, ast.Tuple) and len(n.elts) == 2

    if isinstance(node, ast.List | ast.Tuple) and node.elts and all(map(is_pair, node.elts)):
        pairs = node.elts
    elif single and is_pair(node):
        pairs = [node]
    else:
        return None
    out = []
    for pair in pairs:
        inputs, expected = pair.elts
        args = (", ".join(ast.unparse(e) for e in inputs.elts)
                if isinstance(inputs, ast.Tuple | ast.List) else ast.unparse(inputs))
        out.append(f"assert {entry_point}({args}) == {ast.unparse(expected)}")
    return out


_CASE_NAME = re.compile(r"test|case|example", re.IGNORECASE)


class _TestCollector:
    """Walks parsed statements in order, tracking setup and emitting tests."""

    def __init__(self, entry_point: str):
        self.entry_point = entry_point
        self.setup: list[str] = []
        self.tests: list[ParsedTest] = []
        self.seen: dict[str, int] = {}
        self.case_lists: set[str] = set()

    def _key(self, snippet: str) -> str:
        module = ast.parse(snippet)
        for node in ast.walk(module):  # test names do not make two tests different
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                node.name = "test_"
            elif isinstance(node, ast.Name) and node.id.startswith("test"):
                node.id = "test_"
        return ast.dump(module)

    def emit(self, body: str) -> None:
        snippet = "\n".join(self.setup + [body])
        if _parse(snippet) is None:
            self.tests.append(ParsedTest(snippet, "dropped", "does not compile with its setup"))
            return
        key = self._key(snippet)
        if key in self.seen:
            self.tests.append(ParsedTest(snippet, "dropped",
                                         f"duplicate of test #{self.seen[key]}", True))
            return
        self.seen[key] = len(self.tests)
        self.tests.append(ParsedTest(snippet, "ok", ""))

    def drop(self, source: str, reason: str) -> None:
        self.tests.append(ParsedTest(source.strip(), "dropped", reason))

    def statement(self, node: ast.stmt, source: str) -> None:
        ep = self.entry_point
        text = ast.unparse(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == ep:
                self.drop(source, f"redefines {ep} (would shadow the code under test)")
            elif node.name.startswith("test"):
                if node.args.args or isinstance(node, ast.AsyncFunctionDef):
                    self.drop(source, "test functions with arguments or async are not supported")
                elif not _calls(node, ep) and not any(ep in s for s in self.setup):
                    self.drop(source, f"does not call {ep}")
                else:
                    self.emit(f"{text}\n{node.name}()")
            else:
                self.setup.append(text)  # helper used by later tests
        elif isinstance(node, ast.Assert):
            if _calls(node, ep):
                self.emit(text)
            else:
                self.drop(source, f"does not call {ep}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == ep or alias.asname == ep for alias in node.names):
                return  # "from solution import f": the sandbox provides f
            self.setup.append(text)
        elif isinstance(node, ast.Expr):
            tests = _tuple_tests(node.value, ep, single=True)
            call = node.value
            if tests:
                for test in tests:
                    self.emit(test)
            elif not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                      and call.func.id.startswith("test")):  # test_x() calls are ours
                self.drop(source, "expression is not a test")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            # Only a list named like test cases is read as (inputs, expected) pairs; any other
            # list of pairs is data that later tests use.
            tests = (_tuple_tests(node.value, ep, single=False)
                     if node.value is not None and any(map(_CASE_NAME.search, names)) else None)
            if tests:
                self.case_lists.update(names)
                for test in tests:
                    self.emit(test)
            elif _calls(node, ep):
                self.drop(source, f"assignment calling {ep} is not a test")
            else:
                self.setup.append(text)
        elif isinstance(node, ast.For) and isinstance(node.iter, ast.Name) \
                and node.iter.id in self.case_lists:
            return  # the loop that would have run the case list we already turned into asserts
        elif isinstance(node, ast.ClassDef) and is_test_class(node):
            for function, why in class_tests(node):  # one test per method, judged alone
                if function is None:
                    self.drop(source, why)
                else:
                    self.statement(function, ast.unparse(function))
        elif isinstance(node, ast.ClassDef):
            self.setup.append(text)  # a helper class later tests build
        else:
            self.drop(source, f"unsupported statement ({type(node).__name__})")


def _looks_like_test(chunk: str, entry_point: str) -> bool:
    stripped = chunk.lstrip()
    return (entry_point in chunk or stripped.startswith(("assert", "def test"))) \
        and not stripped.startswith("#")


def parse_tests(text: str, entry_point: str) -> list[ParsedTest]:
    """Test snippets from the discriminator's output (see module docstring)."""
    collector = _TestCollector(entry_point)
    blocks = fenced_blocks(text or "")
    for source in blocks or [text or ""]:
        collector.setup = []  # setup does not leak from one block into the next
        module = _parse(source)
        if module is not None:
            pieces = [(ast.get_source_segment(source, n) or ast.unparse(n), n)
                      for n in module.body]
        else:
            pieces = []
            for chunk, m in _salvage(source):
                if m is None:
                    # Prose outside a fence is expected; only failed test attempts are recorded.
                    if _looks_like_test(chunk, entry_point):
                        collector.drop(chunk, "syntax error")
                    continue
                pieces.extend((chunk, n) for n in m.body)
        for segment, node in pieces:
            collector.statement(node, segment)
    return collector.tests


_VERDICT = re.compile(r"verdict\s*[:=-]\s*\**\s*(correct|incorrect|wrong|buggy|pass|fail)",
                      re.IGNORECASE)


def parse_critique(text: str) -> Critique:
    """Issues (``- `` bullet lines) and the last ``VERDICT:`` line of a critique."""
    text = text or ""
    matches = _VERDICT.findall(text)
    verdict = "unknown"
    if matches:
        word = matches[-1].lower()
        verdict = "correct" if word in ("correct", "pass") else "incorrect"
    issues = [line.strip()[2:].strip() for line in text.splitlines()
              if line.strip().startswith(("- ", "* ")) and line.strip()[2:].strip()]
    return Critique(text=text, verdict=verdict, issues=issues)
