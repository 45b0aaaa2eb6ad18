"""MLflow pyfunc model "from code": the five-stage chain (and tests) of one registered version.

``serving.registry`` passes this file as ``python_model`` and the packages the chain needs
(``CODE_PACKAGES``: ``serving``, ``models``, ``configs``, ...) as ``code_paths``; MLflow copies
both into every version and puts the packages on ``sys.path`` on load. So
``mlflow.pyfunc.load_model("models:/<name>@champion")`` runs the same chain code as training in
a fresh process anywhere the base model resolves, without this repository.

The version's artifacts: ``adapter`` (its role's LoRA adapter), ``partner_adapter`` (the other
role's, saved at the same step, when there is one), ``base.json`` (base model reference, dtype,
role, checkpoint info, the run's resolved config) and, for a small local base model, its copy
``base_model``. A hub id is loaded by id, a big local folder from
``$ADVERSARIAL_BASE_MODEL_DIR/<name>``; never a path of the training machine.

Input, output and params: see ``serving/served.py``. Reloading goes through
``PeftModel.from_pretrained`` (inside the engine), not ``mlflow.transformers``, which in MLflow
3.17 re-initialises LoRA weights on reload for a base model without a hub id.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.models import set_model
from mlflow.pyfunc import PythonModel

from serving.served import ChainPredictor


def _base_model(spec: dict[str, Any], artifacts: dict[str, str]) -> str:
    if "base_model" in artifacts:  # bundled with the version
        return artifacts["base_model"]
    if spec.get("base_source") == "local":
        root = os.environ.get("ADVERSARIAL_BASE_MODEL_DIR")
        if not root:
            raise ValueError(f"base model {spec['base_model']!r} is not bundled with this "
                             "version; set ADVERSARIAL_BASE_MODEL_DIR to the folder that holds it")
        return str(Path(root) / spec["base_model"])
    return spec["base_model"]  # a hub id


class ChainModel(PythonModel):
    """Loaded lazily in ``load_context`` (torch imports stay off the registration path)."""

    def load_context(self, context) -> None:
        spec = json.loads(Path(context.artifacts["base"]).read_text())
        role = spec["role"]
        partner = "discriminator" if role == "generator" else "generator"
        adapters = {role: context.artifacts["adapter"],
                    partner: context.artifacts.get("partner_adapter")}
        self.predictor = ChainPredictor(_base_model(spec, context.artifacts), adapters, role,
                                        spec.get("config"))

    # The type hint is what MLflow reads to stop warning "add type hints" on every load.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        return self.predictor.predict(model_input, params)


set_model(ChainModel())
