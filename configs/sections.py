"""The sections of ``TrainConfig`` that say where and how a run executes: the model, its LoRA
adapters, sampling, the sandbox, tracking and artifacts. One frozen, documented dataclass per
concern; what is learned and how (rewards, PPO, the schedule, problems, the warm start, the
evaluation) is ``configs.learning``.

Every field has a default that works on a CPU machine with the tiny local model; the YAML files
in this folder override them per scenario. Validation happens in ``__post_init__`` and names the
offending key and value, so a typo in a YAML file or a ``--set`` override fails at start-up, not
an hour into a run. ``configs.schema`` assembles them into ``TrainConfig`` (import them from
there or from ``configs``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from configs.environment import ROOT  # the project's own model folders live under it
from configs.errors import ConfigError
from configs.errors import check as _check
from configs.limits import EXECUTORS, ISOLATIONS, Limits, Placement
from configs.names import STAGES

MIN_CONTEXT_TOKENS = 64
"""The smallest prompt budget (``model.max_context_tokens``) a model is given."""
ENGINES = ("hf", "vllm")
"""``sampling.engine`` values: what samples the rollouts (``models.engine``)."""
VLLM_WEIGHTS = ("merged", "lora")
"""``sampling.vllm_weights`` values: how an adapter version reaches the vLLM engine."""

TINY_MODEL = ".cache/tiny-qwen2"
"""The one folder ``model.tiny`` builds the random tiny model in (under ``ROOT``): a model path
anywhere else must hold a model, so a mistyped or deleted folder is never replaced by random
weights."""
SMOLLM2_MODEL = ".cache/smollm2-135m-instruct"
"""Where ``make smollm2`` converts SmolLM2-135M-Instruct (``configs/smollm2-135m.yaml``)."""
MODEL_BUILDERS = {SMOLLM2_MODEL: "make smollm2",
                  TINY_MODEL: f".venv/bin/python -m models.tiny --out {TINY_MODEL}"}
"""Local model folders the project builds itself (under ``ROOT``), and the command that builds
each (named when one is missing)."""

_LIMITS, _PLACEMENT = Limits(), Placement()  # the sandbox's defaults are declared there, once


@dataclass(frozen=True)
class ModelConfig:
    """Which causal LMs play the two roles and how they are loaded."""

    generator: str = TINY_MODEL
    """Local path or hub id of the generator's base model (loaded with ``from_pretrained``)."""
    discriminator: str | None = None
    """Base model of the discriminator; ``None`` means the same as ``generator``."""
    layout: str = "shared"
    """``shared``: one base model with two named LoRA adapters (half the memory);
    ``separate``: two base models, one adapter each."""
    dtype: str = "float32"
    """Weights dtype: ``float32``, ``bfloat16`` or ``float16``."""
    device: str = "cpu"
    """``cpu``, ``cuda`` or ``auto`` (cuda when available)."""
    load_in_4bit: bool = False
    """NF4 quantisation through bitsandbytes; CUDA only."""
    gradient_checkpointing: bool = False
    """Trade compute for activation memory during PPO backward passes."""
    max_context_tokens: int = 2048
    """Longest prompt fed to a model; older stages are dropped first when exceeded."""
    tiny: bool = False
    """Build the tiny offline model when the project's own folder for it (``TINY_MODEL`` under
    the repository root) is named and missing; any other missing folder is an error."""
    trust_remote_code: bool = False
    """Passed to ``from_pretrained`` for hub models with custom code."""
    cpu_threads: int | None = None
    """``torch.set_num_threads`` for the run; ``None`` keeps torch's default. Tiny models on a
    small shared CPU run much faster with 1: thread hand-offs cost more than the maths."""

    def __post_init__(self) -> None:
        _check(bool(self.generator), "model.generator", self.generator, "must name a model")
        _check(self.layout in ("shared", "separate"), "model.layout", self.layout,
               "must be 'shared' or 'separate'")
        _check(self.dtype in ("float32", "bfloat16", "float16"), "model.dtype", self.dtype,
               "must be float32, bfloat16 or float16")
        _check(self.device in ("cpu", "cuda", "auto"), "model.device", self.device,
               "must be cpu, cuda or auto")
        _check(self.cpu_threads is None or self.cpu_threads >= 1, "model.cpu_threads",
               self.cpu_threads, "must be >= 1 or null")
        _check(self.max_context_tokens >= MIN_CONTEXT_TOKENS, "model.max_context_tokens",
               self.max_context_tokens, f"must be at least {MIN_CONTEXT_TOKENS}")
        _check(not (self.layout == "shared" and self.discriminator not in (None, self.generator)),
               "model.discriminator", self.discriminator,
               "the shared layout uses one base model; set model.layout=separate")

    @property
    def discriminator_base(self) -> str:
        return self.discriminator or self.generator

    def builds_tiny(self, path: str) -> bool:
        """Whether loading ``path`` builds the tiny model there when it is missing: only with
        ``tiny`` true, and only at the project's own folder for it (whatever the cwd)."""
        return self.tiny and project_folder(path, resolved=True) == TINY_MODEL

    def _bases(self) -> list[tuple[str, str]]:
        return [(key, path) for key, path in (("model.generator", self.generator),
                                              ("model.discriminator", self.discriminator))
                if path]

    def check_folders(self) -> None:
        """Raise ``ConfigError`` when a base model names a local folder that holds no model
        and nothing builds one (only :meth:`builds_tiny` does). ``from_pretrained`` would take
        the path for a hub id and answer about repo ids; and a random tiny model in place of a
        mistyped or deleted folder would train and register as if it were that model."""
        for key, path in self._bases():
            folder = Path(path).expanduser()
            if (folder / "config.json").exists() or self.builds_tiny(path):
                continue
            if not (local_model_path(path) or folder.exists()):
                continue  # a hub id: check_hub_ids
            what = "holds no config.json" if folder.exists() else "does not exist"
            named = project_folder(path)
            if self.tiny and named == TINY_MODEL:  # the same name, from another directory
                fix = (f"model.tiny builds its random tiny model only at {ROOT / TINY_MODEL}: "
                       "run from the repository root")
            elif named:
                fix = f"`{MODEL_BUILDERS[named]}` builds it"
            elif self.tiny:
                fix = (f"model.tiny builds its random tiny model only at {ROOT / TINY_MODEL}, "
                       "never in place of another model")
            else:
                fix = "model.tiny is false, so nothing builds one there"
            raise ConfigError(f"{key}={path}: the model folder {what} ({fix})")

    def check_hub_ids(self) -> None:
        """Raise ``ConfigError`` when a base model is a hub id that is not in the local Hugging
        Face cache while hub access is off (``HF_HUB_OFFLINE``, set by every entry point unless
        the user sets it otherwise): ``from_pretrained`` would retry the hub and end in a long
        traceback. Reads the cache's index only (``config.json``), nothing is loaded."""
        if not hub_offline():
            return
        from huggingface_hub import try_to_load_from_cache  # deferred: only for hub ids

        for key, path in self._bases():
            if local_model_path(path) or Path(path).expanduser().exists():
                continue  # a local folder: check_folders
            try:
                cached = isinstance(try_to_load_from_cache(path, "config.json"), str)
            except ValueError:  # not a valid repo id either
                cached = False
            if not cached:
                raise ConfigError(
                    f"{key}={path}: not a local folder, and not in the local Hugging Face cache; "
                    "this project downloads no weights (HF_HUB_OFFLINE=1): point it at a local "
                    f"model folder (`{MODEL_BUILDERS[SMOLLM2_MODEL]}` converts "
                    f"SmolLM2-135M-Instruct into {SMOLLM2_MODEL}), or fetch the model into the "
                    f"cache where the hub can be reached (`hf download {path}`)")

    def device_type(self, cuda: bool) -> str:
        """The device type the models load on, given whether CUDA is available (``auto``:
        cuda when it is); ``ConfigError`` naming the fix for cuda without CUDA, and for 4-bit
        weights anywhere else (:meth:`check_quantisation`)."""
        if self.device == "cuda" and not cuda:
            raise ConfigError("model.device='cuda': no CUDA device is available here; "
                              "use model.device=cpu or auto")
        kind = "cuda" if self.device == "cuda" or (self.device == "auto" and cuda) else "cpu"
        self.check_quantisation(kind)
        return kind

    def check_quantisation(self, device_type: str) -> None:
        """4-bit NF4 needs bitsandbytes' CUDA kernels: refuse it clearly anywhere else."""
        if self.load_in_4bit and device_type != "cuda":
            raise ConfigError(
                f"model.load_in_4bit=True: 4-bit NF4 quantisation (bitsandbytes) is CUDA only, "
                f"but model.device={self.device!r} resolves to {device_type!r}; set "
                "model.load_in_4bit=false to train in full precision on CPU")


def project_folder(path: str, *, resolved: bool = False) -> str | None:
    """The entry of ``MODEL_BUILDERS`` that ``path`` names, or None: spelled as the entry is
    (relative to the repository root, the directory every command runs from), or resolving
    from the working directory to that folder under ``ROOT``. ``resolved``: the latter only,
    so the folder is the project's own whatever the working directory."""
    where = Path(path).expanduser().resolve()
    spelled = str(Path(path)) if not resolved else None
    return next((name for name in MODEL_BUILDERS
                 if spelled == name or where == (ROOT / name).resolve()), None)


def hub_offline() -> bool:
    """Whether hub access is off: ``HF_HUB_OFFLINE`` (else ``TRANSFORMERS_OFFLINE``) true, read
    as huggingface_hub reads it."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in ("1", "ON", "YES", "TRUE")


def local_model_path(path: str) -> bool:
    """Whether ``path`` can only name a local folder, not a hub id (``name`` or ``org/name``):
    absolute, starting with ``.`` or ``~``, or deeper than ``org/name``.

    >>> [local_model_path(p) for p in ("/m", "./m", ".cache/tiny", "a/b/c", "Qwen/Qwen2.5-0.5B")]
    [True, True, True, True, False]
    """
    return path.startswith(("/", ".", "~")) or path.count("/") > 1


@dataclass(frozen=True)
class LoraConfig:
    """LoRA adapters trained by PPO (the base weights stay frozen)."""

    r: int = 8
    """Adapter rank."""
    alpha: int = 16
    """Scaling numerator (effective scale ``alpha / r``)."""
    dropout: float = 0.0
    """Dropout on the adapter input; 0 keeps log-probs deterministic for PPO ratios."""
    target_modules: tuple[str, ...] | None = None
    """Module names to adapt; ``None`` picks attention and MLP projections per architecture."""

    def __post_init__(self) -> None:
        _check(self.r >= 1, "lora.r", self.r, "must be >= 1")
        _check(self.alpha >= 1, "lora.alpha", self.alpha, "must be >= 1")
        _check(0.0 <= self.dropout < 1.0, "lora.dropout", self.dropout, "must be in [0, 1)")


@dataclass(frozen=True)
class SamplingConfig:
    """How both roles sample text."""

    max_new_tokens: int = 512
    """Tokens generated per stage output."""
    temperature: float = 0.7
    """Softmax temperature; must be > 0 (PPO needs a stochastic policy)."""
    top_p: float = 1.0
    """Nucleus sampling mass; 1.0 samples from the full distribution, as PPO's maths assumes."""
    samples_per_problem: int = 4
    """Chains sampled per problem and step (the group for group-relative advantages)."""
    batch_size: int = 8
    """Sequences per ``generate`` call; larger batches are faster until memory runs out."""
    seed: int = 0
    """Base seed; each step and stage derives its own from it, so runs are reproducible."""
    stage_max_new_tokens: dict[int, int] | None = None
    """The generator's budget per chain stage (``{1: 64, 2: 96, ..., 5: 256}``): short
    reasoning stages, room for the code. A stage not named gets ``max_new_tokens``, which
    bounds every budget (the vLLM engine's context is sized by it)."""
    test_max_new_tokens: int | None = None
    """The discriminator's budget at every stage; ``None``: ``max_new_tokens``."""
    stop_early: bool = False
    """End each output where its stage's work ends (``models.stages.stop_rule``): a reasoning
    stage when it starts the next stage's heading, the code and the tests once their fenced
    block is closed. The text that ends it is kept, as an EOS token is. Off: outputs end at
    EOS or the budget only."""
    engine: str = "hf"
    """What samples rollouts: ``hf`` (transformers ``generate`` with the peft adapters, in the
    trainer) or ``vllm`` (one vLLM engine in its own process and environment, ``make vllm``,
    holding the base model once for both roles; ``models.engine``). Same sampling semantics;
    vLLM samples a real model's shape faster but takes long to start, which the tiny default
    run does not win back (``benchmarks/rollout_engine.py``; docs/training.md, "Rollouts on
    vLLM")."""
    vllm_weights: str = "merged"
    """How each new adapter version reaches the vLLM engine: ``merged`` (LoRA folded into the
    engine's weights in place, plain kernels: fastest to sample on CPU) or ``lora`` (a vLLM
    ``LoRARequest`` per version)."""
    vllm_compile: bool = True
    """``torch.compile`` the vLLM engine's model (vLLM's default): about twice the decode speed
    at a real model's shape on a CPU, for a start-up several times longer, and no faster on the
    tiny model (docs/training.md, "Rollouts on vLLM"). ``false`` for short runs."""
    vllm_kv_cache_gib: int = 1
    """KV-cache memory of the vLLM engine on CPU, GiB."""
    vllm_gpu_memory_utilization: float = 0.35
    """Share of the GPU's memory the vLLM engine may take (the trainer needs the rest)."""

    def __post_init__(self) -> None:
        _check(self.max_new_tokens >= 1, "sampling.max_new_tokens", self.max_new_tokens,
               "must be >= 1")
        _check(self.temperature > 0, "sampling.temperature", self.temperature, "must be > 0")
        _check(0 < self.top_p <= 1, "sampling.top_p", self.top_p, "must be in (0, 1]")
        _check(self.samples_per_problem >= 1, "sampling.samples_per_problem",
               self.samples_per_problem, "must be >= 1")
        _check(self.batch_size >= 1, "sampling.batch_size", self.batch_size, "must be >= 1")
        for stage, budget in (self.stage_max_new_tokens or {}).items():
            _check(stage in STAGES, "sampling.stage_max_new_tokens", stage,
                   f"is not a chain stage ({STAGES[0]}-{STAGES[-1]})")
            _check(1 <= budget <= self.max_new_tokens, f"sampling.stage_max_new_tokens.{stage}",
                   budget, f"must be in [1, sampling.max_new_tokens={self.max_new_tokens}]")
        _check(self.test_max_new_tokens is None
               or 1 <= self.test_max_new_tokens <= self.max_new_tokens,
               "sampling.test_max_new_tokens", self.test_max_new_tokens,
               f"must be null or in [1, sampling.max_new_tokens={self.max_new_tokens}]")
        _check(self.engine in ENGINES, "sampling.engine", self.engine,
               f"must be one of {', '.join(ENGINES)}")
        _check(self.vllm_weights in VLLM_WEIGHTS, "sampling.vllm_weights", self.vllm_weights,
               f"must be one of {', '.join(VLLM_WEIGHTS)}")
        _check(self.vllm_kv_cache_gib >= 1, "sampling.vllm_kv_cache_gib",
               self.vllm_kv_cache_gib, "must be >= 1")
        _check(0 < self.vllm_gpu_memory_utilization < 1, "sampling.vllm_gpu_memory_utilization",
               self.vllm_gpu_memory_utilization, "must be in (0, 1)")

    def budget(self, role: str, stage: int) -> int:
        """Tokens ``role`` may write at chain ``stage``."""
        if role == "discriminator":
            return self.test_max_new_tokens or self.max_new_tokens
        return (self.stage_max_new_tokens or {}).get(stage, self.max_new_tokens)


@dataclass(frozen=True)
class SandboxConfig:
    """Limits for running untrusted generated code (see ``sandbox`` for what they protect), and
    where it runs. The run's code passes them on typed: :meth:`limits` and :meth:`placement`;
    the defaults are ``Limits``'s and ``Placement``'s (``configs.limits``)."""

    timeout_s: float = _LIMITS.timeout_s
    """CPU seconds per step of a test (the candidate's import, a module's collection, its run),
    and as many seconds of sleeping or blocking (``Limits.timeout_s``)."""
    memory_mb: int = _LIMITS.memory_mb
    """Address-space limit of each jailed process."""
    workers: int | None = _PLACEMENT.workers
    """Parallel jailed workers; ``None`` means one per CPU core."""
    isolation: str = _PLACEMENT.isolation
    """``auto`` (bubblewrap when it works, else process limits), ``bwrap`` (required) or
    ``process`` (rlimits and a scrubbed environment only)."""
    max_output_bytes: int = _LIMITS.max_output_bytes
    """The candidate's printed output kept per job, for people; the rest is discarded."""
    executor: str = _PLACEMENT.executor
    """Where a step's jobs run: ``local`` (a jailed pool in the flow's process) or ``ray``
    (shards as Ray tasks, each on a jailed pool in a Ray worker; ``sandbox.fanout``)."""
    ray_address: str | None = _PLACEMENT.ray_address
    """With ``executor: ray``: the cluster to use; null means ``$RAY_ADDRESS`` when set, else
    a Ray instance started in the flow's process."""
    ray_shards: int | None = _PLACEMENT.ray_shards
    """With ``executor: ray``: Ray tasks per step; null means one per CPU of the cluster."""

    def limits(self) -> Limits:
        """What each job may use (``fsize_mb`` and ``nofile`` keep ``Limits``'s defaults)."""
        return Limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb,
                      max_output_bytes=self.max_output_bytes)

    def placement(self) -> Placement:
        """Where the jobs run: isolation, workers and executor."""
        return Placement(isolation=self.isolation, workers=self.workers, executor=self.executor,
                         ray_address=self.ray_address, ray_shards=self.ray_shards)

    def __post_init__(self) -> None:
        _check(self.timeout_s > 0, "sandbox.timeout_s", self.timeout_s, "must be > 0")
        _check(self.memory_mb >= 64, "sandbox.memory_mb", self.memory_mb, "must be >= 64")
        _check(self.workers is None or self.workers >= 1, "sandbox.workers", self.workers,
               "must be >= 1 or null")
        _check(self.isolation in ISOLATIONS, "sandbox.isolation", self.isolation,
               f"must be {', '.join(ISOLATIONS[:-1])} or {ISOLATIONS[-1]}")
        _check(self.max_output_bytes >= 1024, "sandbox.max_output_bytes",
               self.max_output_bytes, "must be >= 1024")
        _check(self.executor in EXECUTORS, "sandbox.executor", self.executor,
               f"must be {', '.join(EXECUTORS[:-1])} or {EXECUTORS[-1]}")
        _check(self.ray_shards is None or self.ray_shards >= 1, "sandbox.ray_shards",
               self.ray_shards, "must be >= 1 or null")
        try:  # what the sandbox itself refuses (e.g. timeout_s over an hour), at start-up
            self.limits()
        except ValueError as exc:
            raise ConfigError(f"sandbox.{exc}") from None  # its message starts with the field


@dataclass(frozen=True)
class TrackingConfig:
    """MLflow: where runs, metrics, checkpoints and registered models live."""

    tracking_uri: str | None = None
    """``None``: ``$MLFLOW_TRACKING_URI`` or else ``sqlite:///<repo>/mlflow.db``."""
    experiment: str = "adversarial-reasoning"
    """Experiment name; registered models are named ``<experiment>-generator`` and
    ``<experiment>-discriminator`` unless given below."""
    generator_model_name: str | None = None
    """Registry name of the generator."""
    discriminator_model_name: str | None = None
    """Registry name of the discriminator."""
    register_models: bool = True
    """Register a model version per stage checkpoint (aliases ``candidate``/``champion``)."""

    def __post_init__(self) -> None:
        _check(bool(self.experiment), "tracking.experiment", self.experiment,
               "must name an experiment")

    @property
    def generator_registry_name(self) -> str:
        return self.generator_model_name or f"{self.experiment}-generator"

    @property
    def discriminator_registry_name(self) -> str:
        return self.discriminator_model_name or f"{self.experiment}-discriminator"


@dataclass(frozen=True)
class ArtifactsConfig:
    """The Parquet run store."""

    root: str = "runs"
    """Local folder or any fsspec/pyarrow URI (``s3://...``, ``memory://...``)."""

    def __post_init__(self) -> None:
        _check(bool(self.root), "artifacts.root", self.root, "must name a folder or URI")
