"""Checkpoint folders without MLflow: manifest, content hash, verification, the seeds' score."""

from __future__ import annotations

import json

import pytest

from artifacts.checkpoints import (
    CheckpointCorruptError,
    checkpoint_score,
    verify_checkpoint_dir,
    write_checkpoint_dir,
)
from artifacts.convert import ArtifactError

METRICS = {"generator_reward": 0.5, "test_validity": 1.0, "discriminator_reward": 0.1}


@pytest.fixture()
def adapter_dir(tmp_path):
    """A stand-in adapter folder (the MLflow tests use a real peft adapter)."""
    folder = tmp_path / "adapter-src"
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"r": 4}))
    (folder / "adapter_model.safetensors").write_bytes(b"\x00weights" * 100)
    return folder


def test_score_is_the_seeds_formula():
    assert checkpoint_score(METRICS) == pytest.approx(0.7 * 0.5 + 0.3 * 1.0)
    with pytest.raises(ValueError, match="'test_validity'"):
        checkpoint_score({"generator_reward": 1.0})


def test_score_is_held_out_when_the_stage_was_evaluated():
    """The held-out figures, when there, decide: not the training step's reward."""
    heldout = {**METRICS, "heldout_pass_at_1": 0.25, "heldout_test_validity": 0.5}
    assert checkpoint_score(heldout) == pytest.approx(0.7 * 0.25 + 0.3 * 0.5)
    assert checkpoint_score(heldout) != checkpoint_score(METRICS)
    with pytest.raises(ValueError, match="'heldout_test_validity'"):
        checkpoint_score({**METRICS, "heldout_pass_at_1": 0.25})


def test_write_and_verify(tmp_path, adapter_dir):
    info = write_checkpoint_dir(tmp_path / "a", adapter_dir, role="generator", step=4, stage=2,
                                metrics=METRICS, extra={"note": "x"})
    again = write_checkpoint_dir(tmp_path / "b", adapter_dir, role="generator", step=4, stage=2,
                                 metrics=METRICS)
    assert info.content_hash == again.content_hash  # content, not time or place
    assert verify_checkpoint_dir(tmp_path / "a") == info
    assert info.adapter_version.startswith("generator-s000004-")
    with pytest.raises(ArtifactError, match="already holds a checkpoint"):
        write_checkpoint_dir(tmp_path / "a", adapter_dir, role="generator", step=4, stage=2,
                             metrics=METRICS)
    with pytest.raises(ArtifactError, match="no adapter_config.json"):
        write_checkpoint_dir(tmp_path / "c", tmp_path, role="generator", step=4, stage=2,
                             metrics=METRICS)


def test_verify_names_the_damaged_file(tmp_path, adapter_dir):
    folder = tmp_path / "ck"
    write_checkpoint_dir(folder, adapter_dir, role="discriminator", step=1, stage=1,
                         metrics=METRICS)
    (folder / "adapter" / "adapter_config.json").write_text("{}")
    with pytest.raises(CheckpointCorruptError, match="adapter_config.json: content differs"):
        verify_checkpoint_dir(folder)
    (folder / "adapter" / "adapter_config.json").unlink()
    with pytest.raises(CheckpointCorruptError, match="adapter_config.json: missing"):
        verify_checkpoint_dir(folder)
    (folder / "checkpoint.json").unlink()
    with pytest.raises(CheckpointCorruptError, match="checkpoint.json: missing"):
        verify_checkpoint_dir(folder)
