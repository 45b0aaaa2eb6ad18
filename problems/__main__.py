"""Command line for problem sets.

    python -m problems validate SOURCE [--no-exec] [--json]
    python -m problems list SOURCE [--curriculum] [--limit N]

``validate`` prints every bad problem (file, index, id, field, reason) and exits 1 when there
is any. Besides the structural checks (missing fields, reference does not compile, entry point
not defined, baseline test not runnable) it runs each reference against its own baseline tests
in the sandbox (``--no-exec`` skips that).
"""

from __future__ import annotations

import argparse
import json
import sys

from problems.loaders import load_problem_set, select
from problems.model import ProblemLoadError


def _validate(args: argparse.Namespace) -> int:
    problem_set = load_problem_set(args.source)
    issues = list(problem_set.issues)
    if not args.no_exec and problem_set.problems:
        from problems.validate import execution_issues

        issues += execution_issues(problem_set.problems, timeout_s=args.timeout)
    issues.sort(key=lambda i: i.index)
    bad = {(i.index, i.problem_id) for i in issues}
    total = len(problem_set.problems) + len({i.index for i in problem_set.issues})
    if args.json:
        print(json.dumps([i.__dict__ for i in issues], indent=1))
    else:
        for issue in issues:
            print(issue)
        print(f"{args.source}: {total} problem(s), {total - len(bad)} ok, "
              f"{len(bad)} with issues ({len(issues)} issue(s))", file=sys.stderr)
    return 1 if issues else 0


def _list(args: argparse.Namespace) -> int:
    problem_set = load_problem_set(args.source)
    for p in select(problem_set.problems, limit=args.limit, curriculum=args.curriculum):
        print(f"{p.id:40s} {p.difficulty:8s} {len(p.baseline_tests):3d} tests  "
              f"{p.function_signature.splitlines()[0]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m problems", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="report every bad problem; exit 1 if any")
    v.add_argument("source", help="demo, humaneval, or a .json/.jsonl/.parquet file")
    v.add_argument("--no-exec", action="store_true",
                   help="structural checks only (do not run references in the sandbox)")
    v.add_argument("--timeout", type=float, default=5.0, help="seconds per baseline test")
    v.add_argument("--json", action="store_true", help="print issues as JSON")
    v.set_defaults(run=_validate)
    ls = sub.add_parser("list", help="list the problems that load")
    ls.add_argument("source")
    ls.add_argument("--limit", type=int)
    ls.add_argument("--curriculum", action="store_true", help="easy -> medium -> hard")
    ls.set_defaults(run=_list)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ProblemLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
