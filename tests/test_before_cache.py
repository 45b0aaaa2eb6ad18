"""The cache of the held-out evaluation before training (``lifecycle.beforecache``): its key
changes with everything the figures are a function of, and only with that; entries round-trip
and a damaged one is evaluated again."""

from __future__ import annotations

import pytest
import torch

from configs import load_config
from lifecycle import beforecache
from problems import load_problems

ADAPTERS = {"generator": "a" * 16, "discriminator": "b" * 16}


@pytest.fixture
def parts(tiny_model_dir):
    cfg = load_config("configs/minimal.yaml", [f"model.generator={tiny_model_dir}"])
    return cfg, load_problems("family:piecewise:heldout", limit=2)


def key(cfg, problems, adapters=ADAPTERS, device="cpu"):
    return beforecache.before_key(cfg, adapters, problems, device)


def test_the_key_is_stable_and_ignores_where_results_go(parts, tiny_model_dir):
    cfg, problems = parts
    assert key(cfg, problems) == key(cfg, problems)
    moved = load_config("configs/minimal.yaml", [
        f"model.generator={tiny_model_dir}", "artifacts.root=/elsewhere",
        "tracking.tracking_uri=sqlite:////elsewhere/mlflow.db"])
    assert key(moved, problems) == key(cfg, problems)


def test_the_key_changes_with_each_input(parts, tiny_model_dir, monkeypatch):
    cfg, problems = parts
    base = key(cfg, problems)
    other_cfg = load_config("configs/minimal.yaml", [f"model.generator={tiny_model_dir}",
                                                     "sampling.temperature=0.9"])
    variants = {
        "adapter": key(cfg, problems, {**ADAPTERS, "discriminator": "c" * 16}),
        "config": key(other_cfg, problems),
        "problems": key(cfg, problems[:1]),
        "device": key(cfg, problems, device="cuda:0"),
    }
    monkeypatch.setattr(torch, "get_num_threads", lambda: 7)
    variants["threads"] = key(cfg, problems)
    assert all(v != base for v in variants.values()), variants
    assert len(set(variants.values())) == len(variants)


def test_entries_round_trip_and_a_damaged_one_is_evaluated_again(tmp_path, monkeypatch,
                                                                 capsys):
    monkeypatch.setattr(beforecache, "CACHE_ROOT", tmp_path / "heldout")
    assert beforecache.load("k1") is None
    wrong = [{"problem_id": "p", "code": "def f(): pass"}]
    path = beforecache.save("k1", {"pass_at_1": 0.25}, wrong, "run-a")
    assert beforecache.load("k1") == {"metrics": {"pass_at_1": 0.25}, "wrong": wrong,
                                      "saved_by": "run-a"}
    assert [p.name for p in path.parent.iterdir()] == ["k1.json"]  # no temp file left
    path.write_text('{"metrics": {"pass_at_1": 0.2')  # cut short
    assert beforecache.load("k1") is None
    assert "damaged" in capsys.readouterr().out


def test_a_base_folder_is_hashed_again_when_a_file_changes(tmp_path):
    """The base model's digest is kept per process (both caches' keys hash it) only while no
    file under it changes size or modification time."""
    import os

    from lifecycle.digests import files_digest, folder_digest

    (tmp_path / "config.json").write_text('{"a": 1}')
    first = folder_digest(tmp_path)
    assert first == files_digest([tmp_path / "config.json"], tmp_path) == folder_digest(tmp_path)
    (tmp_path / "config.json").write_text('{"a": 2}')  # same size: the mtime tells
    stat = (tmp_path / "config.json").stat()
    os.utime(tmp_path / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert folder_digest(tmp_path) != first
    (tmp_path / "weights.bin").write_bytes(b"\0")  # a new file
    assert folder_digest(tmp_path) == files_digest(
        [tmp_path / "config.json", tmp_path / "weights.bin"], tmp_path)
