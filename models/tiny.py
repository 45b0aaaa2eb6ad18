"""Build a tiny, random model of a real architecture (Qwen2) plus a locally trained tokenizer.

It is the embedded default of ``configs/tiny.yaml`` and of the tests: nothing is downloaded.
The result is saved with ``save_pretrained`` and loaded back through the same
``from_pretrained`` path a real model (Qwen2.5-Coder) uses.

    python -m models.tiny --out .cache/tiny-qwen2

A run with ``model.tiny: true`` builds it on load in that folder only (``configs.sections``'s
``TINY_MODEL``, under the repository root); any other model path must already hold a model.

The tokenizer is a byte-level BPE trained on Python source that ships with the interpreter
(a fixed list of standard-library modules) plus this project's prompts and demo problems, so
code and stage texts tokenize into few tokens. It has a ChatML chat template like Qwen's.
"""

from __future__ import annotations

import argparse
import json
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Standard-library modules whose source trains the tokenizer: plain, idiomatic Python that
# exists on every CPython install, so the corpus needs no download.
CORPUS_MODULES = (
    "bisect.py", "heapq.py", "collections/__init__.py", "functools.py", "textwrap.py",
    "string.py", "fractions.py", "statistics.py", "difflib.py", "graphlib.py", "shlex.py",
    "random.py", "copy.py", "dataclasses.py", "enum.py", "operator.py",
)


@dataclass(frozen=True)
class TinySpec:
    """Shape of the tiny model. Small enough that a PPO step takes well under a second on CPU,
    large enough (two layers, grouped-query attention) to exercise the real Qwen2 code path,
    and a head size (``hidden_size / num_heads`` = 32) both engines run."""

    vocab_size: int = 2048
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int = 1
    """Two query heads sharing one KV head: head_dim 32, the smallest vLLM's CPU attention
    accepts (``sampling.engine=vllm``), and still grouped-query attention."""
    intermediate_size: int = 128
    max_position_embeddings: int = 4096
    output_std: float = 0.3
    """Std of the (untied) output head. Qwen2's default 0.02 caps every logit near
    ``|h| * |w| = sqrt(hidden) * 0.02 * sqrt(hidden) ~ 1.3`` after the final RMSNorm, so no
    adapter could ever make the output distribution peaked: a tiny model would never learn.
    Untied, because a large tied embedding also sits in the residual stream and makes the
    model repeat its input token with probability ~1."""
    seed: int = 0


def _corpus(extra_texts: list[str]) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [(stdlib / name).read_text(encoding="utf-8", errors="replace")
             for name in CORPUS_MODULES if (stdlib / name).exists()]
    return texts + extra_texts


def _project_texts() -> list[str]:
    """Demo problems (descriptions, references, tests): the text the tiny model sees most."""
    demo = Path(__file__).resolve().parent.parent / "problems" / "demo_problems.json"
    if not demo.exists():
        return []
    rows = json.loads(demo.read_text())
    rows = rows["problems"] if isinstance(rows, dict) else rows
    out = []
    for row in rows:
        out.append(row.get("description", ""))
        out.append(row.get("reference_solution", ""))
        out.extend(str(t) for t in row.get("baseline_tests", []))
    return out


def build_tokenizer(vocab_size: int, extra_texts: list[str] | None = None):
    """Train a byte-level BPE tokenizer locally and wrap it as a transformers fast tokenizer."""
    # deferred: models.policy imports this module, and transformers loads while flows.train's
    # Prefect server starts (see models.policy); `--help` answers at once
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(extra_texts if extra_texts is not None else _project_texts()),
                            trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
        padding_side="left",
    )


def build_tiny_model(out: str | Path, spec: TinySpec = TinySpec()) -> Path:
    """Build tokenizer and random Qwen2 model and save both to ``out``; returns the path."""
    # deferred: see build_tokenizer
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(spec.vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        model.get_output_embeddings().weight.normal_(0.0, spec.output_std)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "tiny_spec.json").write_text(json.dumps(spec.__dict__, indent=2))
    return out


def is_tiny_model_dir(path: str | Path) -> bool:
    """True for a folder written by :func:`build_tiny_model` (its tokenizer needs the fast
    class: ``AutoTokenizer`` would swap in ``Qwen2Tokenizer`` and change token ids)."""
    return (Path(path) / "tiny_spec.json").exists()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder to write the model into")
    parser.add_argument("--force", action="store_true", help="rebuild even if it exists")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if (out / "config.json").exists() and not args.force:
        print(f"tiny model already at {out} (use --force to rebuild)")
        return 0
    start = time.perf_counter()
    build_tiny_model(out)
    print(f"built tiny Qwen2 model and tokenizer in {out} ({time.perf_counter() - start:.1f}s)")
    return 0


if __name__ == "__main__":
    from configs.environment import apply

    apply()  # the Makefile's environment, as every entry point sets it
    raise SystemExit(main())
