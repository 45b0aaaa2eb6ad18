"""Typed run configuration: ``TrainConfig`` in ``schema`` (its sections in ``sections``, how a
run executes, and ``learning``, what it learns), YAML loading and ``--set key=value`` overrides
in ``loader``, the shared stage and role names in ``names``.

    from configs import apply_overrides, load_config
    cfg = load_config("configs/tiny.yaml", ["ppo.learning_rate=1e-4"])
    data = apply_overrides(stored_config_dict, ["ppo.epochs=2"])  # checked like load_config
"""

from configs.errors import ConfigError
from configs.loader import (
    apply_overrides,
    config_hash,
    config_to_dict,
    flatten,
    load_config,
    parse_override,
)
from configs.schema import (
    ArtifactsConfig,
    ChainConfig,
    EvaluationConfig,
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
    "ArtifactsConfig", "ChainConfig", "ConfigError", "EvaluationConfig", "LoraConfig",
    "ModelConfig",
    "PPOConfig", "ProblemsConfig", "RewardConfig", "SamplingConfig", "SandboxConfig",
    "ScheduleConfig", "TrackingConfig",
    "TrainConfig", "WarmStartConfig", "apply_overrides", "config_hash", "config_to_dict",
    "flatten", "load_config", "parse_override",
]
