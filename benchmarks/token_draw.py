"""Drawing each sampled token by inverse CDF (``models.generation.draw``) against
``torch.multinomial(probs, 1)``, the draw sampling used before: the same distribution, a
different random stream.

    .venv/bin/python benchmarks/token_draw.py [--problems 4] [--samples 4] [--tokens 27]

Two measurements, each the median of ``--repeats`` interleaved runs of both ways:

- a step's sampling on the tiny model: the discriminator's stage-5 prompts of the ``guards``
  family (as ``benchmarks/shared_prefill.py``: ~450-570 tokens, each held by ``--samples``
  rows, chunks of 16, ``--tokens`` new tokens forced), the whole ``generate`` call timed;
- the draw alone, 16 rows of probabilities over Qwen2.5's vocabulary (151,936 entries), what
  one decode step of a real model pays for it on CPU.

The last line is ``speedup=<multinomial seconds over inverse-CDF seconds, the tiny model's
sampling>``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

import torch  # noqa: E402

import models.generation as generation  # noqa: E402
from benchmarks.interleave import Timed, interleaved  # noqa: E402
from benchmarks.shared_prefill import stage5_prompts  # noqa: E402
from configs.schema import SamplingConfig  # noqa: E402

QWEN_VOCAB = 151_936


def multinomial(probs: torch.Tensor) -> torch.Tensor:
    """The draw before ``draw``: one exponential variate per vocabulary entry on CPU."""
    return torch.multinomial(probs, num_samples=1).squeeze(1)


def report(label: str, times: dict[str, Timed]) -> float:
    for name, timed in times.items():
        print(f"{label} {name:12s} median {timed.median * 1e3:8.2f} ms  {timed.listing(1e3, 1)}")
    return times["multinomial"].median / times["inverse CDF"].median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4, help="rows holding each prompt")
    parser.add_argument("--tokens", type=int, default=27)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as the runs: one intra-op thread (configs/tiny.yaml)

    probs = torch.softmax(torch.randn(16, QWEN_VOCAB, generator=torch.Generator().manual_seed(0))
                          * 3, dim=-1)
    alone = report("qwen vocab, draw only:", interleaved(
        {"inverse CDF": lambda: generation.draw(probs), "multinomial": lambda: multinomial(probs)},
        args.repeats * 5))
    print(f"qwen vocab, draw only: {alone:.1f}x")

    with tempfile.TemporaryDirectory() as tmp:
        model, tokenizer, prompts = stage5_prompts(Path(tmp), args.problems, args.samples)
        sampling = SamplingConfig(max_new_tokens=args.tokens, batch_size=16, temperature=0.5,
                                  seed=0)
        print(f"tiny model: {args.problems} problems x {args.samples} rows, prompt tokens "
              f"{min(map(len, prompts))}-{max(map(len, prompts))}, {args.tokens} new tokens")
        inverse_cdf = generation.draw

        def sample_with(draw):
            def run():
                generation.draw = draw  # the one thing that differs between the two ways
                try:
                    generation.generate(model, tokenizer, prompts, sampling,
                                        min_new_tokens=args.tokens)
                finally:
                    generation.draw = inverse_cdf
            return run

        sample_with(inverse_cdf)()  # warm-up: first-call allocations
        speedup = report("tiny model, sampling:", interleaved(
            {"inverse CDF": sample_with(inverse_cdf), "multinomial": sample_with(multinomial)},
            args.repeats))
    print(f"speedup={speedup:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
