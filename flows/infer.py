"""Inference from the command line: print the reasoning chain a model writes for problems.

    python -m flows.infer --model tiny-generator@champion --problems demo --ids add
    python -m flows.infer --model models:/tiny-generator/3 --problems humaneval --limit 2 --json
    python -m flows.infer show [--model M] [--problems demo --limit 2]

The first form loads the generator (see ``serving.sources`` for every accepted ``--model``),
writes the five stages for each problem, runs the code against the problem's tests in the
sandbox and prints the chain with per-stage timings (``--tests`` adds the discriminator's
tests). ``show`` prints what the models generate before training (default: the config's base
model with fresh adapters): the chain, the discriminator's tests of every stage, their execution
against the code, the reference and its mutants, and the rewards training would give. MLflow
is found through ``tracking.tracking_uri`` or ``$MLFLOW_TRACKING_URI``. No Prefect server is
needed: this is a plain command, not a flow.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from configs import ConfigError, load_config
from flows import skip_bitsandbytes, stopping
from flows.preflight import check as check_preconditions
from problems import ProblemLoadError, load_problems


def _common(parser: argparse.ArgumentParser, model_help: str) -> None:
    parser.add_argument("--config", default="configs/tiny.yaml", help="YAML config file")
    parser.add_argument("--model", help=model_help)
    parser.add_argument("--discriminator", default="auto",
                        help="discriminator weights (default: the registry sibling, if any)")
    parser.add_argument("--problems", default="demo", help="demo, humaneval or a file")
    parser.add_argument("--ids", nargs="+", help="only these problem ids")
    parser.add_argument("--limit", type=int, help="at most this many problems")
    parser.add_argument("--samples", type=int, default=1, help="chains per problem")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config value (repeatable)")


def format_scored(result: Any, scored: dict[str, Any]) -> str:
    """Every test of one sample with its verdicts, and the sample's rewards."""
    key = (result.problem.id, result.sample_idx)
    by_target: dict[tuple[str, str], str] = {}
    mutants: dict[str, list[bool]] = {}
    for e in scored["executions"]:
        if (e["problem_id"], e["sample_idx"]) != key:
            continue
        by_target[(e["test_id"], e["target_kind"])] = e["status"]
        if e["target_kind"] == "mutant":
            mutants.setdefault(e["test_id"], []).append(e["status"] != "passed")
    lines = ["--- accumulated suite (valid = the reference passes it)",
             f"    {'test':<6} {'valid':<6} {'code':<8} {'mutants':<8} snippet"]
    for t in scored["tests"]:
        if (t["problem_id"], t["sample_idx"]) != key:
            continue
        first = t["snippet"].strip().splitlines()[0][:70] if t["snippet"].strip() else ""
        if t["parse_status"] != "ok" or t["is_duplicate"]:
            why = "duplicate" if t["is_duplicate"] else f"dropped: {t['drop_reason']}"
            lines.append(f"    {t['test_id']:<6} ({why}) {first}")
            continue
        kills = mutants.get(t["test_id"])
        valid = "yes" if by_target.get((t["test_id"], "reference")) == "passed" else "no"
        killed = f"{sum(kills)}/{len(kills)}" if kills else "-"
        lines.append(f"    {t['test_id']:<6} {valid:<6} "
                     f"{by_target.get((t['test_id'], 'candidate'), '-'):<8} {killed:<8} {first}")
    r = scored["rewards"].get(key)
    if r is not None and r.get("masked"):
        lines.append(f"--- rewards: none (masked: {r['n_infra_tests']} test(s) with an 'infra' "
                     "verdict, the sandbox failed rather than the code)")
    elif r is not None:
        lines.append(
            f"--- rewards: generator {r['generator_reward']:.3f}, discriminator "
            f"{r['discriminator_reward']:.3f} (validity {r['validity']:.2f}, bug catch "
            f"{r['bug_catch']:.2f}, valid discriminator tests {r['n_valid']}/"
            f"{r['n_valid'] + r['n_invalid']}, baseline "
            f"passed {r['n_baseline_passed']}/{r['n_baseline']}, mutants killed "
            f"{r['n_mutants_killed']}/{r['n_mutants']})")
    return "\n".join(lines)


def run(args: argparse.Namespace, show: bool) -> int:
    cfg = load_config(args.config, args.overrides)
    check_preconditions(cfg, model=args.model, engine=False)  # no vLLM engine here
    # deferred: --help, usage errors and the checks above answer before torch loads
    import torch

    if not torch.cuda.is_available():
        skip_bitsandbytes()  # no 4-bit load can happen without CUDA (models.policy refuses it)
    from pipeline.evaluation import score_tests
    from serving.inference import InferenceEngine, format_result

    problems = load_problems(args.problems, ids=args.ids,
                             limit=args.limit if args.limit or args.ids else (2 if show else None))
    engine = InferenceEngine.load(args.model, cfg, discriminator=args.discriminator or None)
    as_json = getattr(args, "json", False)
    print(f"model: {engine.describe()}\nproblems: {args.problems} ({len(problems)})\n",
          flush=True, file=sys.stderr if as_json else sys.stdout)  # stdout stays pure JSON
    with_tests = show or args.tests
    results = engine.solve_batch(problems, args.samples, with_tests=with_tests)
    scored = None
    if show:
        scored = score_tests(results, engine.cfg)
    if as_json:
        print(json.dumps([r.to_dict() for r in results], indent=1))
        return 0
    for r in results:
        print(format_result(r))
        if scored is not None:
            print(format_scored(r, scored))
        print()
    passed = sum(r.passed for r in results)
    print(f"{passed}/{len(results)} chains passed every executed test")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    show = bool(argv) and argv[0] == "show"
    parser = argparse.ArgumentParser(
        prog="python -m flows.infer" + (" show" if show else ""), description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(parser, "generator: NAME@ALIAS, models:/NAME/VERSION, runs:/ or local checkpoint, "
            "adapter folder, model path or hub id" + (" (default: the config's base model, "
                                                      "untrained)" if show else ""))
    if not show:
        parser.add_argument("--tests", action="store_true",
                            help="also write discriminator tests and run them")
        parser.add_argument("--json", action="store_true", help="print results as JSON")
    args = parser.parse_args(argv[1:] if show else argv)
    stopping.keeping(lambda: "inference writes nothing, so nothing was kept")
    try:
        return run(args, show)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (flows.stopping): its one line, its code
        return stopping.leave()
    except (ConfigError, ProblemLoadError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    stopping.install()  # Ctrl-C / SIGTERM: one line, within seconds
    raise SystemExit(main())
