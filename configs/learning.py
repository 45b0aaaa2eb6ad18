"""The sections of ``TrainConfig`` that say what is learned and how: the rewards, PPO, the
N + N + K schedule, the training problems, the supervised warm start and the held-out
evaluation. One frozen, documented dataclass per concern, validated in ``__post_init__`` with
the offending key and value named, as ``configs.sections`` (where and how a run executes).
``configs.schema`` assembles both into ``TrainConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from configs.errors import check as _check
from configs.names import CODE_STAGE, ROLES, STAGES

KL_REFERENCES = ("base", "start")
"""``ppo.kl_reference`` values: what the KL penalty measures against (``PPOConfig``)."""


def registered_rewards() -> dict[str, str]:
    """Every registered reward, name -> the role it scores (``rewards.functions.REGISTRY``).

    Imported when a config is validated, not when ``configs`` is: ``rewards`` sits above
    ``configs`` in the import graph (its functions take a ``RewardConfig``), and a reward
    registered after ``configs`` loaded (a test's, a plugin's) still counts."""
    from rewards.functions import REGISTRY

    return {name: r.role for name, r in REGISTRY.items()}


@dataclass(frozen=True)
class RewardConfig:
    """Which reward functions score each role, and their weights (all from execution only)."""

    generator: dict[str, float] = field(default_factory=lambda: {"all_pass": 1.0})
    """Weighted sum of generator rewards: ``all_pass`` (the default: 1 only when the code passes
    every valid test, baseline and discriminator, the verdict held-out pass@1 gives),
    ``pass_rate`` (share of the valid tests passed) or ``shifted_pass_rate`` (``pass_rate -
    0.5``); ``baseline_all_pass`` and ``baseline_pass_rate`` count the problem's own tests alone
    (the ablation of ``benchmarks/learning.py``). Why ``all_pass``: under group-relative
    advantages a sample that one discriminator test rejects still ranks above a group of worse
    samples by its pass rate and is reinforced; by ``all_pass`` that test makes its advantage
    negative, so the discriminator's tests steer the generator (``docs/training.md``,
    *Progressive tests*)."""
    discriminator: dict[str, float] = field(default_factory=lambda: {"progressive": 1.0})
    """Weighted sum of discriminator rewards: ``progressive`` (the default: what the training
    stage's valid tests add to the suite of the stages before it, so repeating an earlier
    stage earns nothing), or ``adversarial_validity`` (``(1 - pass_rate) * validity``),
    ``valid_invalid_bugcatch`` (valid tests and caught bugs against invalid tests) and
    ``mutation_kill`` (share of reference mutants the valid tests kill), which score every
    stage's tests alike, e.g. ``{adversarial_validity: 1.0, mutation_kill: 0.5}``."""
    neutral: float = 0.5
    """Generator reward when there is no test to judge the code by."""
    validity_floor: int = 3
    """Minimum denominator for validity, so two trivial tests do not earn full validity."""
    mutants_per_problem: int = 6
    """AST mutants of the reference solution used for the mutation-kill term."""
    peer_tests: bool = False
    """Judge each generator sample also by the valid discriminator tests written for the other
    samples of its problem in the same step (``pipeline.chains.peer_tests``), not only by those
    its own chain drew. A test the reference passes is a true statement about the problem,
    whichever chain it was written for; pooled, one sample's test for a missed guard splits
    the group's rewards, where alone it judged only the sample it was written for. The
    discriminator's rewards still count only its own chain's tests. Off by default: in
    ``benchmarks/learning.py`` it caught more but did not raise held-out pass@1
    (``docs/training.md``, *Progressive tests*)."""
    shuffle_seed: int | None = None
    """Control runs only: when set, each training step's rewards are permuted among the scored
    samples of each problem, each role's on its own, by a generator seeded from this value,
    the step and the problem (``pipeline.scoring.shuffled_rewards``). PPO then sees every
    group's reward values, spread and skipped groups unchanged, but not which sample earned
    which: a control that differs from a trained run only in whether the reward says anything
    about the sample (``benchmarks/learning.py``'s control arm). The rewards table records the
    permuted ``generator_reward`` and ``discriminator_reward`` (what PPO used) beside the
    unpermuted raw values of the reward functions (``reward``). Held-out evaluation never
    permutes."""

    def __post_init__(self) -> None:
        roles = registered_rewards()
        for role in ROLES:
            names = [name for name, of in roles.items() if of == role]
            for name, weight in getattr(self, role).items():
                why = f"a {roles[name]} reward" if name in roles else "unknown reward"
                _check(name in names, f"rewards.{role}.{name}", weight,
                       f"{why}; choose from {', '.join(names)}")
        _check(bool(self.generator), "rewards.generator", self.generator, "needs one reward")
        _check(bool(self.discriminator), "rewards.discriminator", self.discriminator,
               "needs one reward")
        _check(self.validity_floor >= 1, "rewards.validity_floor", self.validity_floor,
               "must be >= 1")
        _check(self.mutants_per_problem >= 0, "rewards.mutants_per_problem",
               self.mutants_per_problem, "must be >= 0")


@dataclass(frozen=True)
class PPOConfig:
    """Proximal policy optimisation of the LoRA adapters."""

    learning_rate: float = 1e-5
    """AdamW learning rate; 0 makes a control run."""
    discriminator_learning_rate: float | None = None
    """The discriminator's own learning rate; null means ``learning_rate``. The roles' rewards
    differ in scale and sparsity (pass rates vs validity and mutants killed), and one step size
    can be too large for one and too small for the other."""
    clip_epsilon: float = 0.2
    """Clip range of the probability ratio in the surrogate objective."""
    kl_coef: float = 0.05
    """Weight of the k3 KL penalty to the reference policy (``kl_reference``)."""
    kl_reference: str = "base"
    """What the KL penalty and the logged ``kl_ref`` measure against. ``base``:
    the base model with every adapter disabled; no weights are kept. ``start``: each role's
    adapter as the run's training began (after the warm start or ``--init-from``), saved once
    beside the run's resume states (``reference/``) so a resumed run and a replay use the same
    one. After a warm start the base is what the warm start moved away from on purpose (the
    tiny model's base is random weights): ``base`` pulls back toward it, ``start`` keeps each
    role near what it was taught."""
    epochs: int = 1
    """Passes over one step's rollouts."""
    mini_batch_size: int = 0
    """Sequences per optimizer step; 0 = the whole step's batch (one step per epoch). Smaller
    mini-batches take several clipped steps per rollout, which is what PPO's clip is for."""
    micro_batch_size: int = 4
    """Sequences per forward/backward; gradients accumulate over a mini-batch."""
    max_grad_norm: float = 1.0
    """Gradient clipping threshold."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    advantage: str = "group"
    """``group``: reward minus the mean over a problem's samples (scaled by their std);
    ``gae``: generalised advantage estimation with a value head per role (a linear layer on the
    final hidden states, trained with the adapter and saved inside its folder as
    ``value_head.safetensors``)."""
    gamma: float = 1.0
    """Discount for GAE."""
    lam: float = 0.95
    """GAE lambda."""
    value_coef: float = 0.1
    """Weight of the value loss (GAE only)."""

    def learning_rate_for(self, role: str) -> float:
        """The role's learning rate.

        >>> PPOConfig(learning_rate=1e-4, discriminator_learning_rate=3e-4).learning_rate_for(
        ...     "discriminator"), PPOConfig(learning_rate=1e-4).learning_rate_for("discriminator")
        (0.0003, 0.0001)
        """
        if role == "discriminator" and self.discriminator_learning_rate is not None:
            return self.discriminator_learning_rate
        return self.learning_rate

    def __post_init__(self) -> None:
        _check(self.learning_rate >= 0, "ppo.learning_rate", self.learning_rate, "must be >= 0")
        _check(self.discriminator_learning_rate is None or self.discriminator_learning_rate >= 0,
               "ppo.discriminator_learning_rate", self.discriminator_learning_rate,
               "must be >= 0 or null")
        _check(0 < self.clip_epsilon < 1, "ppo.clip_epsilon", self.clip_epsilon,
               "must be in (0, 1)")
        _check(self.kl_coef >= 0, "ppo.kl_coef", self.kl_coef, "must be >= 0")
        _check(self.kl_reference in KL_REFERENCES, "ppo.kl_reference", self.kl_reference,
               "must be " + " or ".join(map(repr, KL_REFERENCES)))
        _check(self.epochs >= 1, "ppo.epochs", self.epochs, "must be >= 1")
        _check(self.mini_batch_size >= 0, "ppo.mini_batch_size", self.mini_batch_size,
               "must be >= 0 (0 = the whole batch)")
        _check(self.micro_batch_size >= 1, "ppo.micro_batch_size", self.micro_batch_size,
               "must be >= 1")
        _check(self.max_grad_norm > 0, "ppo.max_grad_norm", self.max_grad_norm, "must be > 0")
        _check(self.advantage in ("group", "gae"), "ppo.advantage", self.advantage,
               "must be 'group' or 'gae'")
        _check(0 <= self.gamma <= 1, "ppo.gamma", self.gamma, "must be in [0, 1]")
        _check(0 <= self.lam <= 1, "ppo.lam", self.lam, "must be in [0, 1]")


@dataclass(frozen=True)
class ChainConfig:
    """What a run's chain holds: which stages the generator writes and whether the
    discriminator tests them. The defaults are the full adversarial chain; ``stages: [5]``
    with ``discriminator: false`` is a code-only run (the prompt a model asked for code
    directly sees, judged on the problems' own tests), a config rather than a fork."""

    stages: tuple[int, ...] = STAGES
    """The chain stages the generator writes, in order; the code stage is always one. A
    stage left out is never sampled, and later stages' prompts do not show it."""
    discriminator: bool = True
    """Whether the discriminator writes tests at each of ``stages``; false: every sample's
    suite is its problem's own tests, and no step may train the discriminator."""

    def __post_init__(self) -> None:
        _check(bool(self.stages) and all(s in STAGES for s in self.stages), "chain.stages",
               self.stages, f"must be stage ids from {STAGES[0]} to {STAGES[-1]}")
        _check(list(self.stages) == sorted(set(self.stages)), "chain.stages", self.stages,
               "must be increasing without repeats")
        _check(CODE_STAGE in self.stages, "chain.stages", self.stages,
               f"must hold the code stage {CODE_STAGE} (the sandbox runs its output)")

    def before(self, stage: int) -> tuple[int, ...]:
        """The chain's stages before ``stage``: what its generator prompt shows.

        >>> ChainConfig(stages=(2, 4, 5)).before(5)
        (2, 4)
        """
        return tuple(s for s in self.stages if s < stage)

    def upto(self, stage: int) -> tuple[int, ...]:
        """The chain's stages up to ``stage``: what its discriminator prompt shows."""
        return tuple(s for s in self.stages if s <= stage)

    @property
    def test_stages(self) -> tuple[int, ...]:
        """The stages the discriminator writes tests for (none without it)."""
        return self.stages if self.discriminator else ()


@dataclass(frozen=True)
class ScheduleConfig:
    """The N + N + K pattern, stage by stage."""

    n_discriminator_steps: int = 10
    """Discriminator steps per stage (generator frozen)."""
    n_generator_steps: int = 10
    """Generator steps per stage (discriminator frozen)."""
    k_alternating: int = 2
    """Alternating steps per stage, generator first."""
    stages: tuple[int, ...] = STAGES
    """Training stages, in order."""
    problems_per_step: int = 4
    """Problems drawn per step (cycling through the problem set)."""

    def __post_init__(self) -> None:
        for key in ("n_discriminator_steps", "n_generator_steps", "k_alternating"):
            value = getattr(self, key)
            _check(value >= 0, f"schedule.{key}", value, "must be >= 0")
        _check(bool(self.stages) and all(s in STAGES for s in self.stages),
               "schedule.stages", self.stages,
               f"must be stage ids from {STAGES[0]} to {STAGES[-1]}")
        _check(list(self.stages) == sorted(set(self.stages)), "schedule.stages", self.stages,
               "must be increasing without repeats (stages train in order)")
        _check(self.problems_per_step >= 1, "schedule.problems_per_step",
               self.problems_per_step, "must be >= 1")


@dataclass(frozen=True)
class ProblemsConfig:
    """Which problems the run trains on."""

    source: str = "demo"
    """``demo``, ``humaneval``, or a path to a JSON, JSONL or Parquet problem file."""
    ids: tuple[str, ...] | None = None
    """Keep only these problem ids (in this order)."""
    limit: int | None = None
    """Keep at most this many problems."""
    curriculum: bool = False
    """Order problems easy -> medium -> hard."""
    on_invalid: str = "fail"
    """What a run does with problems that fail the checks (structure, and each reference run
    against its own baseline tests; recorded-format defects are repaired, see
    ``problems.vet``): ``fail`` (refuse to start, listing them) or ``skip`` (train on the valid
    ones; the skipped ones and their reasons are recorded in the run store's
    ``_run/problems.json`` and as an MLflow artifact)."""

    def __post_init__(self) -> None:
        _check(bool(self.source), "problems.source", self.source, "must name a source")
        _check(self.on_invalid in ("fail", "skip"), "problems.on_invalid", self.on_invalid,
               "must be fail or skip")
        _check(self.limit is None or self.limit >= 1, "problems.limit", self.limit,
               "must be >= 1 or null")


@dataclass(frozen=True)
class WarmStartConfig:
    """Supervised LoRA warm start so a tiny random model begins with non-zero reward."""

    enabled: bool = False
    """Real instruct models skip it; ``configs/tiny.yaml`` turns it on."""
    steps: int = 100
    """Optimizer steps (each role's; see ``discriminator_steps``)."""
    discriminator_steps: int | None = None
    """The discriminator's optimizer steps when they differ from the generator's; ``None``:
    ``steps``. Longer fits change what each role writes differently (``docs/training.md``,
    *What the tiny run shows*), so an experiment can lengthen one without the other."""
    learning_rate: float = 3e-3
    """AdamW learning rate for the warm start."""
    batch_size: int = 8
    """Examples per step."""
    roles: tuple[str, ...] = ROLES
    """Which adapters to warm-start (a generator-only experiment can skip the other)."""
    source: str | None = None
    """Problems the warm start is fitted on (a problem source, e.g.
    ``family:piecewise:warmstart``); ``None``: the run's own problems."""
    limit: int | None = None
    """Keep at most this many warm-start problems."""

    def __post_init__(self) -> None:
        _check(self.steps >= 0, "warm_start.steps", self.steps, "must be >= 0")
        _check(self.discriminator_steps is None or self.discriminator_steps >= 0,
               "warm_start.discriminator_steps", self.discriminator_steps,
               "must be >= 0 or null")
        _check(set(self.roles) <= set(ROLES), "warm_start.roles", self.roles,
               f"must name {' and/or '.join(ROLES)}")
        _check(self.learning_rate > 0, "warm_start.learning_rate", self.learning_rate,
               "must be > 0")
        _check(self.batch_size >= 1, "warm_start.batch_size", self.batch_size, "must be >= 1")
        _check(self.limit is None or self.limit >= 1, "warm_start.limit", self.limit,
               "must be >= 1 or null")

    def steps_for(self, role: str) -> int:
        """Optimizer steps of ``role``'s fit.

        >>> WarmStartConfig(steps=2400, discriminator_steps=400).steps_for("generator")
        2400
        >>> WarmStartConfig(steps=2400).steps_for("discriminator")
        2400
        """
        if role == "discriminator" and self.discriminator_steps is not None:
            return self.discriminator_steps
        return self.steps


@dataclass(frozen=True)
class EvaluationConfig:
    """Held-out evaluation during training: before the first step and after each training
    stage, on problems the run never trains on (``pipeline/heldout.py``)."""

    source: str | None = None
    """Problems to evaluate on, e.g. ``family:piecewise:heldout``; ``None``: no evaluation. A
    family problem is judged on its hidden suite (main and edge path), any other on its own
    tests."""
    limit: int = 16
    """Problems evaluated (the source's first ones: a family split's order is a fair sample)."""
    samples: int = 1
    """Chains per problem (pass@1 is averaged over them)."""
    each_stage: bool = True
    """Evaluate after every training stage; false: only before the first step and after the
    last stage (``benchmarks/learning.py`` compares just those two, in a fixed time budget)."""
    temperature: float | None = None
    """Sampling temperature of the evaluation's chains and tests; ``None``: the training
    rollouts' (``sampling.temperature``). Set it to explore at one temperature in training and
    measure pass@1 at a fixed one, so that changing the former does not move the yardstick."""

    def __post_init__(self) -> None:
        _check(self.limit >= 1, "evaluation.limit", self.limit, "must be >= 1")
        _check(self.samples >= 1, "evaluation.samples", self.samples, "must be >= 1")
        _check(self.temperature is None or self.temperature > 0, "evaluation.temperature",
               self.temperature, "must be > 0 (or null: sampling.temperature)")
