"""Rollout tokens per second: vLLM (``sampling.engine=vllm``) against transformers ``generate``
(``hf``), the same prompts and sampling settings, with LoRA adapters as training uses them.

    .venv/bin/python benchmarks/rollout_engine.py [--repeats 3] [--prompts 32] [--tokens 128]
        [--weights merged lora]

On the tiny model and on a random-weight model of Qwen2.5-0.5B's shape (``models.shapes``,
built locally; the project's 2,048-token vocabulary). Each repeat is one training step's
sampling: the generator's adapter first moves to a new version (as a PPO update leaves it), then
both engines sample every prompt once, every sample forced to ``--tokens`` new tokens
(``min_new_tokens``) so both produce the same number. vLLM's time includes getting that new
adapter version into the engine (``sampling.vllm_weights``: merged weights pushed in place, the
default, or ``--weights lora``: a LoRA request per version); its start-up and first (warm-up)
batch are printed apart: a run pays them once. 32 prompts x 128 tokens is one call of a step of the
real config's size (8 problems x 4 samples: each prompt four times, as a step samples them),
cut from 512 tokens to fit 2 cores. transformers runs as training runs it, in calls of
``sampling.batch_size`` (16, the real config's), and also with every prompt in one call (its
best case here); the headline is against the first, both ratios are printed.
Prints each repeat, the medians, and last ``ratio=<vllm merged tokens/s over hf tokens/s at the
0.5B shape, median of the repeats>``. Figures: docs/training.md, "Rollouts on vLLM".

Recorded results: docs/benchmarks.md, section benchmarks/rollout_engine.py.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

import torch  # noqa: E402

from configs.schema import LoraConfig, ModelConfig, SamplingConfig  # noqa: E402
from models.engine.sampler import VllmSampler  # noqa: E402
from models.policy import Policies  # noqa: E402
from models.prompts import generator_prompt  # noqa: E402
from models.shapes import build_shaped_model  # noqa: E402
from models.tiny import build_tiny_model  # noqa: E402
from problems.loaders import load_problems  # noqa: E402

ROLE = "generator"


def new_version(policies: Policies, seed: int) -> None:
    """What a PPO update does to the adapter, as far as sampling can tell: new weights."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policies.trainable_parameters(ROLE):
            p.add_(torch.randn(p.shape, generator=g) * 1e-3)


def measure(name: str, model_dir: str, args: argparse.Namespace) -> dict[str, list[float]]:
    model_cfg = ModelConfig(generator=model_dir, max_context_tokens=1024)
    policies = Policies.load(model_cfg, LoraConfig(r=16, alpha=32))
    tok = policies.tokenizer_for(ROLE)
    problems = load_problems("demo")
    # as a training step samples: each problem's prompt once per sample, problem-major
    prompts = [generator_prompt(tok, problems[i % len(problems)], 1, [], 1024)
               for i in range(args.prompts // args.samples) for _ in range(args.samples)]
    sampling = SamplingConfig(max_new_tokens=args.tokens, temperature=0.7,
                              batch_size=args.hf_batch, seed=0)
    everything = replace(sampling, batch_size=len(prompts))
    print(f"== {name}: {model_dir}, {len(prompts)} prompts of "
          f"{min(p.n_tokens for p in prompts)}-{max(p.n_tokens for p in prompts)} tokens, "
          f"{args.tokens} new tokens each, torch threads {torch.get_num_threads()}", flush=True)
    rates: dict[str, list[float]] = {"hf": [], "hf-one-call": []}
    engines = {}
    try:
        for weights in args.weights:
            engine = VllmSampler(policies, model_cfg,
                                 replace(sampling, engine="vllm", vllm_weights=weights), 16,
                                 Path(args.logs) / f"{name}-{weights}.log")
            engine.start()
            engines[weights] = engine
            rates[f"vllm-{weights}"] = []
            # the first batch after start-up pays one-off kernel set-up (oneDNN primitives for
            # each new shape): a training run pays it once, in its first step
            t0 = time.perf_counter()
            engine.sample(ROLE, prompts, sampling, seed=10_000)
            print(f"   vLLM engine ({weights}) started in {engine.start_seconds:.1f} s, first "
                  f"batch (warm-up, untimed below) {time.perf_counter() - t0:.1f} s", flush=True)
        for r in range(args.repeats):
            new_version(policies, seed=r)
            line = []
            for key, how in (("hf", sampling), ("hf-one-call", everything)):
                t0 = time.perf_counter()
                batch = policies.sample(ROLE, prompts, how, seed=r)
                rates[key].append(batch.new_tokens / (time.perf_counter() - t0))
                line.append(f"{key} {rates[key][-1]:.1f}")
            for weights, engine in engines.items():
                before = engine.sync_seconds
                t0 = time.perf_counter()
                batch = engine.sample(ROLE, prompts, sampling, seed=r,
                                      min_new_tokens=args.tokens)
                seconds = time.perf_counter() - t0
                rates[f"vllm-{weights}"].append(batch.new_tokens / seconds)
                line.append(f"vllm-{weights} {rates[f'vllm-{weights}'][-1]:.1f} (adapter "
                            f"refresh {engine.sync_seconds - before:.2f} s of {seconds:.1f} s)")
            print(f"   repeat {r + 1}: tokens/s " + ", ".join(line), flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    for key, values in rates.items():
        print(f"   median {key}: {statistics.median(values):.1f} tokens/s")
    return rates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--samples", type=int, default=4,
                        help="samples per problem: each prompt appears this many times, as in "
                             "a training step (the real config: 8 problems x 4 samples)")
    parser.add_argument("--hf-batch", type=int, default=16,
                        help="transformers sequences per generate call (sampling.batch_size of "
                             "configs/qwen2.5-coder-1.5b.yaml); every prompt in one call is "
                             "measured too")
    parser.add_argument("--weights", nargs="+", default=["merged"],
                        choices=["merged", "lora"])
    parser.add_argument("--shapes", nargs="+", default=["tiny", "qwen2.5-0.5b"],
                        choices=["tiny", "qwen2.5-0.5b"])
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="torch threads of the transformers engine (default: every core, "
                             "as the vLLM engine uses)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cache = ROOT / ".cache"
    with tempfile.TemporaryDirectory() as tmp:
        args.logs = tmp
        ratios = {}
        for shape in args.shapes:
            t0 = time.perf_counter()
            model_dir = (build_tiny_model(Path(tmp) / "tiny") if shape == "tiny"
                         else build_shaped_model(cache / f"shape-{shape}", shape))
            print(f"(model ready in {time.perf_counter() - t0:.0f} s)")
            rates = measure(shape, str(model_dir), args)
            for key in rates:
                if key.startswith("vllm"):
                    per_repeat = [v / h for v, h in zip(rates[key], rates["hf"], strict=True)]
                    ratios[(shape, key)] = statistics.median(per_repeat)
                    best = statistics.median(v / h for v, h in zip(
                        rates[key], rates["hf-one-call"], strict=True))
                    print(f"   {shape} {key} / hf: {ratios[(shape, key)]:.2f}x; / hf with every "
                          f"prompt in one call: {best:.2f}x (medians of {len(per_repeat)} "
                          "repeats)")
    headline = ratios.get(("qwen2.5-0.5b", "vllm-merged"))
    print(f"ratio={headline:.2f}" if headline is not None else "ratio=n/a (0.5B shape not run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
