"""Random-weight models of real architectures, built locally from a config (no download).

The benchmarks that measure what a real model costs (``benchmarks/rollout_engine.py``,
``benchmarks/real_shape.py``) need its exact shape, not its weights: layers, widths, heads and
the MLP are copied from the published ``config.json`` of each model below. The vocabulary is the
one difference: these models use the project's tokenizer (``models.tiny``, 2,048 tokens), so
their embedding and output matrices are ~1% of the real ones (151,936 tokens); everything
between them is the real size.

    python -m models.shapes --shape qwen2.5-coder-1.5b --out .cache/shape-qwen2.5-coder-1.5b
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

SHAPES: dict[str, dict] = {
    # Qwen/Qwen2.5-0.5B(-Instruct) config.json
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2,
                         max_position_embeddings=32768, rope_theta=1_000_000.0,
                         rms_norm_eps=1e-6, tie_word_embeddings=True),
    # Qwen/Qwen2.5-Coder-1.5B-Instruct config.json: configs/qwen2.5-coder-1.5b.yaml's model
    "qwen2.5-coder-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                               num_attention_heads=12, num_key_value_heads=2,
                               max_position_embeddings=32768, rope_theta=1_000_000.0,
                               rms_norm_eps=1e-6, tie_word_embeddings=True),
}


def build_shaped_model(out: str | Path, shape: str, seed: int = 0) -> Path:
    """Save a random Qwen2 model of ``shape`` (a :data:`SHAPES` key) with the project's
    tokenizer to ``out`` (float32, ``save_pretrained``); returns ``out``. Reuses a folder that
    already holds this shape."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from models.tiny import TinySpec, build_tokenizer

    out = Path(out)
    marker = out / "shape.json"
    if marker.exists() and json.loads(marker.read_text()).get("shape") == shape:
        return out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(TinySpec().vocab_size)
    config = Qwen2Config(vocab_size=len(tokenizer), eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
                         **SHAPES[shape])
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # models.tiny.is_tiny_model_dir: load the tokenizer as the fast class it was saved as
    (out / "tiny_spec.json").write_text(json.dumps(TinySpec().__dict__, indent=2))
    n = sum(p.numel() for p in model.parameters())
    marker.write_text(json.dumps({"shape": shape, "parameters": n, **SHAPES[shape]}, indent=2))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--out", required=True, help="folder to write the model into")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    build_shaped_model(args.out, args.shape)
    print(f"built a random {args.shape} model in {args.out} "
          f"({time.perf_counter() - start:.1f}s)")
    return 0


if __name__ == "__main__":
    from configs.environment import apply

    apply()  # the Makefile's environment, as every entry point sets it
    raise SystemExit(main())
