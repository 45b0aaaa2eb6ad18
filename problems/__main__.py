"""Command line for problem sets.

    python -m problems validate SOURCE [--no-exec] [--no-repair] [--timeout S] [--json]
    python -m problems list SOURCE [--curriculum] [--limit N]

``validate`` reports every issue of every problem in one pass (file, index, id, field, reason):
the structural checks (fields missing, null or of the wrong type, reference does not compile or
does not define the entry point, baseline tests not runnable) and, unless ``--no-exec``, each
reference run against its own baseline tests in the sandbox. Tests whose only defect is a
recorded-value format are repaired and shown as such (``problems.repairs`` lists the rules;
``--no-repair`` reports them as issues). Exit status 0 when every problem is usable (repaired
ones included), 1 when any is not, 2 when the source cannot be read (the message names the
file, and for a file that is not UTF-8 the byte offset).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from problems.loaders import load_problem_set, select
from problems.model import ProblemLoadError
from problems.report import by_count
from problems.validate import VET_LIMITS
from problems.vet import vet
from sandbox.cli import positive_seconds


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _validate(args: argparse.Namespace) -> int:
    report = vet(args.source, execute=not args.no_exec, repair=not args.no_repair,
                 limits=replace(VET_LIMITS, timeout_s=args.timeout))
    issues = sorted(report.issues, key=lambda i: i.index)  # stable: field order kept
    if args.json:
        print(json.dumps(dict(report.to_dict(), issues=[i.__dict__ for i in issues]),
                         indent=1))
    else:
        for issue in issues:
            print(issue)
        for repair in report.repairs:
            print(f"{report.source}: {repair}")
    c = report.counts()
    repaired = (f"; {c['repaired']} of the ok repaired ({c['repaired_tests']} test(s): "
                f"{by_count(c['repaired_by'])})" if c["repaired"] else "")
    by_kind = f" [{by_count(c['skipped_by'])}]" if c["skipped"] else ""
    checked = "" if report.executed else "; references not run (--no-exec)"
    print(f"{args.source}: {c['total']} problem(s), {c['valid']} ok, {c['skipped']} with "
          f"issues ({len(issues)} issue(s)){by_kind}{repaired}{checked}", file=sys.stderr)
    return 1 if report.skipped else 0


def _list(args: argparse.Namespace) -> int:
    problem_set = load_problem_set(args.source)
    for p in select(problem_set.problems, limit=args.limit, curriculum=args.curriculum):
        print(f"{p.id:40s} {p.difficulty:8s} {len(p.baseline_tests):3d} tests  "
              f"{p.function_signature.splitlines()[0]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m problems", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="report every issue of every problem; exit 1 if any")
    v.add_argument("source", help="demo, humaneval, or a .json/.jsonl/.parquet file")
    v.add_argument("--no-exec", action="store_true",
                   help="structural checks only (do not run references in the sandbox)")
    v.add_argument("--no-repair", action="store_true",
                   help="report recorded-format defects as issues instead of repairing them")
    v.add_argument("--timeout", type=positive_seconds, default=VET_LIMITS.timeout_s,
                   help="seconds per baseline test")
    v.add_argument("--json", action="store_true", help="print the whole report as JSON")
    v.set_defaults(run=_validate)
    ls = sub.add_parser("list", help="list the problems that load")
    ls.add_argument("source")
    ls.add_argument("--limit", type=_at_least_one)
    ls.add_argument("--curriculum", action="store_true", help="easy -> medium -> hard")
    ls.set_defaults(run=_list)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except ProblemLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from configs.environment import apply

    apply()  # the Makefile's environment, as every entry point sets it
    raise SystemExit(main())
