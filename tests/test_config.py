"""Config loading: every shipped YAML loads, overrides apply, bad values are named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from configs import (
    ConfigError,
    TrainConfig,
    apply_overrides,
    config_hash,
    config_to_dict,
    flatten,
    load_config,
)
from configs.loader import config_from_dict, read_yaml

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_load(path: Path) -> None:
    cfg = load_config(path)
    assert isinstance(cfg, TrainConfig)
    assert cfg.name == path.stem


def test_shipped_configs_cover_the_three_scenarios() -> None:
    assert {p.name for p in CONFIGS} >= {"tiny.yaml", "minimal.yaml", "qwen2.5-coder-1.5b.yaml"}
    gpu = load_config("configs/qwen2.5-coder-1.5b.yaml")
    assert gpu.model.generator == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    assert (gpu.ppo.learning_rate, gpu.ppo.clip_epsilon) == (1e-5, 0.2)
    assert (gpu.schedule.n_discriminator_steps, gpu.schedule.n_generator_steps) == (10, 10)
    assert (gpu.sampling.max_new_tokens, gpu.sampling.temperature) == (512, 0.7)
    assert gpu.model.load_in_4bit and gpu.model.device == "cuda"
    minimal = load_config("configs/minimal.yaml")
    s = minimal.schedule
    assert (s.n_discriminator_steps, s.n_generator_steps, s.k_alternating) == (1, 1, 1)


def test_overrides_are_typed_and_nested() -> None:
    cfg = load_config("configs/tiny.yaml", ["ppo.learning_rate=1e-5", "schedule.stages=[2, 3]",
                                            "sandbox.workers=3", "problems.ids=[a, b]",
                                            "rewards.generator={shifted_pass_rate: 1.0}"])
    assert cfg.ppo.learning_rate == 1e-5
    assert cfg.schedule.stages == (2, 3)
    assert cfg.sandbox.workers == 3
    assert cfg.problems.ids == ("a", "b")
    assert cfg.rewards.generator == {"shifted_pass_rate": 1.0}
    # untouched sections keep the file's values
    assert cfg.sampling.max_new_tokens == load_config("configs/tiny.yaml").sampling.max_new_tokens


@pytest.mark.parametrize("override, fragment", [
    ("ppo.learning_rate=-1", "ppo.learning_rate=-1"),
    ("ppo.learning_rate=fast", "ppo.learning_rate='fast'"),
    ("ppo.clip=0.2", "unknown key ppo.clip"),
    ("nonsense.key=1", "unknown key nonsense"),
    ("schedule.stages=[3, 1]", "schedule.stages=(3, 1)"),
    ("schedule.stages=[6]", "schedule.stages=(6,)"),
    ("sampling.temperature=0", "sampling.temperature=0.0"),
    ("sandbox.isolation=docker", "sandbox.isolation='docker'"),
    ("model.layout=unified", "model.layout='unified'"),
    ("rewards.discriminator={vibes: 1.0}", "rewards.discriminator.vibes"),
    ("warm_start.enabled=maybe", "warm_start.enabled='maybe'"),
    ("schedule.problems_per_step=2.5", "schedule.problems_per_step=2.5"),
    ("novalue", "expected key=value"),
])
def test_bad_values_are_named(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config("configs/tiny.yaml", [override])
    assert fragment in str(info.value)
    # the override is named, never the file it was applied to
    assert str(info.value).startswith((f"--set {override}: ", f"override {override!r}"))


def test_bad_files_are_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="nope.yaml: config file not found"):
        load_config(missing)
    broken = tmp_path / "broken.yaml"
    broken.write_text("ppo: [1, 2\n")
    with pytest.raises(ConfigError, match="broken.yaml: not valid YAML"):
        load_config(broken)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="list.yaml: expected a mapping"):
        load_config(listy)


def test_frozen_and_hashable_identity() -> None:
    cfg = load_config("configs/tiny.yaml")
    with pytest.raises(AttributeError):
        cfg.ppo.learning_rate = 1.0  # type: ignore[misc]
    assert config_hash(cfg) == config_hash(load_config("configs/tiny.yaml"))
    assert config_hash(cfg) != config_hash(load_config("configs/tiny.yaml", ["ppo.epochs=2"]))
    flat = flatten(config_to_dict(cfg))
    assert flat["ppo.learning_rate"] == cfg.ppo.learning_rate
    assert flat["schedule.stages"] == [1, 2, 3, 4, 5]


def test_shared_layout_refuses_two_bases() -> None:
    with pytest.raises(ConfigError, match="model.discriminator"):
        load_config(None, ["model.discriminator=other/model"])
    cfg = load_config(None, ["model.discriminator=other/model", "model.layout=separate"])
    assert cfg.model.discriminator_base == "other/model"


def test_apply_overrides_is_the_path_load_config_takes() -> None:
    overrides = ["ppo.learning_rate=1e-5", "schedule.stages=[2, 3]",
                 "rewards.generator={shifted_pass_rate: 1.0}"]
    data = read_yaml("configs/tiny.yaml")
    before = config_to_dict(config_from_dict(data))
    merged = apply_overrides(data, overrides)
    assert config_to_dict(config_from_dict(data)) == before  # the input is left unchanged
    assert config_from_dict(merged) == load_config("configs/tiny.yaml", overrides)
    # a stored run's config (config_to_dict) takes the same overrides
    stored = config_to_dict(load_config("configs/tiny.yaml"))
    assert config_from_dict(apply_overrides(stored, ["ppo.epochs=3"])).ppo.epochs == 3
    assert apply_overrides(stored, []) == stored


@pytest.mark.parametrize("override, fragment", [
    ("ppo.clip=0.2", "unknown key ppo.clip"),
    ("ppo.learning_rate=-1", "ppo.learning_rate=-1"),
    ("schedule.stages=[6]", "schedule.stages=(6,)"),
    ("novalue", "expected key=value"),
])
def test_apply_overrides_checks_like_load_config(override: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        apply_overrides({}, [override])


def test_apply_overrides_refuses_a_single_string() -> None:
    with pytest.raises(TypeError, match="one string"):
        apply_overrides({}, "ppo.epochs=2")


def test_an_unknown_key_suggests_the_nearest_and_names_where_it_came_from(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config("configs/tiny.yaml", ["ppo.learnig_rate=1e-4"])
    assert str(info.value).startswith("--set ppo.learnig_rate=1e-4: unknown key "
                                      "ppo.learnig_rate (did you mean ppo.learning_rate?)")
    bad = tmp_path / "bad.yaml"
    bad.write_text("ppo:\n  epocs: 2\n")
    with pytest.raises(ConfigError) as info:  # the file's own mistake names the file
        load_config(bad, ["ppo.learning_rate=1e-4"])
    assert str(info.value).startswith(f"{bad}: unknown key ppo.epocs (did you mean ppo.epochs?)")
    with pytest.raises(ConfigError) as info:  # nothing near: no suggestion
        load_config(None, ["ppo.zzzzzz=1"])
    assert "did you mean" not in str(info.value)
    # among several overrides, the one that brings the mistake in is named
    with pytest.raises(ConfigError, match=r"^--set model.discriminator=other/m: "):
        load_config(None, ["ppo.epochs=1", "model.discriminator=other/m"])


@pytest.mark.parametrize("flow", ["train", "evaluate"])
def test_a_config_error_answers_before_prefect_and_torch_are_imported(flow):
    """The entry points check the config first: a typo is answered (exit code 2, the nearest
    key) by a process that never imported Prefect or torch (``-X importtime`` lists every
    module a process imported, on stderr)."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", f"flows.{flow}", "--set",
                           "ppo.learnig_rate=1e-4"], cwd=repo, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "did you mean ppo.learning_rate?" in proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "configs" in imported  # the listing works
    assert not imported & {"prefect", "torch", "mlflow", "transformers"}


def test_a_config_with_integer_keys_survives_the_json_a_run_stores():
    # A run stores its config as JSON, whose keys are strings; resume and replay read it back.
    cfg = load_config("configs/smollm2-135m.yaml")
    assert cfg.sampling.stage_max_new_tokens  # the case: a mapping keyed by stage number
    stored = json.loads(json.dumps(config_to_dict(cfg)))
    assert config_from_dict(stored) == cfg
