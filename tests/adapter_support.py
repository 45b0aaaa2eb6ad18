"""Random, non-trivial LoRA adapters on the tiny model, for checkpoint and registry tests."""

from __future__ import annotations

from pathlib import Path

import torch


def random_adapter(model_dir: Path, seed: int):
    """The tiny Qwen2 with a LoRA adapter (r=4 on q_proj, v_proj) whose B weights are random,
    so the adapter is not a no-op and reloading the wrong one changes the logits."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    peft = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * 0.5)
    return peft.eval()
