"""Trained models put to use: loading any model spec (``sources``), the five-stage chain on new
problems (``inference``), and registered MLflow versions that serve it (``registry`` registers
and resolves them, ``served`` is what a version runs, ``lora_pyfunc`` the file MLflow executes
to load one).

This package sits above ``models`` (policies, prompts, sampling) and ``artifacts`` (run store,
tracking, checkpoints): it imports both, neither imports it; flows and tasks use it. MLflow
bundles it with each registered version (``registry.CODE_PACKAGES``), which then runs
``served`` and ``inference`` without this repository and without ``artifacts`` (not bundled).
Import the submodules directly: this ``__init__`` only sets MLflow's environment, so ``import
serving.served`` stays free of torch and mlflow.
"""

import os

# As in artifacts/__init__.py, and for the same reason: MLflow reads these when it is imported,
# and serving.registry imports it before anything of artifacts. No telemetry, no progress bars.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
