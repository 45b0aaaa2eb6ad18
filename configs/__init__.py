"""Typed run configuration: dataclasses in ``schema``, YAML loading in ``loader``.

    from configs import load_config
    cfg = load_config("configs/tiny.yaml", ["ppo.learning_rate=1e-4"])
"""

from configs.errors import ConfigError
from configs.loader import config_hash, config_to_dict, flatten, load_config, parse_override
from configs.schema import (
    STAGE_IDS,
    ArtifactsConfig,
    LoraConfig,
    ModelConfig,
    PPOConfig,
    ProblemsConfig,
    RewardConfig,
    SamplingConfig,
    SandboxConfig,
    ScheduleConfig,
    TrackingConfig,
    TrainConfig,
    WarmStartConfig,
)

__all__ = [
    "STAGE_IDS", "ArtifactsConfig", "ConfigError", "LoraConfig", "ModelConfig", "PPOConfig",
    "ProblemsConfig", "RewardConfig", "SamplingConfig", "SandboxConfig", "ScheduleConfig",
    "TrackingConfig", "TrainConfig", "WarmStartConfig", "config_hash", "config_to_dict",
    "flatten", "load_config", "parse_override",
]
