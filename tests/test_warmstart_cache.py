"""The warm start's cache: a second run with the same inputs loads the same adapters; any input
that changes them changes the key; a damaged entry is fitted again."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # loads the tiny model a few times: ~20 s


def _context(tiny_model_dir, tmp_path, *sets):
    from configs import load_config
    from lifecycle.context import RunContext

    cfg = load_config(str(REPO / "configs/minimal.yaml"), [
        f"model.generator={tiny_model_dir}", f"artifacts.root={tmp_path / 'runs'}",
        "warm_start.enabled=true", "warm_start.steps=3", "warm_start.batch_size=2", *sets])
    return RunContext.open(cfg, "cache-test")


def test_a_cached_warm_start_is_reused_and_a_damaged_one_refitted(tiny_model_dir, tmp_path,
                                                                  monkeypatch, capsys):
    from tasks.warmstart import CACHE_ROOT, warm_start, warm_start_key

    monkeypatch.chdir(tmp_path)
    ctx = _context(tiny_model_dir, tmp_path)
    fresh = {r: s.version for r, s in ctx.roles.items()}
    stats = warm_start.fn(ctx)
    fitted = {r: s.version for r, s in ctx.roles.items()}
    assert fitted != fresh and "warm_start/generator_last_loss" in stats
    assert stats["warm_start/generator_steps"] == stats["warm_start/discriminator_steps"] == 3
    entry = CACHE_ROOT / warm_start_key(ctx)
    assert (entry / "manifest.json").is_file()
    assert "reused" not in capsys.readouterr().out

    again = _context(tiny_model_dir, tmp_path)
    assert warm_start_key(again) == warm_start_key(ctx)
    assert warm_start.fn(again) == stats
    assert {r: s.version for r, s in again.roles.items()} == fitted
    assert f"warm start: reused {entry}" in capsys.readouterr().out

    weights = entry / "generator" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    third = _context(tiny_model_dir, tmp_path)
    warm_start.fn(third)
    assert "is damaged" in capsys.readouterr().out
    assert {r: s.version for r, s in third.roles.items()} == fitted  # fitted again, same result

    for change in ("warm_start.steps=4", "warm_start.learning_rate=0.001", "sampling.seed=1",
                   "lora.r=4", "problems.limit=1", "warm_start.discriminator_steps=2"):
        assert warm_start_key(_context(tiny_model_dir, tmp_path, change)) != \
            warm_start_key(ctx), change


def test_the_discriminator_can_fit_for_fewer_steps(tiny_model_dir, tmp_path, monkeypatch):
    from tasks.warmstart import warm_start

    monkeypatch.chdir(tmp_path)
    stats = warm_start.fn(_context(tiny_model_dir, tmp_path, "warm_start.discriminator_steps=1"))
    assert stats["warm_start/generator_steps"] == 3
    assert stats["warm_start/discriminator_steps"] == 1
