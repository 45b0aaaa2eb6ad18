"""Fit a tiny base model's own weights on a problem source's ideal chains: a base that reads.

    python -m pipeline.basefit --model .cache/tiny-qwen2 --source family:guards:warmstart \\
        --out .cache/tiny-qwen2-guards [--steps 400]

Why. A real base (Qwen2.5-Coder) reads its prompt: pretraining taught it to attend to what a
problem says. The tiny model is random weights, and rank-8 adapters fitted on it learn to read
a ``guards`` problem's guard kinds late and at some seeds only (chance at 400 warm-start
steps, ``docs/training.md``, *A base that reads*), so the trained generator's held-out gain
was bounded by guessing. Fitting the base's full weights on the family's *ideal* chains
(``chain_targets(ideal=True)``: every guard, the boundary as described, each discriminator
stage's focus test; both roles' real stage prompts) gives it that footing in the same number
of steps. The adapters' warm start (``pipeline.warmstart``) then teaches the deliberately
flawed habits on top, which PPO has to unlearn: room on both sides, as before, with a base
that can read.

The result is a model folder like the one it came from (``from_pretrained`` loads it; the
tokenizer and ``tiny_spec.json`` are copied) plus ``base_fit.json``: what it was fitted on,
how, and the losses. Held-out data is never fitted: a family source that holds its
``heldout`` split (``family:guards:heldout``, or ``family:guards``: every split) is refused.
Deterministic for a given fit (one torch thread, seeded), so a benchmark's seeds stay
reproducible.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from configs.schema import sources_overlap
from configs.sections import MIN_CONTEXT_TOKENS

BASE_FIT_FILE = "base_fit.json"


@dataclass(frozen=True)
class BaseFit:
    """How a base is fitted."""

    source: str
    """The problems whose ideal chains it is fitted on (a warm-start split; never held out)."""
    steps: int = 400
    """Optimizer steps, each on ``batch_size`` (prompt, target) pairs drawn from both roles."""
    learning_rate: float = 0.002
    """AdamW learning rate on every weight (full fit: no adapter)."""
    batch_size: int = 8
    seed: int = 0
    limit: int | None = None
    """At most this many problems of ``source`` (None: all)."""
    max_context_tokens: int = 1024
    """The prompts' token budget: the runs' ``model.max_context_tokens`` (``configs/tiny.yaml``'s
    by default), so the base is fitted on the prompts the runs will render."""

    def __post_init__(self) -> None:
        parts = self.source.split(":")
        if parts[0] == "family" and len(parts) > 1 and sources_overlap(
                self.source, f"family:{parts[1]}:heldout"):
            raise ValueError(f"base fit source {self.source!r}: held-out problems are never "
                             f"trained on; fit on a warmstart split (family:{parts[1]}:"
                             "warmstart)")
        if self.steps < 1 or self.batch_size < 1 or self.learning_rate <= 0:
            raise ValueError(f"base fit: steps ({self.steps}) and batch_size "
                             f"({self.batch_size}) must be >= 1 and learning_rate "
                             f"({self.learning_rate}) > 0")
        if self.max_context_tokens < MIN_CONTEXT_TOKENS:  # model.max_context_tokens' floor
            raise ValueError(f"base fit: max_context_tokens ({self.max_context_tokens}) must "
                             f"be at least {MIN_CONTEXT_TOKENS}")


def fit_base(model_dir: str | Path, out: str | Path, fit: BaseFit,
             report: Callable[[int, float], None] | None = None) -> dict[str, object]:
    """Fit the model at ``model_dir`` (all weights) on ``fit.source``'s ideal chains and save
    it to ``out`` (which must not exist: nothing written is replaced). Returns the record also
    written to ``out/base_fit.json``. ``report(step, loss)`` as in ``supervised_steps``."""
    # deferred: the CLI's --help answers at once
    import torch
    from transformers import AutoModelForCausalLM

    from configs.names import ROLES
    from models.policy import load_tokenizer
    from pipeline.warmstart import supervised_steps, warm_start_examples
    from problems import load_problems

    model_dir, out = Path(model_dir), Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists; choose another --out or remove it")
    start = time.perf_counter()
    problems = load_problems(fit.source, limit=fit.limit)
    tokenizer = load_tokenizer(str(model_dir))
    examples = warm_start_examples(problems, tokenizer, fit.max_context_tokens, ideal=True)
    pairs = [pair for role in ROLES for pair in examples[role]]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same weights on any machine load (see the docstring)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(fit.seed)
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
            losses = supervised_steps(model, list(model.parameters()), pairs, steps=fit.steps,
                                      lr=fit.learning_rate, batch_size=fit.batch_size,
                                      pad_token_id=tokenizer.pad_token_id, seed=fit.seed,
                                      report=report)
    finally:
        torch.set_num_threads(threads)
    record = {**asdict(fit), "from": str(model_dir), "problems": len(problems),
              "examples": len(pairs), "first_loss": losses[0], "last_loss": losses[-1],
              "seconds": round(time.perf_counter() - start, 1)}
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(model_dir, tmp)  # tokenizer, tiny_spec.json, generation config
    model.save_pretrained(tmp)
    (tmp / BASE_FIT_FILE).write_text(json.dumps(record, indent=2))
    tmp.rename(out)
    return record


def fit_base_with_progress(model_dir: str | Path, out: str | Path,
                           fit: BaseFit) -> dict[str, object]:
    """:func:`fit_base` with a progress line per few seconds (the command line's and the
    learning benchmark's)."""
    from pipeline.progress import WorkProgress

    with WorkProgress("base fit", fit.steps, "steps") as progress:
        return fit_base(model_dir, out, fit,
                        report=lambda step, loss: progress.advance(1, f"loss {loss:.3f}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the base model folder to start from")
    parser.add_argument("--source", required=True,
                        help="problems to fit on, e.g. family:guards:warmstart")
    parser.add_argument("--out", required=True, help="folder to write (must not exist)")
    parser.add_argument("--steps", type=int, default=BaseFit.steps)
    parser.add_argument("--lr", type=float, default=BaseFit.learning_rate)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-context-tokens", type=int, default=BaseFit.max_context_tokens,
                        help="the prompts' token budget: the runs' model.max_context_tokens")
    args = parser.parse_args(argv)
    try:
        fit = BaseFit(source=args.source, steps=args.steps, learning_rate=args.lr,
                      limit=args.limit, seed=args.seed,
                      max_context_tokens=args.max_context_tokens)
        record = fit_base_with_progress(args.model, args.out, fit)
    except (ValueError, FileExistsError, FileNotFoundError) as exc:
        parser.exit(2, f"error: {exc}\n")
    print(f"fitted base saved to {args.out}: {record['problems']} problems, loss "
          f"{record['first_loss']:.3f} -> {record['last_loss']:.4f}, {record['seconds']} s")
    return 0


if __name__ == "__main__":
    from configs.environment import apply

    apply()  # the Makefile's environment, as every entry point sets it
    raise SystemExit(main())
