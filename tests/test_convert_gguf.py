"""GGUF -> safetensors conversion (models.convert_gguf) on a small Llama GGUF file that the test
writes itself with the ``gguf`` package, so the suite needs no 93 MB download: the folder's
logits equal the GGUF-loaded model's bit for bit, its tokenizer gives the same ids and keeps the
chat template, an existing folder is never written over, and a cut or missing file is refused
by name with the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from configs.errors import ConfigError  # noqa: E402
from configs.schema import ModelConfig  # noqa: E402
from models.convert_gguf import (  # noqa: E402
    MARKER,
    ConversionError,
    convert,
    is_converted,
    main,
    verify_folder,
    verify_models,
)
from models.tiny import CHAT_TEMPLATE, build_tokenizer  # noqa: E402

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN = 64, 2, 4, 2, 128


def write_llama_gguf(path, seed: int = 0) -> None:
    """A random two-layer Llama model with a byte-level BPE tokenizer and a chat template, as
    llama.cpp lays one out (token embeddings quantized to Q8_0 as in SmolLM2's file)."""
    tok = json.loads(build_tokenizer(320, extra_texts=["def f(x):\n    return x\n"])
                     ._tokenizer.to_str())
    vocab = sorted(tok["model"]["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    special = {a["content"]: a["id"] for a in tok["added_tokens"]}
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in special else 1 for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(special["<|im_start|>"])
    w.add_eos_token_id(special["<|im_end|>"])
    w.add_pad_token_id(special["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def tensor(name: str, *shape: int, quant: bool = False) -> None:
        data = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if quant:
            q = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, data)

    tensor("token_embd.weight", len(tokens), HIDDEN, quant=True)
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, np.float32))
        tensor(f"blk.{i}.attn_q.weight", HIDDEN, HIDDEN)
        tensor(f"blk.{i}.attn_k.weight", HIDDEN * KV_HEADS // HEADS, HIDDEN)
        tensor(f"blk.{i}.attn_v.weight", HIDDEN * KV_HEADS // HEADS, HIDDEN)
        tensor(f"blk.{i}.attn_output.weight", HIDDEN, HIDDEN)
        tensor(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    source = root / "tiny-llama.gguf"
    write_llama_gguf(source)
    out = root / "tiny-llama"
    report = convert(source, out)
    return source, out, report


def test_the_folder_gives_the_gguf_models_logits_bit_for_bit(converted):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, out, report = converted
    assert report.max_logit_diff == 0.0
    gguf_tok = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name,
                                                      dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(out))
    model = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    text = "<|im_start|>user\ndef f(x): return x<|im_end|>\n"
    ids = gguf_tok(text, add_special_tokens=False)["input_ids"]
    assert tok(text, add_special_tokens=False)["input_ids"] == ids
    with torch.no_grad():
        a = model(torch.tensor([ids])).logits
        b = gguf_model(torch.tensor([ids])).logits
    assert torch.equal(a, b)
    assert report.parameters == sum(p.numel() for p in model.parameters())
    messages = [{"role": "user", "content": "hi"}]
    assert (tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_the_record_names_the_source_and_every_file(converted):
    source, out, report = converted
    record = json.loads((out / MARKER).read_text())
    assert record["source"] == str(source) and len(record["source_sha256"]) == 64
    written = {p.name for p in out.iterdir()} - {MARKER}
    assert set(record["files"]) == written and "model.safetensors" in written
    verify_folder(out, hashes=True)


def test_an_existing_folder_is_never_written_over(converted, tmp_path):
    source, out, _ = converted
    before = (out / "model.safetensors").stat().st_mtime_ns
    with pytest.raises(ConversionError, match="already exists"):
        convert(source, out)
    assert (out / "model.safetensors").stat().st_mtime_ns == before
    # the command line: an intact conversion is kept and said so
    assert main(["--gguf", str(source), "--out", str(out)]) == 0
    assert (out / "model.safetensors").stat().st_mtime_ns == before


def test_a_file_that_is_not_gguf_is_refused_and_nothing_is_written(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"not a model")
    with pytest.raises(ConversionError, match="could not read it as a GGUF model"):
        convert(bogus, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["model.gguf"]  # no temporary folder left


@pytest.mark.parametrize("damage", ["truncate", "delete", "marker"])
def test_a_cut_or_missing_file_is_an_error_naming_the_fix(converted, tmp_path, damage):
    import shutil

    _, out, _ = converted
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    if damage == "truncate":
        with open(copy / "model.safetensors", "r+b") as fh:
            fh.truncate(1000)
    elif damage == "delete":
        (copy / "tokenizer.json").unlink()
    else:
        (copy / MARKER).write_text("{not json")
    assert is_converted(copy)
    with pytest.raises(ConversionError, match="make smollm2"):
        verify_models([str(copy)])
    # and the one-line error every entry point prints for configuration
    with pytest.raises(ConfigError):
        verify_folder(copy)


def test_an_edited_file_of_the_same_size_fails_the_hash_check(converted, tmp_path):
    import shutil

    _, out, _ = converted
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (copy / "model.safetensors").write_bytes(bytes(data))
    verify_folder(copy)  # sizes only: what every load checks
    with pytest.raises(ConversionError, match="corrupt or edited"):
        verify_folder(copy, hashes=True)
    assert main(["--verify", str(copy)]) == 1


def test_a_missing_smollm2_folder_names_the_make_target(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="`make smollm2` builds it"):
        ModelConfig(generator=".cache/smollm2-135m-instruct").check_folders()
