"""The two policies: base causal LMs with LoRA adapters named ``generator`` and ``discriminator``.

Any causal LM loads through ``AutoModelForCausalLM.from_pretrained`` (the tiny offline model and
Qwen2.5-Coder alike). Layouts (``ModelConfig.layout``):

* ``shared``: ONE base model holding both adapters; :meth:`Policies.model_for` switches the
  active adapter per call (half the memory; the two roles cannot run concurrently).
* ``separate``: two base models, one adapter each (roles may use different base models).

The KL reference policy (:meth:`Policies.reference`) is the base model with adapters disabled,
so no weight copy is kept, or (``ppo.kl_reference: start``) a frozen copy of a role's adapter
as training began (:meth:`Policies.set_reference`). 4-bit NF4 (bitsandbytes) is CUDA only and
refused on CPU.

    from models.policy import Policies
    policies = Policies.load(cfg.model, cfg.lora)
    model = policies.model_for("generator")        # adapter "generator" active
    with policies.reference("generator") as ref:   # adapters off: the frozen base
        ...
"""

from __future__ import annotations

import copy
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import save_file

from configs.errors import ConfigError
from configs.names import ROLES
from configs.schema import LoraConfig, ModelConfig, SamplingConfig
from models.convert_gguf import verify_models
from models.generation import GenerationBatch, generate
from models.merged import MergedTwin
from models.prompts import Prompt
from models.tiny import build_tiny_model, is_tiny_model_dir

# transformers and peft are imported where they are used: flows.train imports this module before
# its Prefect server starts and loads them while the server starts (its preload).

# Attention and MLP projections per architecture (``config.model_type``); anything else gets
# peft's "all-linear" (every linear layer but the output head).
TARGET_MODULES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gemma", "gemma2",
         "gemma3_text", "deepseek_v2", "olmo", "olmo2", "granite"),
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")),
    "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),
    "starcoder2": ("q_proj", "k_proj", "v_proj", "o_proj", "c_fc", "c_proj"),
    "gpt2": ("c_attn", "c_proj", "c_fc"),
    "gpt_bigcode": ("c_attn", "c_proj", "c_fc"),
    "gpt_neox": ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"),
}
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def tensors_version(tensors: Mapping[str, torch.Tensor]) -> str:
    """The ``adapter_version`` of an adapter's weights: :meth:`Policies.adapter_version` of a
    loaded adapter, or of the tensors in the ``adapter_model.safetensors`` it was saved to."""
    digest = hashlib.sha256()
    for name, tensor in sorted(tensors.items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def reference_name(role: str) -> str:
    """The name of ``role``'s KL reference adapter (:meth:`Policies.set_reference`)."""
    return f"{role}_reference"


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"role={role!r}: must be one of {', '.join(ROLES)}")
    return role


def resolve_device(cfg: ModelConfig) -> torch.device:
    """``auto`` -> cuda when available; an explicit ``cuda`` without CUDA, or 4-bit weights
    off CUDA, is a ``ConfigError`` (``ModelConfig.device_type``; the entry points check it
    before they start, ``flows.preflight``)."""
    return torch.device(cfg.device_type(torch.cuda.is_available()))


def check_quantisation(cfg: ModelConfig, device: torch.device) -> None:
    """4-bit NF4 needs bitsandbytes' CUDA kernels: refuse it clearly anywhere else."""
    cfg.check_quantisation(device.type)


def load_tokenizer(path: str, trust_remote_code: bool = False):
    """The tokenizer of a model folder or hub id, left-padded for batched generation.

    The project's tiny model needs ``PreTrainedTokenizerFast``: in transformers 5
    ``AutoTokenizer`` maps its Qwen2 config to ``Qwen2Tokenizer``, whose ids differ.
    """
    # deferred (see the imports)
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if is_tiny_model_dir(path):
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    else:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # the pad id is always masked out
    tokenizer.padding_side = "left"
    return tokenizer


def load_base_model(path: str, cfg: ModelConfig, device: torch.device):
    """A frozen base causal LM on ``device`` in ``cfg.dtype`` (or NF4 on CUDA)."""
    from transformers import AutoModelForCausalLM  # deferred (see the imports)

    check_quantisation(cfg, device)
    dtype = _DTYPES[cfg.dtype]
    kwargs: dict = {"dtype": dtype, "trust_remote_code": cfg.trust_remote_code}
    if cfg.load_in_4bit:
        from transformers import BitsAndBytesConfig  # deferred (see the imports)

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype if dtype != torch.float32 else torch.bfloat16)
        kwargs["device_map"] = {"": device.index or 0}
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if cfg.load_in_4bit:
        from peft import prepare_model_for_kbit_training  # deferred (see the imports)

        model = prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=cfg.gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.to(device)
        if cfg.gradient_checkpointing:
            # Non-reentrant checkpointing back-propagates into LoRA weights even though the
            # (frozen) embeddings' outputs do not require grad.
            model.activation_checkpointing_enable(
                activation_checkpointing_kwargs={"use_reentrant": False})
    for param in model.parameters():
        param.requires_grad_(False)
    model.eval()  # no dropout: PPO ratios need deterministic log-probs
    return model


def peft_lora_config(lora: LoraConfig, model):
    """peft ``LoraConfig`` with per-architecture target modules when none are given."""
    from peft import LoraConfig as PeftLoraConfig  # deferred (see the imports)

    targets = lora.target_modules
    if targets is None:
        targets = TARGET_MODULES.get(getattr(model.config, "model_type", ""), "all-linear")
    return PeftLoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                          target_modules=list(targets) if targets != "all-linear" else targets,
                          bias="none", task_type="CAUSAL_LM")


class Policies:
    """Generator and discriminator policies (see module docstring). Build with :meth:`load`."""

    def __init__(self, models: dict[str, object], tokenizers: dict[str, object],
                 layout: str, device: torch.device, quantised: bool = False):
        self._models = models
        self._tokenizers = tokenizers
        self.layout = layout
        self.device = device
        self.quantised = quantised
        self._twins: dict[int, MergedTwin] = {}  # per base model, made at the first sample

    @classmethod
    def load(cls, model_cfg: ModelConfig, lora_cfg: LoraConfig, seed: int = 0) -> Policies:
        """Load base model(s), attach fresh LoRA adapters, freeze everything but them.

        ``seed`` fixes the adapters' random initialisation (``lora_A``; ``lora_B`` starts at
        zero, so a fresh policy equals its base) without touching the caller's random state.
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return cls._load(model_cfg, lora_cfg)

    @classmethod
    def _load(cls, model_cfg: ModelConfig, lora_cfg: LoraConfig) -> Policies:
        from peft import get_peft_model  # deferred (see the imports)

        device = resolve_device(model_cfg)  # and 4-bit off CUDA: before any slow loading
        paths = {"generator": model_cfg.generator,
                 "discriminator": model_cfg.discriminator_base}
        # Again here for callers that do not come through an entry point (flows.preflight):
        # a missing local folder or an uncached hub id said as such, not as a bad repo id
        model_cfg.check_folders()
        model_cfg.check_hub_ids()
        verify_models(paths.values())  # a converted folder with a missing or cut file
        for path in set(paths.values()):
            if model_cfg.builds_tiny(path) and not Path(path, "config.json").exists():
                build_tiny_model(path)  # only the project's own folder for it
        if model_cfg.layout == "shared":
            base = load_base_model(paths["generator"], model_cfg, device)
            peft_cfg = peft_lora_config(lora_cfg, base)
            model = get_peft_model(base, peft_cfg, adapter_name="generator")
            model.add_adapter("discriminator", peft_lora_config(lora_cfg, base))
            models = {"generator": model, "discriminator": model}
            tokenizer = load_tokenizer(paths["generator"], model_cfg.trust_remote_code)
            tokenizers = {"generator": tokenizer, "discriminator": tokenizer}
        else:
            models, tokenizers = {}, {}
            for role in ROLES:
                base = load_base_model(paths[role], model_cfg, device)
                models[role] = get_peft_model(base, peft_lora_config(lora_cfg, base),
                                              adapter_name=role)
                tokenizers[role] = load_tokenizer(paths[role], model_cfg.trust_remote_code)
        for model in {id(m): m for m in models.values()}.values():
            model.eval()
        policies = cls(models, tokenizers, model_cfg.layout, device, model_cfg.load_in_4bit)
        policies.activate("generator")
        return policies

    @property
    def tokenizer(self):
        """The generator's tokenizer (the only one in the shared layout)."""
        return self._tokenizers["generator"]

    def tokenizer_for(self, role: str):
        return self._tokenizers[_check_role(role)]

    def sample(self, role: str, prompts: Sequence[Prompt], sampling: SamplingConfig,
               seed: int, *, stop=None) -> GenerationBatch:
        """``role``'s model samples every prompt in one batched call, without gradients (the
        chain's sampler: ``pipeline.chains.Sampler``): every chain stage is sampled frozen,
        training or not. ``stop``: a ``models.stages.StopRule`` that also ends a response."""
        with torch.no_grad():
            return generate(self.sampling_model(role), self.tokenizer_for(role),
                            [p.ids for p in prompts], sampling, seed=seed, stop=stop)

    def sampling_model(self, role: str):
        """What samples for ``role``: a plain copy of its base model with the adapter merged
        in, rewritten from the current adapter at every call (``models.merged.MergedTwin``:
        no LoRA layers to run per token); the peft model itself where the base is 4-bit."""
        model = self.model_for(role)
        if self.quantised:
            return model
        twin = self._twins.get(id(model))
        if twin is None:
            twin = self._twins[id(model)] = MergedTwin(model)
        return twin.model(role)

    def activate(self, role: str) -> None:
        """Make ``role``'s adapter the active (and only trainable) one of its model."""
        self._models[_check_role(role)].set_adapter(role)

    def model_for(self, role: str):
        """``role``'s model with its adapter active. In the shared layout both roles get the
        same object: activate a role again after using the other one."""
        self.activate(role)
        return self._models[role]

    def peft_model(self, role: str):
        """``role``'s peft model as it is, without activating its adapter (readers only: the
        vLLM sampler merges an adapter's weights from it)."""
        return self._models[_check_role(role)]

    @contextmanager
    def reference(self, role: str) -> Iterator[object]:
        """The KL reference policy: ``role``'s model with its reference adapter active when
        :meth:`set_reference` gave it one (``ppo.kl_reference: start``), else its base model
        with every adapter disabled. ``role``'s own adapter is active again after."""
        model = self.model_for(role)
        name = reference_name(role)
        if name not in model.peft_config:
            with torch.no_grad(), model.disable_adapter():
                yield model
            return
        model.set_adapter(name, inference_mode=True)  # frozen: nothing of it is trained
        try:
            with torch.no_grad():
                yield model
        finally:
            self.activate(role)

    def has_reference(self, role: str) -> bool:
        """Whether :meth:`set_reference` gave ``role`` a reference adapter."""
        return reference_name(role) in self._models[_check_role(role)].peft_config

    def set_reference(self, role: str, path: str | Path) -> str:
        """Load an adapter saved by :meth:`save_adapter` as ``role``'s KL reference (a frozen
        adapter beside ``role``'s, named ``<role>_reference``; made on first use); returns its
        ``adapter_version``. ``role``'s own adapter stays active and alone trainable."""
        from peft import get_peft_model_state_dict  # deferred (see the imports)

        model = self._models[_check_role(role)]
        name = reference_name(role)
        if name not in model.peft_config:
            model.add_adapter(name, copy.deepcopy(model.peft_config[role]))
        self._load_weights(role, name, path)
        self.activate(role)  # peft's set_adapter: the active adapter trainable, others frozen
        return tensors_version(get_peft_model_state_dict(model, adapter_name=name))

    def _adapter_state(self, role: str) -> dict[str, torch.Tensor]:
        from peft import get_peft_model_state_dict  # deferred (see the imports)

        return get_peft_model_state_dict(self._models[_check_role(role)], adapter_name=role)

    def trainable_parameters(self, role: str) -> list[torch.nn.Parameter]:
        """The LoRA parameters of ``role`` (for the optimizer); activates ``role``."""
        model = self.model_for(role)
        marker = f".{role}."
        params = [p for name, p in model.named_parameters()
                  if "lora_" in name and marker in name]
        assert params and all(p.requires_grad for p in params), f"no trainable {role} adapter"
        return params

    def adapter_version(self, role: str) -> str:
        """Content hash of ``role``'s adapter weights (changes with every optimizer step)."""
        return tensors_version(self._adapter_state(role))

    def save_adapter(self, role: str, path: str | Path) -> Path:
        """Write ``role``'s adapter as a standard peft folder (``adapter_config.json`` +
        ``adapter_model.safetensors``), atomically: a re-run never sees half a checkpoint."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
        try:
            state = {k: v.detach().to("cpu").contiguous()
                     for k, v in self._adapter_state(role).items()}
            save_file(state, tmp / "adapter_model.safetensors")
            self._models[role].peft_config[role].save_pretrained(str(tmp))
            if path.exists():
                shutil.rmtree(path)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        return path

    def load_adapter(self, role: str, path: str | Path) -> None:
        """Load weights saved by :meth:`save_adapter` into ``role``'s adapter, in place (an
        optimizer over :meth:`trainable_parameters` stays valid)."""
        self._load_weights(role, role, path)
        self.activate(role)

    def _load_weights(self, role: str, name: str, path: str | Path) -> None:
        """Saved adapter weights into ``role``'s model's adapter ``name`` (``role``'s own or
        its reference), after checking they were made like ``role``'s adapter."""
        # deferred (see the imports)
        from peft import PeftConfig, load_peft_weights, set_peft_model_state_dict

        model = self._models[_check_role(role)]
        saved = PeftConfig.from_pretrained(str(path))
        current = model.peft_config[role]
        if (saved.r, saved.lora_alpha, set(saved.target_modules or ())) != \
                (current.r, current.lora_alpha, set(current.target_modules or ())):
            raise ConfigError(
                f"{path}: adapter has r={saved.r}, alpha={saved.lora_alpha}, targets="
                f"{sorted(saved.target_modules or ())}; {role} was built with r={current.r}, "
                f"alpha={current.lora_alpha}, targets={sorted(current.target_modules or ())}")
        weights = load_peft_weights(str(path), device=str(self.device))
        result = set_peft_model_state_dict(model, weights, adapter_name=name)
        missing = [k for k in result.missing_keys if "lora_" in k and f".{name}." in k]
        if missing:
            raise ValueError(f"{path}: adapter is missing {len(missing)} weights, e.g. "
                             f"{missing[0]}")
