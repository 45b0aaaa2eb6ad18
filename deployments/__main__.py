"""python -m deployments {setup,deploy,serve}: see deployments/pool.py;
python -m deployments stack {up,status,down} --dir DIR: see deployments/stack.py."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from deployments import stack
from deployments.pool import REPO, deploy, load_prefect_yaml, setup, to_runner_deployments


def stack_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deployments stack",
        description="PostgreSQL, a Prefect server and an MLflow server on it, and a Ray head, "
        "on loopback, all state under --dir. `up` prints the export lines a shell needs "
        "(also written to DIR/stack.env).")
    parser.add_argument("command", choices=["up", "status", "down"])
    parser.add_argument("--dir", required=True, type=Path, help="the stack's folder")
    parser.add_argument("--ray-cpus", type=int, default=None,
                        help="CPUs the Ray head offers (default: every core)")
    parser.add_argument("--no-ray", action="store_true", help="up: start no Ray head")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            st = stack.up(args.dir, args.ray_cpus, with_ray=not args.no_ray,
                          say=lambda line: print(line, file=sys.stderr, flush=True))
            print(f"# the stack in {st.dir} is up; in your shell (or: source "
                  f"{args.dir}/{stack.ENV_FILE}):")
            for key, value in st.exports().items():
                print(f"export {key}={value}")
            return 0
        if args.command == "status":
            states = stack.status(args.dir)
            if not states:
                recorded = (args.dir / stack.STATE).exists()
                print(f"the stack in {args.dir} is down (`stack up` starts it again)" if recorded
                      else f"no stack recorded in {args.dir}")
                return 1
            for name, state in states.items():
                print(f"{name:9s} {state}")
            return 0 if set(states.values()) == {"up"} else 1
        return 1 if stack.down(args.dir) else 0
    except stack.StackError as exc:
        print(f"stack {args.command}: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["stack"]:
        return stack_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m deployments", description=__doc__)
    parser.add_argument("command", choices=["setup", "deploy", "serve"],
                        help="setup: create the work pools; deploy: setup, then `prefect "
                        "--no-prompt deploy`; serve: run the deployments without a worker "
                        "(and `stack up|status|down --dir DIR`: see `stack --help`)")
    parser.add_argument("--name", action="append", default=[],
                        help="only this deployment (repeatable; default: all)")
    args = parser.parse_args(argv)
    spec = load_prefect_yaml()
    if args.command == "serve":
        from prefect import serve  # deferred: `stack` and --help answer without loading Prefect

        os.chdir(REPO)  # the served flows run from here, as the deployments' pull step does
        serve(*to_runner_deployments(spec, args.name))
        return 0
    setup(spec)
    return deploy(args.name) if args.command == "deploy" else 0


if __name__ == "__main__":
    from configs.environment import apply

    apply()  # the Makefile's environment, as every entry point sets it
    raise SystemExit(main())
