"""Peak memory of response log-probs plus backward: chunked (``models.logprobs``) against the
naive ``log_softmax(logits).gather``, on a random model of Qwen2.5-0.5B's shape.

    .venv/bin/python benchmarks/logprob_memory.py [--prompt 32] [--response 256] [--batch 8]

Each variant runs in a fresh subprocess (so one variant's freed memory cannot hide the other's
peak) and reports its peak resident set size (``ru_maxrss``), with glibc told to give freed
tensors back to the OS at once (``MALLOC_MMAP_THRESHOLD_``; ``--malloc-default`` turns that off).
The model is float32 with LoRA (r=8 on every attention and MLP projection, as PPO trains it):
the backward pass runs through all 24 layers into the adapters, the base weights take no
gradient. Decoder layers are activation-checkpointed in both variants unless
``--checkpointing off`` (without it every layer's activations dominate both peaks; their
size: docs/benchmarks.md). Both variants compute the same log-probs and LoRA gradients; the
parent prints the largest differences. Last line: ``ratio=<chunked peak over naive peak>``
(whole-process peaks, weights included). Goal <= 0.5.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

# Qwen2.5-0.5B's shape (random weights: no download).
QWEN_05B = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                num_key_value_heads=2, intermediate_size=4864, vocab_size=151936,
                max_position_embeddings=32768, tie_word_embeddings=True)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def child(args: argparse.Namespace) -> None:
    """Build the model, run one variant forward + backward, save results, print JSON."""
    # deferred: --help answers at once, and only the measuring child needs the model stack
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from models.logprobs import naive_response_logprobs, response_logprobs

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = Qwen2Config(**{**QWEN_05B, "num_hidden_layers": args.layers})
    model = Qwen2ForCausalLM(config)
    if args.checkpointing == "on":
        model.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": False})
    model = get_peft_model(model, LoraConfig(
        r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                            "gate_proj", "up_proj", "down_proj"]))
    with torch.no_grad():  # non-zero lora_B, so every adapter weight gets a gradient
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.01)
    # Training mode, because transformers checkpoints layers only when training (Qwen2 has no
    # dropout to make that non-deterministic; LoRA dropout is 0).
    model.train(args.checkpointing == "on")
    gen = torch.Generator().manual_seed(1)
    prompts = torch.randint(0, QWEN_05B["vocab_size"], (args.batch, args.prompt), generator=gen)
    responses = torch.randint(0, QWEN_05B["vocab_size"], (args.batch, args.response),
                              generator=gen)
    baseline = _rss_mb()
    start = time.perf_counter()
    kwargs = dict(temperature=0.7, pad_token_id=0)
    if args.variant == "naive":
        out = naive_response_logprobs(model, prompts.tolist(), responses.tolist(), **kwargs)
    else:
        out = response_logprobs(model, prompts.tolist(), responses.tolist(),
                                micro_batch_size=args.batch, chunk_tokens=args.chunk_tokens,
                                **kwargs)
    out.logprobs.sum().backward()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    torch.save({"logprobs": out.logprobs.detach(), "grads": grads}, args.save)
    print(json.dumps({"variant": args.variant, "peak_mb": peak, "baseline_mb": baseline,
                      "seconds": seconds, "n_grads": len(grads)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--response", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--chunk-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--checkpointing", choices=("on", "off"), default="on",
                        help="activation checkpointing of the decoder layers in both variants "
                             "(on, as configs/qwen2.5-coder-1.5b.yaml trains; off keeps every "
                             "layer's activations, which then dominate both peaks)")
    parser.add_argument("--malloc-default", action="store_true",
                        help="keep glibc's default mmap threshold (see below)")
    parser.add_argument("--variant", choices=("naive", "chunked"), help=argparse.SUPPRESS)
    parser.add_argument("--save", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.variant:
        child(args)
        return 0

    import torch  # deferred: --help and usage errors answer before torch loads

    print(f"Qwen2.5-0.5B shape, {args.layers} layers, float32, LoRA r=8, activation "
          f"checkpointing {args.checkpointing}, malloc "
          f"{'default' if args.malloc_default else 'mmap>=1MB'}; batch {args.batch} x "
          f"(prompt {args.prompt} + response {args.response}) tokens; "
          f"chunk {args.chunk_tokens} rows")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ("naive", "chunked"):
            save = str(Path(tmp) / f"{variant}.pt")
            cmd = [sys.executable, __file__, "--variant", variant, "--save", save,
                   *[f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                     if k not in ("variant", "save", "malloc_default")]]
            env = dict(os.environ)
            if not args.malloc_default:
                # Tensors of 1 MB and more get their own mmap, returned to the OS when freed:
                # the peak RSS then tracks live memory. With glibc's default dynamic threshold
                # freed tensor memory stays in the heap, fragments, and the per-layer
                # transients of checkpointed layers pile up as if they were live.
                env["MALLOC_MMAP_THRESHOLD_"] = str(2**20)
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            if proc.returncode != 0:
                print(proc.stdout, proc.stderr, sep="\n")
                raise SystemExit(f"{variant} failed with exit status {proc.returncode}")
            results[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
            results[variant]["data"] = torch.load(save)
            r = results[variant]
            print(f"{variant:8s} peak {r['peak_mb'] / 1024:6.2f} GB  (after model build "
                  f"{r['baseline_mb'] / 1024:5.2f} GB, log-probs+backward +"
                  f"{(r['peak_mb'] - r['baseline_mb']) / 1024:5.2f} GB)  {r['seconds']:6.1f} s")
    naive, ours = results["naive"]["data"], results["chunked"]["data"]
    lp_diff = (naive["logprobs"] - ours["logprobs"]).abs().max().item()
    grad_diff = max((naive["grads"][n] - g).abs().max().item() for n, g in ours["grads"].items())
    grad_scale = max(g.abs().max().item() for g in naive["grads"].values())
    assert naive["grads"].keys() == ours["grads"].keys()
    print(f"max abs diff: log-probs {lp_diff:.2e}, LoRA grads {grad_diff:.2e} "
          f"(largest grad {grad_scale:.2e}, {len(ours['grads'])} tensors)")
    extra = ((results["chunked"]["peak_mb"] - results["chunked"]["baseline_mb"])
             / (results["naive"]["peak_mb"] - results["naive"]["baseline_mb"]))
    print(f"increment ratio (log-probs+backward only)={extra:.2f}")
    print(f"ratio={results['chunked']['peak_mb'] / results['naive']['peak_mb']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
