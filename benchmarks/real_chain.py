"""Can a real model follow the chain? Per-stage shares on SmolLM2-135M-Instruct, untrained and
after the supervised warm start.

    make smollm2-model        # once: the converted model in .cache/smollm2-135m-instruct
    .venv/bin/python benchmarks/real_chain.py [--limit 16] [--warm-steps N] [--set k=v ...]

The model works ``--limit`` HumanEval problems (the first ones; never warm-started on) through
the chain of ``configs/smollm2-135m.yaml`` (its budgets and stop rules), the discriminator
writes tests at every stage, and the sandbox runs them against each problem's reference
solution (``pipeline.chainshares``: outputs that end before their budget, chains whose code
parses, discriminator outputs that parse into tests, the share of those tests the reference
passes). Then both adapters are warm-started as the config says (``pipeline.warmstart``: short
stage texts, the reference solution, the problem's own tests; 60 steps of 4 a role on the
shipped demo problems, which are disjoint from HumanEval), and the same problems are measured
again with the same seeds. The baseline is the same model untrained, in the same call.

Goals (the real-model issue): after the warm start >= 0.8 of outputs end before their cap,
>= 0.9 of chains' code parses, >= 0.8 of discriminator outputs parse into tests, >= 0.5 of
those tests are valid. Last line (after the warm start):
``gen_ended=<> tests_ended=<> code_parses=<> tests_parsed=<> tests_valid=<>``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

from configs import load_config  # noqa: E402
from pipeline.chainshares import COLUMNS, ChainShares, chain_shares  # noqa: E402

CONFIG = ROOT / "configs" / "smollm2-135m.yaml"


def measure(solver, problems, samples: int, seed: int) -> tuple[ChainShares, float, list]:
    """The chain shares of ``problems`` x ``samples``, the seconds it took, and the results
    (``pipeline.solver.InferenceResult``)."""
    start = time.perf_counter()
    results = solver.generate(problems, samples, seed=seed)
    solver.write_tests(results, seed=seed)
    passes = solver.reference_passes(results)
    return chain_shares(results, passes), time.perf_counter() - start, results


def table(label: str, shares: ChainShares) -> str:
    def cell(v):
        return "   -  " if v is None else f"{v:6.3f}"

    lines = [f"{label}: {shares.chains} chains, code parses {shares.code_parses:.3f}",
             "stage  " + "  ".join(f"{c:>12}" for c in COLUMNS) + "  tests"]
    for s in shares.stages:
        lines.append(f"{s.stage:>5}  " + "  ".join(f"{cell(getattr(s, c)):>12}"
                                                 for c in COLUMNS) + f"  {s.tests:>5}")
    overall = shares.overall()
    lines.append("  all  " + "  ".join(f"{cell(overall[c]):>12}" for c in COLUMNS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="config override, as flows.train takes")
    parser.add_argument("--source", default="humaneval", help="problems measured")
    parser.add_argument("--limit", type=int, default=16)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--warm-source", help="problems the warm start fits (never the "
                                              "measured ones; default: the config's)")
    parser.add_argument("--warm-steps", type=int, help="steps a role (default: the config's)")
    parser.add_argument("--json", help="write both measurements here")
    args = parser.parse_args(argv)

    from flows import skip_bitsandbytes

    skip_bitsandbytes()  # no 4-bit model here: peft need not import bitsandbytes (its warnings)
    import torch

    from models.convert_gguf import verify_models
    from models.policy import Policies
    from pipeline.solver import ChainSolver
    from pipeline.warmstart import fit_roles
    from problems.loaders import load_problems

    cfg = load_config(args.config, args.overrides)
    cfg.model.check_folders()
    verify_models((cfg.model.generator, cfg.model.discriminator))
    if cfg.model.cpu_threads:
        torch.set_num_threads(cfg.model.cpu_threads)
    problems = load_problems(args.source, limit=args.limit)
    ws = replace(cfg.warm_start, enabled=True,
                 source=args.warm_source or cfg.warm_start.source or "demo",
                 steps=args.warm_steps or cfg.warm_start.steps)
    warm = load_problems(ws.source, limit=ws.limit)
    overlap = {p.id for p in problems} & {p.id for p in warm}
    if overlap:
        raise SystemExit(f"error: the warm start would see measured problems {sorted(overlap)}")
    policies = Policies.load(cfg.model, cfg.lora, seed=cfg.sampling.seed)
    solver = ChainSolver(policies, cfg)
    print(f"{cfg.model.generator}: {len(problems)} {args.source} problems x {args.samples}",
          flush=True)
    before, seconds, results = measure(solver, problems, args.samples, seed=1)
    print(table(f"untrained ({seconds:.0f} s)", before), flush=True)

    t0 = time.perf_counter()
    stats = fit_roles(policies, warm, ws, cfg.model.max_context_tokens, lambda role: 7)
    print(f"warm start: {ws.steps} steps a role on {len(warm)} {ws.source} "
          f"problems, {time.perf_counter() - t0:.0f} s, loss generator "
          f"{stats.get('warm_start/generator_first_loss', 0):.3f} -> "
          f"{stats.get('warm_start/generator_last_loss', 0):.3f}, discriminator "
          f"{stats.get('warm_start/discriminator_first_loss', 0):.3f} -> "
          f"{stats.get('warm_start/discriminator_last_loss', 0):.3f}", flush=True)
    after, seconds, results_after = measure(solver, problems, args.samples, seed=1)
    print(table(f"after the warm start ({seconds:.0f} s)", after), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "before": before.to_dict(), "after": after.to_dict(),
            "outputs": [{"problem": r.problem.id, "chain": r.reasoning_chain,
                         "code": r.generated_code, "tests": r.test_texts}
                        for r in results + results_after]}, indent=1))
    parsed = sum(r.code is not None for r in results_after)
    print(f"(code parsed in {parsed} of {len(results_after)} chains after the warm start)")
    figures = {**after.overall(), "code_parses": after.code_parses}
    print(" ".join(f"{name}={'nan' if figures[name] is None else f'{figures[name]:.3f}'}"
                   for name in ("gen_ended", "tests_ended", "code_parses", "tests_parsed",
                                "tests_valid")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
