"""What a command needs of this machine, checked before it starts anything: one place, one line.

``check(cfg)`` raises ``configs.ConfigError`` with a one-line message that names the key, its
value and the fix, for the first precondition the run would otherwise fail on minutes later,
inside the flow, as a traceback:

- a base model that names a local folder holding no model (the tiny model is built only in
  the project's own folder for it, ``configs.sections.TINY_MODEL``), a hub id that is not in the
  local Hugging Face cache while hub access is off, a converted folder with a missing or cut file;
- ``model.device=cuda`` without CUDA, and 4-bit weights anywhere but CUDA;
- ``sampling.engine=vllm`` without the vLLM environment (``make vllm``), or with two base models;
- ``sandbox.isolation=bwrap`` where bubblewrap does not run.

It reads files, environment variables and the cache's index; it loads no model, and imports
torch only to ask for CUDA when the config asks for it. The entry points call it in ``main``
before Prefect's temporary server starts (their ``error: ...`` line, exit code 2);
``models.policy`` checks the model side again for callers that do not come through them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from configs import ConfigError
from configs.schema import ModelConfig, TrainConfig


def check(cfg: TrainConfig, *, model: str | None = None, models: bool = True,
          engine: bool = True, sandbox: bool = True) -> None:
    """Raise ``ConfigError`` for the first precondition of ``cfg`` this machine does not meet.

    ``model``: the ``--model`` of ``flows.evaluate`` and ``flows.infer`` (its base model is
    checked instead of ``model.generator``; a registered version's base is recorded with it
    and checked when it loads). ``models``, ``engine``, ``sandbox``: whether the command loads
    the models, samples on ``sampling.engine`` (the training steps; inference samples on the
    policies) and runs the sandbox; a replay of one stage may need none of them."""
    if models:
        _check_device(cfg.model)
        bases = base_config(cfg.model, model)
        try:
            if bases is not None:
                _check_bases(bases)
        except ConfigError as exc:
            if bases is cfg.model:
                raise
            # the base is --model's, not the config key the message names
            reason = str(exc).removeprefix(f"model.generator={bases.generator}: ")
            raise ConfigError(f"--model {bases.generator}: {reason}") from None
    if models and engine and cfg.sampling.engine == "vllm":
        _check_vllm(cfg.model)
    if sandbox and cfg.sandbox.isolation == "bwrap":
        _check_bwrap()


def base_config(model_cfg: ModelConfig, model: str | None) -> ModelConfig | None:
    """The model config the base models load under when ``--model`` is ``model`` (as
    ``serving.sources.resolve_source`` reads it): the config's own for none, a checkpoint or an
    adapter folder; the spec as the one base for a model path or hub id; None for a registered
    version or an MLflow run's checkpoint, whose base is known only once it is fetched."""
    if model is None:
        return model_cfg
    spec = model.strip()
    if spec.startswith(("models:/", "runs:/")) or "@" in spec:
        return None
    folder = Path(spec)
    if (folder / "checkpoint.json").is_file() or (folder / "adapter_config.json").is_file():
        return model_cfg
    return replace(model_cfg, generator=spec, discriminator=None, layout="shared",
                   tiny=model_cfg.tiny and spec == model_cfg.generator)


def _check_device(model_cfg: ModelConfig) -> None:
    cuda = False
    if model_cfg.device == "cuda" or (model_cfg.device == "auto" and model_cfg.load_in_4bit):
        import torch  # deferred: only a config that asks for CUDA pays for the import

        cuda = torch.cuda.is_available()
    model_cfg.device_type(cuda)


def _check_bases(model_cfg: ModelConfig) -> None:
    from models.convert_gguf import verify_models  # deferred: the models package

    model_cfg.check_folders()
    model_cfg.check_hub_ids()
    verify_models((model_cfg.generator, model_cfg.discriminator))


def _check_vllm(model_cfg: ModelConfig) -> None:
    from models.engine.client import EngineError, vllm_python  # deferred: the models package

    if model_cfg.discriminator not in (None, model_cfg.generator):
        raise ConfigError(f"model.discriminator={model_cfg.discriminator}: sampling.engine=vllm "
                          "holds one base model for both roles; unset it, or set "
                          "sampling.engine=hf")
    try:
        vllm_python()
    except EngineError as exc:
        raise ConfigError(str(exc)) from None


def _check_bwrap() -> None:
    from sandbox.jail import SandboxError, resolve  # deferred: the sandbox package

    try:
        resolve("bwrap")
    except SandboxError as exc:
        raise ConfigError(f"sandbox.isolation='bwrap': {exc}; install bubblewrap, or set "
                          "sandbox.isolation=auto (process limits where it does not run)") from None
