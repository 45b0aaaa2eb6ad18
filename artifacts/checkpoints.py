"""LoRA checkpoint folders with a content manifest (no MLflow here; ``artifacts.tracking`` logs
these folders as run artifacts and lists them back).

A checkpoint folder::

    adapter/              # PeftModel.save_pretrained output (adapter_config.json, weights)
    optimizer.pt          # optional: torch.save(optimizer.state_dict()) for resuming
    checkpoint.json       # role, step, stage, metrics, score, sha256 of every file, content hash

``verify_checkpoint_dir`` re-hashes everything and raises ``CheckpointCorruptError`` naming the
first missing or changed file, so a damaged checkpoint is refused before any weight is loaded.
The score (``checkpoint_score``) is ``0.7 * generator_reward + 0.3 * test_validity``: the code
weighted above the tests.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from artifacts.convert import ArtifactError

CHECKPOINT_FORMAT = "artifacts.checkpoint/1"
MANIFEST_NAME = "checkpoint.json"
ADAPTER_DIR = "adapter"
OPTIMIZER_FILE = "optimizer.pt"
SCORE_WEIGHTS = {"generator_reward": 0.7, "test_validity": 0.3}
HELDOUT_SCORE_WEIGHTS = {"heldout_pass_at_1": 0.7, "heldout_test_validity": 0.3}


class CheckpointCorruptError(ArtifactError):
    """A checkpoint's files are missing or differ from its manifest (names the file)."""


def checkpoint_score(metrics: Mapping[str, float]) -> float:
    """The score that picks the best checkpoint and the ``champion``: the code weighted above
    the tests (0.7 code, 0.3 tests), on the held-out evaluation of the stage when the run has
    one (``heldout_pass_at_1``, ``heldout_test_validity``: problems never trained on), else on
    the stage's last training step (``generator_reward``, ``test_validity``), which rewards
    what the step happened to sample rather than what generalises.

    >>> checkpoint_score({"generator_reward": 0.5, "test_validity": 1.0})
    0.65
    >>> checkpoint_score({"generator_reward": 0.9, "test_validity": 1.0,
    ...                   "heldout_pass_at_1": 0.25, "heldout_test_validity": 0.5})
    0.325
    """
    weights = HELDOUT_SCORE_WEIGHTS if "heldout_pass_at_1" in metrics else SCORE_WEIGHTS
    missing = [k for k in weights if k not in metrics]
    if missing:
        formula = " + ".join(f"{w} * {k}" for k, w in weights.items())
        raise ValueError(f"checkpoint metrics need {missing[0]!r} for the score "
                         f"({formula}); got {sorted(metrics)}")
    return _weighted(metrics, weights)


def _weighted(metrics: Mapping[str, float], weights: Mapping[str, float]) -> float:
    return round(sum(w * float(metrics[k]) for k, w in weights.items()), 12)


def score_basis(metrics: Mapping[str, float]) -> str:
    """What :func:`checkpoint_score` scored, in words: the held-out evaluation or the stage's
    last training step, with the weights.

    >>> score_basis({"generator_reward": 0.5, "test_validity": 1.0})
    'the last training step: 0.7 generator_reward + 0.3 test_validity'
    """
    held_out = "heldout_pass_at_1" in metrics
    weights = HELDOUT_SCORE_WEIGHTS if held_out else SCORE_WEIGHTS
    where = "held-out problems" if held_out else "the last training step"
    return f"{where}: " + " + ".join(f"{w} {k}" for k, w in weights.items())


def training_score(metrics: Mapping[str, float]) -> float | None:
    """The training-step score (``SCORE_WEIGHTS``) where the metrics have it: the champion's
    tie-break between versions of equal held-out score.

    >>> training_score({"generator_reward": 0.5, "test_validity": 1.0}), training_score({})
    (0.65, None)
    """
    if not all(k in metrics for k in SCORE_WEIGHTS):
        return None
    return _weighted(metrics, SCORE_WEIGHTS)


@dataclass(frozen=True)
class CheckpointInfo:
    """What ``checkpoint.json`` says about one checkpoint (without the per-file hashes)."""

    role: str
    step: int
    stage: int
    metrics: dict[str, float]
    score: float
    content_hash: str
    created_at: float
    run_id: str | None = None
    artifact_path: str | None = None
    has_optimizer: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def adapter_version(self) -> str:
        """Short id for the ``adapter_version`` columns of the Parquet tables."""
        return f"{self.role}-s{self.step:06d}-{self.content_hash[:12]}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MB blocks (checkpoints and resume states)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def hash_files(folder: Path) -> dict[str, str]:
    """sha256 of every file below ``folder`` except the manifest, keyed by relative path."""
    return {p.relative_to(folder).as_posix(): sha256_file(p)
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST_NAME}


def content_hash(files: Mapping[str, str]) -> str:
    """One hash over (path, sha256) pairs: equal for equal checkpoints, wherever stored."""
    blob = "\n".join(f"{k}\t{files[k]}" for k in sorted(files)).encode()
    return hashlib.sha256(blob).hexdigest()


def write_checkpoint_dir(out: Path, adapter: Any, *, role: str, step: int, stage: int,
                         metrics: Mapping[str, float], optimizer_state: Any = None,
                         extra: Mapping[str, Any] | None = None) -> CheckpointInfo:
    """Fill ``out`` with a checkpoint: ``adapter`` is a PeftModel (saved with
    ``save_pretrained``) or the path of an adapter folder (copied); the manifest comes last."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if (out / MANIFEST_NAME).exists():
        raise ArtifactError(f"{out}: already holds a checkpoint")
    if hasattr(adapter, "save_pretrained"):
        adapter.save_pretrained(out / ADAPTER_DIR)
    else:
        src = Path(adapter)
        if not (src / "adapter_config.json").is_file():
            raise ArtifactError(f"{src}: not a LoRA adapter folder (no adapter_config.json)")
        shutil.copytree(src, out / ADAPTER_DIR)
    if optimizer_state is not None:
        import torch  # only here: the store itself does not need torch

        torch.save(optimizer_state, out / OPTIMIZER_FILE)
    files = hash_files(out)
    info = CheckpointInfo(role=role, step=int(step), stage=int(stage),
                          metrics={k: float(v) for k, v in metrics.items()},
                          score=checkpoint_score(metrics), content_hash=content_hash(files),
                          created_at=time.time(), has_optimizer=optimizer_state is not None,
                          extra=dict(extra or {}))
    manifest = {"format": CHECKPOINT_FORMAT, **info.to_dict(), "files": files}
    (out / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return info


def read_checkpoint_info(path: Path, **override: Any) -> CheckpointInfo:
    """Parse ``checkpoint.json`` (``path`` is the file or its folder)."""
    path = Path(path)
    path = path / MANIFEST_NAME if path.is_dir() else path
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointCorruptError(f"{path}: missing (incomplete or not a checkpoint)") from None
    except ValueError as exc:
        raise CheckpointCorruptError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointCorruptError(f"{path}: not a {CHECKPOINT_FORMAT} manifest")
    keys = {f for f in CheckpointInfo.__dataclass_fields__}
    return CheckpointInfo(**{**{k: v for k, v in data.items() if k in keys}, **override})


def verify_checkpoint_dir(folder: Path) -> CheckpointInfo:
    """Check every file against the manifest; raise ``CheckpointCorruptError`` naming the first
    missing or changed file. Returns the checkpoint's info when all is well."""
    folder = Path(folder)
    info = read_checkpoint_info(folder)
    listed = json.loads((folder / MANIFEST_NAME).read_text())["files"]
    if not listed or not any(k.startswith(f"{ADAPTER_DIR}/") for k in listed):
        raise CheckpointCorruptError(f"{folder / MANIFEST_NAME}: lists no adapter files")
    for rel, digest in sorted(listed.items()):
        path = folder / rel
        if not path.is_file():
            raise CheckpointCorruptError(f"{path}: missing (listed in {MANIFEST_NAME})")
        if sha256_file(path) != digest:
            raise CheckpointCorruptError(f"{path}: content differs from {MANIFEST_NAME} "
                                         "(sha256 mismatch)")
    if content_hash(listed) != info.content_hash:
        raise CheckpointCorruptError(f"{folder / MANIFEST_NAME}: content_hash does not match "
                                     "its file list")
    return info
