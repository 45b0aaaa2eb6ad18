"""Tokens per second of batched generation (8 prompts in one left-padded ``generate`` call)
against one prompt at a time, on the tiny model, with exactly the same number of new tokens.

    .venv/bin/python benchmarks/generation_throughput.py [--tokens 64] [--repeats 5]

Every sample is forced to ``--tokens`` new tokens (``min_new_tokens == max_new_tokens``), so both
ways produce 8 x tokens tokens. Prints the median of ``--repeats`` interleaved runs of each (the
machine is shared and noisy); the last line is ``ratio=<batched over one-at-a-time>``. Goal: >= 4.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

import torch  # noqa: E402

from benchmarks.interleave import interleaved  # noqa: E402
from configs.schema import LoraConfig, ModelConfig, SamplingConfig  # noqa: E402
from models.generation import generate  # noqa: E402
from models.policy import Policies  # noqa: E402
from models.prompts import generator_prompt  # noqa: E402
from models.tiny import build_tiny_model  # noqa: E402
from problems.loaders import load_problems  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: build the tiny model in a "
                                        "temporary folder)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: a hidden-64 model gains nothing from "
                             "more, and threads fight other processes on a shared machine)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model or str(build_tiny_model(Path(tmp) / "tiny"))
        policies = Policies.load(ModelConfig(generator=model_dir), LoraConfig())
        model, tokenizer = policies.model_for("generator"), policies.tokenizer
        problems = load_problems("demo")
        prompts = [generator_prompt(tokenizer, problems[i % len(problems)], 1, [], 2048).ids
                   for i in range(args.batch)]
        print(f"model={model_dir} prompts={len(prompts)} prompt_tokens="
              f"{min(map(len, prompts))}-{max(map(len, prompts))} new_tokens={args.tokens} "
              f"threads={args.threads}")

        def sample(batch_size: int) -> int:
            sampling = SamplingConfig(max_new_tokens=args.tokens, batch_size=batch_size,
                                      temperature=1.0, seed=0)
            result = generate(model, tokenizer, prompts, sampling, min_new_tokens=args.tokens)
            assert result.new_tokens == args.tokens * len(prompts), result.new_tokens
            return result.new_tokens

        sample(args.batch)  # warm-up: first-call allocations and lazy imports
        timed = interleaved({"batched": lambda: sample(args.batch), "single": lambda: sample(1)},
                            args.repeats)
    batched, single = ([n / t for n, t in zip(timed[way].results, timed[way].seconds,
                                              strict=True)] for way in ("batched", "single"))
    b, s = statistics.median(batched), statistics.median(single)
    print(f"batched (batch {args.batch}): median {b:8.1f} tok/s  "
          f"[{', '.join(f'{x:.0f}' for x in batched)}]")
    print(f"one at a time:      median {s:8.1f} tok/s  "
          f"[{', '.join(f'{x:.0f}' for x in single)}]")
    print(f"ratio={b / s:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
