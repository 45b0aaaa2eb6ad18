"""Command line: run a file of tests against a file of code, in the sandbox.

    python -m sandbox run --code solution.py --tests tests.py [--json] [--timeout 2]
    python -m sandbox serve [--timeout 2]    # JSON lines: jobs in on stdin, results out

``--tests`` is a pytest test file, run as pytest would run it (one test module: decorators,
fixtures, module constants and all; no conftest), or a ``.json`` file holding a list of test
strings (each its own test module). The candidate is the module ``solution``: the tests may
``from solution import ...``, and the names it exports are bound in them already. Each pytest
item is printed with pytest's own outcome, then each module's verdict. Exit status 0 when every
test module passed, 1 when any did not, 2 for bad input.

``serve`` judges for a process in another environment (``benchmarks/peers/trl_grpo.py`` in TRL's):
each stdin line is ``{"jobs": [[code, [test, ...]], ...]}``, each reply line
``{"results": [{"passed": n, "total": m, "statuses": [...]}, ...]}`` in job order, or
``{"error": "..."}`` for a line that is not such a request (the server goes on). It stops at the
end of its input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sandbox.api import execute, execute_many
from sandbox.cli import positive_seconds
from sandbox.result import ISOLATIONS, Limits, Placement


class InputError(ValueError):
    """Bad input to the command line; the message names the file and what is wrong."""


def read_source(path: str, what: str) -> str:
    """``path`` as UTF-8 text; an ``InputError`` naming the file (and for bytes that are not
    UTF-8, the first one and its offset) when it cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{what} {path}: not UTF-8 text: byte 0x{data[exc.start]:02x} at "
                         f"offset {exc.start} (line {line}): {exc.reason}") from None


def load_tests(path: str) -> list[str]:
    text = read_source(path, "--tests")
    if path.endswith(".json"):
        try:
            tests = json.loads(text)
        except ValueError as exc:
            raise InputError(f"--tests {path}: not valid JSON: {exc}") from None
        if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
            raise InputError(f"--tests {path}: expected a JSON list of test strings")
        return tests
    return [text]  # one pytest module; one that does not compile is judged ``invalid``


def _run(args: argparse.Namespace) -> int:
    try:
        code = read_source(args.code, "--code")
        tests = load_tests(args.tests)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = execute(code, tests, Limits(timeout_s=args.timeout), isolation=args.isolation)
    if args.json:
        print(json.dumps(dict(result.to_dict(), tests=tests), indent=1))
    else:
        for i, outcome in enumerate(result.outcomes):
            name = args.tests if len(tests) == 1 else f"{args.tests}[{i}]"
            for item in outcome.items:
                print(f"  {item.outcome.upper():8s} {name}::{item.name}"
                      + (f"\n           {item.message}" if item.message else ""))
            print(f"{outcome.status.upper():8s} {name}  ({outcome.duration_s * 1000:.1f} ms)"
                  + (f"\n         {outcome.message}" if outcome.message else ""))
        print(f"{result.passed}/{result.total} test modules passed "
              f"(isolation: {result.isolation})")
    return 0 if result.all_passed else 1


def parse_request(line: str) -> list[tuple[str, list[str]]]:
    """The jobs of one ``serve`` request line; ``InputError`` naming what is wrong."""
    try:
        request = json.loads(line)
    except ValueError as exc:
        raise InputError(f"not JSON: {exc}") from None
    jobs = request.get("jobs") if isinstance(request, dict) else None
    if not isinstance(jobs, list) or not all(
            isinstance(j, list) and len(j) == 2 and isinstance(j[0], str)
            and isinstance(j[1], list) and all(isinstance(t, str) for t in j[1])
            for j in jobs):
        raise InputError('expected {"jobs": [[code, [test, ...]], ...]}')
    return [(code, list(tests)) for code, tests in jobs]


def _serve(args: argparse.Namespace) -> int:
    limits = Limits(timeout_s=args.timeout)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            jobs = parse_request(line)
        except InputError as exc:
            print(json.dumps({"error": str(exc)}), flush=True)
            continue
        results = execute_many(jobs, limits, isolation=args.isolation) if jobs else []
        print(json.dumps({"results": [
            {"passed": r.passed, "total": r.total, "statuses": [o.status for o in r.outcomes]}
            for r in results]}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run tests against code")
    run.add_argument("--code", required=True, help="Python file with the code under test")
    run.add_argument("--tests", required=True, help="Python file of tests, or JSON list")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    serve = sub.add_parser("serve", help="judge jobs sent as JSON lines on stdin")
    for command, handler in ((run, _run), (serve, _serve)):
        command.add_argument("--timeout", type=positive_seconds, default=Limits.timeout_s,
                             help="seconds per test (> 0)")
        command.add_argument("--isolation", default=Placement.isolation, choices=ISOLATIONS)
        command.set_defaults(run=handler)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    from configs.environment import apply

    apply()  # the Makefile's environment, as every entry point sets it
    raise SystemExit(main())
