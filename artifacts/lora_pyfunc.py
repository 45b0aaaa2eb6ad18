"""MLflow pyfunc model "from code": a base causal LM plus one LoRA adapter, generating greedily.

``artifacts.tracking.register_checkpoint`` passes this file as ``python_model``; MLflow copies it
into every registered model version and executes it on load. It therefore imports nothing from
this repository, so ``mlflow.pyfunc.load_model("models:/<name>@champion")`` works in a fresh
process anywhere the base model path or hub id resolves.

The version's artifacts hold the adapter folder, ``base.json`` naming the base model, and,
for a small local base model, its copy (``base_model``): a hub id is loaded by id, a big local
folder from ``$ADVERSARIAL_BASE_MODEL_DIR/<name>``; never a path of the training machine.

Input: a DataFrame with a ``prompt`` column; output: one generated
string per prompt (greedy; params ``max_new_tokens``, default 32). Reloading goes through
``PeftModel.from_pretrained``, not ``mlflow.transformers``, which in MLflow 3.17 re-initialises
LoRA weights on reload for a base model without a hub id.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mlflow.models import set_model
from mlflow.pyfunc import PythonModel


class LoraTextModel(PythonModel):
    """Base model + adapter; loaded lazily in ``load_context`` (torch imports stay off the
    registration path)."""

    def load_context(self, context) -> None:
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

        spec = json.loads(Path(context.artifacts["base"]).read_text())
        base = spec["base_model"]  # a hub id (or, registered before bundling, a path)
        if "base_model" in context.artifacts:  # bundled with the version
            base = context.artifacts["base_model"]
        elif spec.get("base_source") == "local":
            root = os.environ.get("ADVERSARIAL_BASE_MODEL_DIR")
            if not root:
                raise ValueError(f"base model {base!r} is not bundled with this version; set "
                                 "ADVERSARIAL_BASE_MODEL_DIR to the folder that holds it")
            base = str(Path(root) / base)
        # The tiny offline tokenizer is a bare PreTrainedTokenizerFast: AutoTokenizer cannot
        # resolve its class, so it is detected by the spec file the tiny builder writes.
        tok_cls = (PreTrainedTokenizerFast if (Path(base) / "tiny_spec.json").exists()
                   else AutoTokenizer)
        self.tokenizer = tok_cls.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(
            base, dtype=getattr(torch, spec.get("dtype", "float32")))
        self.model = PeftModel.from_pretrained(model, context.artifacts["adapter"]).eval()
        self.role = spec.get("role")

    def predict(self, context, model_input, params=None):
        import torch

        max_new = int((params or {}).get("max_new_tokens", 32))
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        outputs = []
        for prompt in list(model_input["prompt"]):
            # One prompt per generate call: no padding, so no left/right padding pitfalls.
            enc = tok(str(prompt), return_tensors="pt")
            with torch.no_grad():
                ids = self.model.generate(**enc, max_new_tokens=max_new, do_sample=False,
                                          pad_token_id=pad)
            outputs.append(tok.decode(ids[0, enc["input_ids"].shape[1]:],
                                      skip_special_tokens=True))
        return outputs


set_model(LoraTextModel())
