"""Inference engine: model sources (base, adapter, checkpoint, registry), the chain end to end on
the tiny random model, execution, and the CLI loading a registry alias in a fresh process.

The tiny model writes gibberish: tests assert structure, timings and that nothing raises, never
what the text says.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from configs.schema import ModelConfig, SamplingConfig, TrackingConfig, TrainConfig
from problems import load_problems

REPO = Path(__file__).resolve().parent.parent


def tiny_cfg(model_dir: Path, **tracking) -> TrainConfig:
    # Shrunk for wall-clock time: 8 new tokens per stage, one thread (tiny model on 2 cores).
    return TrainConfig(
        model=ModelConfig(generator=str(model_dir), cpu_threads=1, max_context_tokens=1024),
        sampling=SamplingConfig(max_new_tokens=8, samples_per_problem=1, batch_size=8),
        tracking=TrackingConfig(**tracking))


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    from serving.inference import InferenceEngine

    return InferenceEngine.load(None, tiny_cfg(tiny_model_dir))


@pytest.fixture(scope="module")
def demo():
    return load_problems("demo", ids=["add", "is_even"])


def randomise(policies, role: str, seed: int) -> None:
    """Random LoRA B weights: a fresh adapter (B = 0) would equal the base model."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in policies.model_for(role).named_parameters():
            if "lora_B" in name and f".{role}." in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)


def test_model_specs_resolve_to_the_right_kind(tiny_model_dir, tmp_path):
    from serving.sources import resolve_source, sibling

    cfg = tiny_cfg(tiny_model_dir)
    base = resolve_source(str(tiny_model_dir), cfg, tmp_path)
    assert (base.kind, base.base_model, base.adapter_dir) == ("base", str(tiny_model_dir), None)
    assert resolve_source("Qwen/Qwen2.5-Coder-1.5B-Instruct", cfg, tmp_path).kind == "base"
    (tmp_path / "ad").mkdir()
    (tmp_path / "ad" / "adapter_config.json").write_text("{}")
    assert resolve_source(str(tmp_path / "ad"), cfg, tmp_path).kind == "adapter"
    assert sibling("tiny-generator@champion") == "tiny-discriminator@champion"
    assert sibling("models:/tiny-generator@candidate") == "tiny-discriminator@candidate"
    assert sibling("models:/tiny-generator/3") is None  # versions differ across roles


def test_chain_end_to_end_on_the_tiny_model(engine, demo):
    from serving.inference import format_result

    results = engine.solve_batch(demo, samples=2, with_tests=True)
    assert [(r.problem.id, r.sample_idx) for r in results] == [
        ("add", 0), ("add", 1), ("is_even", 0), ("is_even", 1)]
    for r in results:
        assert len(r.reasoning_chain) == 4 and all(isinstance(t, str) for t in r.reasoning_chain)
        assert isinstance(r.generated_code, str) and r.mode == "chain"
        assert len(r.stage_times) == 5 and all(t > 0 for t in r.stage_times)
        assert r.inference_time == pytest.approx(sum(r.stage_times))
        assert r.total_time >= r.inference_time
        assert len(r.test_texts) == 5 and len(r.test_times) == 5
        # no parsable code from a random model: then no execution, and a reason
        assert (r.execution_result is None) == (r.code is None)
        assert r.code is not None or r.code_reason
        text = format_result(r)
        assert "stage 4: constraints and invariants" in text and "--- time:" in text
        assert set(r.to_dict()) >= {"reasoning_chain", "code", "stage_times", "execution"}
    one = engine.solve_problem(demo[0], execute=False)
    assert one.execution_result is None and len(one.reasoning_chain) == 4
    assert len(engine.get_reasoning_chain(demo[0])) == 4
    direct = engine.generate(demo, 1, mode="direct")
    assert [len(r.stage_times) for r in direct] == [1, 1]
    assert all(r.reasoning_chain == [] for r in direct)


def test_execution_result_for_code(engine, demo):
    """The execution path, with known code: the reference passes, a wrong one fails."""
    good, bad = engine.generate(demo[:1], 2, mode="direct")
    good.code = demo[0].reference_solution
    bad.code = "def add(a, b):\n    return a - b\n"
    engine.execute([good, bad])
    assert good.execution_result.total == len(demo[0].baseline_tests) and good.passed
    assert not bad.passed and bad.execution_result.passed < bad.execution_result.total
    assert good.execution_time > 0 and good.executed_tests == list(demo[0].baseline_tests)


def test_adapter_and_checkpoint_folders_load(engine, tiny_model_dir, tmp_path):
    from artifacts.checkpoints import write_checkpoint_dir
    from serving.inference import InferenceEngine

    randomise(engine.policies, "generator", seed=1)
    version = engine.policies.adapter_version("generator")
    folder = engine.policies.save_adapter("generator", tmp_path / "adapter")
    cfg = tiny_cfg(tiny_model_dir)
    loaded = InferenceEngine.load(str(folder), cfg, discriminator=None)
    assert loaded.sources["generator"].kind == "adapter"
    assert loaded.policies.adapter_version("generator") == version
    write_checkpoint_dir(tmp_path / "ckpt", folder, role="generator", step=1, stage=1,
                         metrics={"generator_reward": 0.5, "test_validity": 0.5})
    from_ckpt = InferenceEngine.from_checkpoint(tmp_path / "ckpt", cfg)
    assert from_ckpt.sources["generator"].kind == "checkpoint"
    assert from_ckpt.policies.adapter_version("generator") == version


@pytest.fixture(scope="module")
def registry(tiny_model_dir, tmp_path_factory):
    """Generator and discriminator adapters registered in a temporary SQLite store."""
    from artifacts.tracking import Tracker
    from serving.inference import InferenceEngine
    from serving.registry import ModelRegistry

    tmp = tmp_path_factory.mktemp("registry")
    uri = f"sqlite:///{tmp}/mlflow.db"
    cfg = tiny_cfg(tiny_model_dir, tracking_uri=uri, experiment="rt")
    tracker = Tracker.from_config(cfg.tracking)
    run_id = tracker.start_run(cfg, commit="test")
    source = InferenceEngine.load(None, cfg)
    versions = {}
    for seed, role in enumerate(("generator", "discriminator"), start=3):
        randomise(source.policies, role, seed)
        versions[role] = source.policies.adapter_version(role)
        folder = source.policies.save_adapter(role, tmp / role)
        ckpt = tracker.save_checkpoint(run_id, role, step=1, stage=1, adapter=str(folder),
                                       metrics={"generator_reward": 0.5, "test_validity": 0.5})
        ModelRegistry(tracker).register_checkpoint(run_id, ckpt, f"rt-{role}",
                                                   base_model=str(tiny_model_dir))
    tracker.end_run(run_id)
    return cfg, tracker, versions


def test_registry_alias_loads_both_roles_verified(registry):
    from serving.inference import InferenceEngine

    cfg, tracker, versions = registry
    engine = InferenceEngine.load("rt-generator@champion", cfg, tracker=tracker)
    gen, disc = engine.sources["generator"], engine.sources["discriminator"]
    assert (gen.kind, gen.label) == ("registry", "rt-generator v1 (@champion)")
    assert disc is not None and disc.label == "rt-discriminator v1 (@champion)"
    for role, version in versions.items():
        assert engine.policies.adapter_version(role) == version
    by_version = InferenceEngine.load("models:/rt-generator/1", cfg, tracker=tracker)
    assert by_version.sources["discriminator"] is None  # no sibling for a version number
    assert by_version.policies.adapter_version("generator") == versions["generator"]
    with pytest.raises(ValueError, match="no version of 'rt-generator' has alias 'nope'"):
        InferenceEngine.load("rt-generator@nope", cfg, tracker=tracker)


def test_download_folder_lives_as_long_as_the_engine(registry, tmp_path, monkeypatch):
    """A registry version is downloaded into a temporary folder the engine may read again (its
    bundled base); it goes with the engine, and at once when loading fails."""
    import gc

    from serving.inference import InferenceEngine

    cfg, tracker, _ = registry
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    engine = InferenceEngine.load("rt-generator@champion", cfg, tracker=tracker)
    (folder,) = tmp_path.glob("inference-*")
    assert folder.name.startswith(f"inference-{os.getpid()}-")  # the next load's to sweep
    assert any(p.is_file() for p in folder.rglob("*"))  # the verified checkpoint
    del engine
    gc.collect()
    assert not folder.exists()
    with pytest.raises(ValueError, match="alias 'nope'"):
        InferenceEngine.load("rt-generator@nope", cfg, tracker=tracker)
    assert list(tmp_path.glob("inference-*")) == []


@pytest.mark.slow  # a fresh interpreter importing torch + transformers + mlflow: 10-30 s
def test_cli_infers_from_a_registry_alias_in_a_fresh_process(registry, tiny_model_dir,
                                                             tmp_path):
    cfg, _, _ = registry
    env = {**os.environ, "MLFLOW_TRACKING_URI": cfg.tracking.tracking_uri,
           "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "flows.infer", "--model", "rt-generator@champion",
           "--problems", "demo", "--ids", "add", "--config", str(REPO / "configs/tiny.yaml"),
           "--set", f"model.generator={tiny_model_dir}", "--set", "sampling.max_new_tokens=8"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "generator: rt-generator v1 (@champion)" in out
    assert "discriminator: rt-discriminator v1 (@champion)" in out
    assert "=== add (sample 0, chain) ===" in out
    for stage in ("informal reasoning", "structured reasoning", "pseudocode",
                  "constraints and invariants", "executable code"):
        assert f": {stage} (" in out
    assert "--- time: generation" in out
