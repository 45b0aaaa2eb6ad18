"""Command line: run a file of tests against a file of code, in the sandbox.

    python -m sandbox run --code solution.py --tests tests.py [--json] [--timeout 2]

``--tests`` is a Python file, each top-level ``assert`` and each ``def test_*`` function being
one test (other top-level imports and helper definitions are given to every test), or a
``.json`` file holding a list of test strings. Exit status 0 when every test passed, 1 when
any did not, 2 for bad input.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from sandbox.api import execute


def split_test_file(text: str) -> list[str]:
    """One test per top-level ``assert`` or ``def test_*``; helpers go with each test."""
    tree = ast.parse(text)
    helpers = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)
               or (isinstance(n, ast.FunctionDef | ast.ClassDef) and not n.name.startswith("test"))]
    prefix = "".join(ast.get_source_segment(text, n) + "\n" for n in helpers)
    tests = []
    for node in tree.body:
        if isinstance(node, ast.Assert) or (isinstance(node, ast.FunctionDef)
                                            and node.name.startswith("test")):
            tests.append(prefix + ast.get_source_segment(text, node) + "\n")
    return tests


def _run(args: argparse.Namespace) -> int:
    try:
        code = Path(args.code).read_text(encoding="utf-8")
        text = Path(args.tests).read_text(encoding="utf-8")
        if args.tests.endswith(".json"):
            tests = json.loads(text)
            if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
                raise ValueError("expected a JSON list of test strings")
        else:
            tests = split_test_file(text)
    except (OSError, ValueError, SyntaxError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = execute(code, tests, timeout_s=args.timeout, isolation=args.isolation)
    if args.json:
        print(json.dumps(dict(result.to_dict(), tests=tests), indent=1))
    else:
        for i, (test, outcome) in enumerate(zip(tests, result.outcomes, strict=True)):
            lines = [line.strip() for line in test.strip().splitlines()] or [""]
            first = next((line for line in lines if line.startswith("def test")), lines[-1])
            print(f"[{i}] {outcome.status.upper():8s} {outcome.duration_s * 1000:7.1f} ms  "
                  f"{first[:70]}" + (f"\n      {outcome.message}" if outcome.message else ""))
        print(f"{result.passed}/{result.total} passed (isolation: {result.isolation})")
    return 0 if result.all_passed else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run tests against code")
    run.add_argument("--code", required=True, help="Python file with the code under test")
    run.add_argument("--tests", required=True, help="Python file of tests, or JSON list")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--timeout", type=float, default=2.0, help="seconds per test")
    run.add_argument("--isolation", default="auto", choices=("auto", "bwrap", "process"))
    run.set_defaults(run=_run)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
