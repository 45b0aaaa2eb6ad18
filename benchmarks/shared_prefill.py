"""Sampling a step's chains with each group's prompt prefilled once, against every row
prefilled on its own (``generate(..., share_prefill=False)``), on the tiny model.

    .venv/bin/python benchmarks/shared_prefill.py [--problems 8] [--samples 4] [--tokens 27]

The prompts are the discriminator's at chain stage 5 on the ``guards`` family (the problem and
four earlier stages of text: ~450-570 tokens, as in ``benchmarks/learning.py``'s runs), each
held by ``--samples`` rows, sampled in chunks of 16 with ``--tokens`` new tokens forced (27:
the discriminator's mean output there). Both ways must sample the same tokens with the same
log-probs; the benchmark stops if they do not. Prints the median of ``--repeats`` interleaved
runs of each; the last line is ``speedup=<per-row seconds over shared seconds>``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

import torch  # noqa: E402

from benchmarks.interleave import interleaved  # noqa: E402
from configs.schema import LoraConfig, ModelConfig, SamplingConfig  # noqa: E402
from models.generation import generate  # noqa: E402
from models.policy import Policies  # noqa: E402
from models.prompts import discriminator_prompt  # noqa: E402
from models.tiny import build_tiny_model  # noqa: E402
from problems.loaders import load_problems  # noqa: E402

# Earlier stages' text of the length the warm-started generator writes (19-23 tokens a stage).
STAGES = ["Use the thresholds in order and return the matching value.",
          "1. check x below the low bound 2. check the high bound 3. else scale x",
          "if x < lo: return c; if x >= hi: return d; return x * a + b",
          "x is an int; the bounds are checked before the scale; lo < hi always holds",
          "def pick(x):\n    if x < 0:\n        return 5\n    return x * 2 + 1"]


def stage5_prompts(folder: Path, problems: int, samples: int) -> tuple[Any, Any, list]:
    """A tiny random model built in ``folder`` (its generator-role model), its tokenizer, and
    the discriminator's stage-5 prompts of the first ``problems`` guards train problems, each
    held by ``samples`` rows."""
    policies = Policies.load(ModelConfig(generator=str(build_tiny_model(folder / "m"))),
                             LoraConfig())
    model, tokenizer = policies.model_for("generator"), policies.tokenizer
    prompts = [discriminator_prompt(tokenizer, p, 5, STAGES, 1024).ids
               for p in load_problems("family:guards:train")[:problems] for _ in range(samples)]
    return model, tokenizer, prompts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--samples", type=int, default=4, help="rows holding each prompt")
    parser.add_argument("--tokens", type=int, default=27)
    parser.add_argument("--batch", type=int, default=16, help="rows per sampling chunk")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as the runs: one intra-op thread (configs/tiny.yaml)

    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer, prompts = stage5_prompts(Path(tmp), args.problems, args.samples)
        sampling = SamplingConfig(max_new_tokens=args.tokens, batch_size=args.batch,
                                  temperature=0.5, seed=0)
        print(f"{args.problems} problems x {args.samples} rows, prompt tokens "
              f"{min(map(len, prompts))}-{max(map(len, prompts))}, {args.tokens} new tokens, "
              f"chunks of {args.batch}")

        def sample(share: bool):
            out = generate(model, tokenizer, prompts, sampling, min_new_tokens=args.tokens,
                           share_prefill=share).generations
            return [(g.response_ids, g.logprobs) for g in out]

        sample(True)  # warm-up: first-call allocations
        timed = interleaved({"shared": lambda: sample(True), "each": lambda: sample(False)},
                            args.repeats)
        if timed["shared"].results != timed["each"].results:
            print("the two ways sampled different tokens or log-probs", file=sys.stderr)
            return 1
    s, e = timed["shared"].median, timed["each"].median
    print(f"shared prefill:  median {s:.3f} s  {timed['shared'].listing()}")
    print(f"every row:       median {e:.3f} s  {timed['each'].listing()}")
    print(f"speedup={e / s:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
