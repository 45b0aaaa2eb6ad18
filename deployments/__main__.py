"""python -m deployments {setup,deploy,serve}: see deployments/pool.py."""

from __future__ import annotations

import argparse
import os

from deployments.pool import REPO, deploy, load_prefect_yaml, setup, to_runner_deployments


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deployments", description=__doc__)
    parser.add_argument("command", choices=["setup", "deploy", "serve"],
                        help="setup: create the work pools; deploy: setup, then `prefect "
                        "--no-prompt deploy`; serve: run the deployments without a worker")
    parser.add_argument("--name", action="append", default=[],
                        help="only this deployment (repeatable; default: all)")
    args = parser.parse_args(argv)
    spec = load_prefect_yaml()
    if args.command == "serve":
        from prefect import serve

        os.chdir(REPO)  # the served flows run from here, as the deployments' pull step does
        serve(*to_runner_deployments(spec, args.name))
        return 0
    setup(spec)
    return deploy(args.name) if args.command == "deploy" else 0


if __name__ == "__main__":
    raise SystemExit(main())
