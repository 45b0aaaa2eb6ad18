"""``TrainConfig``, the whole run configuration, and whether a training config can learn.

The sections it is made of (``ModelConfig``, ``PPOConfig``, ...) live in ``configs.sections``
(how a run executes) and ``configs.learning`` (what it learns), and are importable from here
and from ``configs`` too; loading YAML and ``--set`` overrides into it is ``configs.loader``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from configs.errors import ConfigError
from configs.learning import (
    ChainConfig,
    EvaluationConfig,
    PPOConfig,
    ProblemsConfig,
    RewardConfig,
    ScheduleConfig,
    WarmStartConfig,
)
from configs.sections import (
    ArtifactsConfig,
    LoraConfig,
    ModelConfig,
    SamplingConfig,
    SandboxConfig,
    TrackingConfig,
)

__all__ = [
    "ArtifactsConfig", "ChainConfig", "LoraConfig", "ModelConfig",
    "PPOConfig", "ProblemsConfig", "RewardConfig", "SamplingConfig", "SandboxConfig",
    "ScheduleConfig", "TrackingConfig", "TrainConfig", "WarmStartConfig", "check_learnable",
    "learnability",
]


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training run needs; ``configs/*.yaml`` override the defaults."""

    name: str = "default"
    """Human-readable name of this configuration (shown in logs and MLflow)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    rewards: RewardConfig = field(default_factory=RewardConfig)
    chain: ChainConfig = field(default_factory=ChainConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    problems: ProblemsConfig = field(default_factory=ProblemsConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    artifacts: ArtifactsConfig = field(default_factory=ArtifactsConfig)


# -- can this config learn? (training runs only) ------------------------------------------------
# Not in ``TrainConfig.__post_init__``: inference and evaluation load the same dataclass with
# one sample per problem and no schedule, which is right for them. ``flows.train`` calls
# ``check_learnable`` before Prefect starts (a refusal exits 2 like every config error) and
# again in the flow, which logs the warnings once.


def _trained_roles(schedule: ScheduleConfig) -> tuple[str, ...]:
    """The roles some planned step updates (alternating steps: generator first)."""
    roles = []
    if schedule.n_generator_steps or schedule.k_alternating >= 1:
        roles.append("generator")
    if schedule.n_discriminator_steps or schedule.k_alternating >= 2:
        roles.append("discriminator")
    return tuple(roles)


def _dead_reward_terms(cfg: TrainConfig, role: str) -> list[str] | None:
    """Why each reward term of ``role`` is constant, or None when one term can vary."""
    why = []
    for name, weight in getattr(cfg.rewards, role).items():
        if weight == 0:
            why.append(f"rewards.{role}.{name}={weight!r}")
        elif name == "mutation_kill" and cfg.rewards.mutants_per_problem == 0:
            why.append(f"rewards.{role}.mutation_kill with rewards.mutants_per_problem=0 "
                       "(always 0)")
        else:
            return None
    return why


def sources_overlap(a: str, b: str) -> bool:
    """Whether two problem sources can share a problem: the same source, or the same
    procedural family where one takes every split or both the same split.

    >>> sources_overlap("family:piecewise:heldout", "family:piecewise:train")
    False
    >>> sources_overlap("family:piecewise", "family:piecewise:heldout")
    True
    """
    if a == b:
        return True
    fa, fb = a.split(":"), b.split(":")
    if fa[0] != "family" or fb[0] != "family" or fa[1:2] != fb[1:2]:
        return False
    return len(fa) == 2 or len(fb) == 2 or fa[2] == fb[2]


def learnability(cfg: TrainConfig) -> tuple[list[str], list[str]]:
    """``(errors, warnings)``: settings under which no update can ever carry signal.

    Errors are configs that train nothing and would still report success; warnings are
    legitimate runs that do not learn (a learning-rate-0 control, a shuffled-reward control, a
    schedule of no steps).

    >>> errors, _ = learnability(TrainConfig(sampling=SamplingConfig(samples_per_problem=1)))
    >>> errors[0].split(":")[0]
    "sampling.samples_per_problem=1 with ppo.advantage='group'"
    >>> learnability(TrainConfig(ppo=PPOConfig(learning_rate=0.0)))[1][0].split(":")[0]
    'ppo.learning_rate=0.0'
    >>> learnability(TrainConfig(rewards=RewardConfig(shuffle_seed=3)))[1][0].split(":")[0]
    'rewards.shuffle_seed=3'
    """
    errors: list[str] = []
    warnings: list[str] = []
    held_out = cfg.evaluation.source
    for key, trained in (("problems.source", cfg.problems.source),
                         ("warm_start.source", cfg.warm_start.source)):
        if held_out and trained and sources_overlap(held_out, trained):
            errors.append(f"evaluation.source={held_out!r} and {key}={trained!r}: the held-out "
                          "problems would be trained on; evaluate on a split never trained on")
    schedule = cfg.schedule
    roles = _trained_roles(schedule)
    missing = [s for s in schedule.stages if s not in cfg.chain.stages]
    if missing:
        errors.append(f"schedule.stages={list(schedule.stages)} and chain.stages="
                      f"{list(cfg.chain.stages)}: stage(s) {missing} would be trained but the "
                      "chain never writes them; train only stages the chain has")
    if not cfg.chain.discriminator and "discriminator" in roles:
        errors.append(f"chain.discriminator=false with schedule.n_discriminator_steps="
                      f"{schedule.n_discriminator_steps}, schedule.k_alternating="
                      f"{schedule.k_alternating}: the discriminator writes no tests, so it has "
                      "nothing to train on; set both to 0 (k_alternating 1 trains the "
                      "generator only)")
    if not roles:
        warnings.append(
            f"schedule.n_discriminator_steps={schedule.n_discriminator_steps}, "
            f"schedule.n_generator_steps={schedule.n_generator_steps}, "
            f"schedule.k_alternating={schedule.k_alternating}: the schedule plans no step; "
            "a dry run (models, problems, MLflow run) that trains nothing")
        return errors, warnings
    if cfg.ppo.advantage == "group" and cfg.sampling.samples_per_problem < 2:
        errors.append(
            f"sampling.samples_per_problem={cfg.sampling.samples_per_problem} with "
            f"ppo.advantage={cfg.ppo.advantage!r}: advantages are relative to a problem's "
            "group of samples, a group of one has none, so every update would be skipped "
            "(n_tokens=0); use sampling.samples_per_problem >= 2 or ppo.advantage=gae")
    for role in roles:
        dead = _dead_reward_terms(cfg, role)
        if dead is not None:
            errors.append(
                f"{', '.join(dead)}: every {role} reward would be the same constant, so no "
                f"{role} update could carry signal; give a {role} reward a non-zero weight")
    frozen: dict[str, list[str]] = {}  # the setting that is 0 -> roles it freezes
    for role in roles:
        if cfg.ppo.learning_rate_for(role) == 0:
            own = role == "discriminator" and cfg.ppo.discriminator_learning_rate is not None
            frozen.setdefault("ppo.discriminator_learning_rate" if own
                              else "ppo.learning_rate", []).append(role)
    for key, which in frozen.items():
        warnings.append(f"{key}=0.0: a control run ({' and '.join(which)}); updates are "
                        "computed and recorded but the adapters never change")
    if cfg.rewards.shuffle_seed is not None:
        warnings.append(f"rewards.shuffle_seed={cfg.rewards.shuffle_seed}: a control run; each "
                        "step's rewards are permuted within each problem's samples, so the "
                        "adapters train on rewards that say nothing about their sample")
    return errors, warnings


def check_learnable(cfg: TrainConfig, source: object = None) -> list[str]:
    """Raise ``ConfigError`` naming the settings (after ``source``, the config file, if given)
    when no update could carry signal; return the warnings of a legitimate run that does not
    learn, for the caller to show once."""
    errors, warnings = learnability(cfg)
    if errors:
        where = f"{source}: " if source is not None else ""
        raise ConfigError(where + "; ".join(errors))
    return warnings
