"""An adapter merged into its base weights: ``W + B A * alpha/r``, computed by peft.

Two users, one merge:

- the vLLM sampler (``models.engine.sampler``) writes :func:`merged_weights` of a role to a
  file the engine loads in place;
- :class:`MergedTwin` is the transformers sampler's model: a plain copy of the base model
  whose adapted matrices are overwritten with one role's merged weights before each sampling
  call. A peft model computes ``base(x) + B(A(x)) * s`` in every adapted layer (two more small
  matmuls, a scale and an add each, in Python); the twin runs the plain layer, so it samples
  the same outputs in less time (docs/training.md, *Rollouts on vLLM*, gives the figures).

The twin's log-probs differ from the trainer's forward pass by float rounding (``W + BA`` is
one rounded matrix, ``Wx + B(Ax)`` two sums), so PPO's ratio takes its old log-probs from the
trainer's own pass (``pipeline.update``), as under vLLM.
"""

from __future__ import annotations

import copy
from typing import Any

import torch


def dense(weight: torch.Tensor) -> torch.Tensor:
    """A weight as a plain matrix: 4-bit NF4 weights (``model.load_in_4bit``, CUDA only) are
    dequantised, so a merge gets the weights the trainer computes with."""
    state = getattr(weight, "quant_state", None)
    if state is None:
        return weight
    import bitsandbytes.functional as bnbf  # only reachable on CUDA, where it is installed

    return bnbf.dequantize_4bit(weight.data, state)


def lora_modules(model: Any) -> dict[str, Any]:
    """Every LoRA-wrapped module of a peft model, by its name in the model."""
    from peft.tuners.lora import LoraLayer  # peft deferred like models.policy's

    return {name: module for name, module in model.named_modules()
            if isinstance(module, LoraLayer)}


def merged_matrix(module: Any, role: str) -> torch.Tensor:
    """One LoRA module's base weight with ``role``'s delta added (the base alone where
    ``role`` has no adapter there)."""
    weight = dense(module.get_base_layer().weight)
    if role not in module.lora_A:
        return weight
    delta = module.get_delta_weight(role)
    return weight.to(delta.dtype) + delta


def base_key(name: str) -> str:
    """A peft module name as the base model (and its checkpoint) names it."""
    return name.removeprefix("base_model.model.")


def merged_weights(model: Any, role: str) -> dict[str, torch.Tensor]:
    """The base model's parameters that ``role``'s adapter changes, merged, named as the
    checkpoint names them (what the vLLM engine loads), on the CPU.

    Whole blocks, not only the adapted matrices: the engine fuses q/k/v (and gate/up) into one
    layer and reloads a layer from all of its checkpoint tensors, so every parameter of each
    block an adapted module sits in (``self_attn``, ``mlp``; biases too) goes with it."""
    adapted = {name for name, module in lora_modules(model).items() if role in module.lora_A}
    if not adapted:
        raise ValueError(f"{role}: no LoRA module found to merge")
    blocks = {name.rpartition(".")[0] for name in adapted}
    out = {}
    with torch.no_grad():
        for block in sorted(blocks):
            for name, module in model.get_submodule(block).named_children():
                full = f"{block}.{name}"
                key = base_key(full)
                if full in adapted:
                    base = module.get_base_layer()
                    out[key + ".weight"] = merged_matrix(module, role)
                    bias = base.bias
                else:
                    base, bias = module, getattr(module, "bias", None)
                    if getattr(module, "weight", None) is None:
                        continue
                    out[key + ".weight"] = dense(base.weight)
                if bias is not None:
                    out[key + ".bias"] = bias
    return {k: v.detach().to("cpu").contiguous() for k, v in out.items()}


class MergedTwin:
    """A plain copy of a peft model's base model (no LoRA layers), for sampling.

    :meth:`model` writes ``role``'s merged matrices into it first, every call, so it never
    samples from a stale adapter (a write is a handful of matrices: milliseconds on the tiny
    model). It holds the base weights a second time, so it is made only for unquantised
    models (``models.policy.Policies``)."""

    def __init__(self, peft_model: Any) -> None:
        self._twin = copy.deepcopy(peft_model).unload()  # LoRA layers replaced by their bases
        self._twin.eval()
        for param in self._twin.parameters():
            param.requires_grad_(False)
        self._pairs = [(module, self._twin.get_submodule(base_key(name)))
                       for name, module in lora_modules(peft_model).items()]

    def model(self, role: str) -> Any:
        """The twin with ``role``'s adapter merged into it."""
        with torch.no_grad():
            for module, target in self._pairs:
                target.weight.copy_(merged_matrix(module, role).to(target.weight.dtype))
        return self._twin
