"""The MLflow model registry over an :class:`artifacts.tracking.Tracker`: registering LoRA
checkpoints as pyfunc versions that serve the chain (``serving/served.py``), the
``candidate``/``champion`` aliases, and resolving ``models:/<name>@<alias>`` or
``models:/<name>/<version>`` back to a verified checkpoint.

    registry = ModelRegistry(tracker)
    version = registry.register_checkpoint(run_id, ckpt, cfg.tracking.generator_registry_name,
                                           base_model=cfg.model.generator)

A view rather than a second client: it uses the tracker's ``client``, ``experiment_id``,
``tracking_uri`` and ``load_checkpoint``, so the tracker's one client still makes every MLflow
call. It lives in ``serving``, not ``artifacts``, because a version is registered with what it
serves (``served``'s columns and example, ``lora_pyfunc.py``, this package as code). With
``artifacts/tracking.py`` (and ``lora_pyfunc.py``, which MLflow itself executes), the only
modules that import mlflow.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import math
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow.artifacts
import mlflow.pyfunc
from mlflow.entities import LoggedModelOutput
from mlflow.exceptions import MlflowException
from mlflow.models import Model, ModelSignature
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

from artifacts.checkpoints import ADAPTER_DIR, CheckpointInfo, score_basis, training_score
from artifacts.tracking import Tracker
from serving.served import INPUT_COLUMNS, OPTIONAL_COLUMNS, OUTPUT_COLUMNS, example_row

PYFUNC_CODE = Path(__file__).resolve().parent / "lora_pyfunc.py"
REPO = PYFUNC_CODE.parents[1]
# What a version runs: the chain (serving, pipeline's solver, models) and what it imports
# (configs, problems, rewards, the sandbox that judges its code, and tempdirs, which the sandbox,
# the engine and inference make their folders with).
CODE_PACKAGES = ("configs", "models", "pipeline", "problems", "rewards", "sandbox", "serving",
                 "tempdirs")
CANDIDATE, CHAMPION = "candidate", "champion"
BASE_SPEC = "base.json"  # a registered version's base model, dtype, role and checkpoint info
BASE_DIR_ENV = "ADVERSARIAL_BASE_MODEL_DIR"  # where local base models too big to bundle are found
BUNDLE_MAX_BYTES = 200 * 2**20  # a local base model up to this size travels with each version


def base_reference(base_model: str) -> tuple[dict[str, str], Path | None]:
    """How a version records its base model, never as a path of the training machine:
    ``({"base_model", "base_source"}, folder to bundle or None)``. A hub id is recorded as the
    id (``hub``); a local folder by its name, bundled with the version when it is small
    (``bundled``), else found under ``$ADVERSARIAL_BASE_MODEL_DIR/<name>`` where the version is
    loaded (``local``)."""
    base = Path(base_model).expanduser()
    if not base.is_dir():
        return {"base_model": base_model, "base_source": "hub"}, None
    size = sum(f.stat().st_size for f in base.rglob("*") if f.is_file())
    if size <= BUNDLE_MAX_BYTES:
        return {"base_model": base.name, "base_source": "bundled"}, base
    return {"base_model": base.name, "base_source": "local"}, None


def resolve_base(spec: dict[str, Any], bundled: str | None) -> str:
    """The base model to load for a version's ``base.json``: the bundled copy, the folder under
    ``$ADVERSARIAL_BASE_MODEL_DIR``, or the hub id (versions registered before bundling
    recorded a path: used as it is)."""
    source = spec.get("base_source")
    if source == "bundled" and bundled:
        return bundled
    if source == "local":
        root = os.environ.get(BASE_DIR_ENV)
        if not root:
            raise ValueError(f"base model {spec['base_model']!r} was registered as a local "
                             f"folder too big to bundle; set {BASE_DIR_ENV} to the folder "
                             "that holds it")
        return str(Path(root) / spec["base_model"])
    return spec["base_model"]


@contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """``logger`` at WARNING for the block: MLflow's INFO lines are not the user's news."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.setLevel(level)


@dataclass(frozen=True)
class RegisteredVersion:
    """One registered model version and the aliases it holds after registration."""

    name: str
    version: str
    score: float
    aliases: tuple[str, ...]
    model_uri: str  # models:/<name>/<version>


@dataclass(frozen=True)
class RegisteredCheckpoint:
    """A registered version's checkpoint, downloaded and hash-verified, with the base model and
    dtype it was registered on (its ``base.json``)."""

    name: str
    version: str
    alias: str | None  # the alias it was looked up by, if any
    base_model: str  # local path or hub id
    dtype: str | None
    checkpoint: CheckpointInfo
    folder: Path  # the verified checkpoint folder

    @property
    def adapter_dir(self) -> Path:
        return self.folder / ADAPTER_DIR


def champion_rank(tags: dict[str, str]) -> tuple[float, float]:
    """How a registered version ranks for ``champion``: its score (held-out when the run
    evaluated one, ``artifacts.checkpoints.checkpoint_score``), then its training-step score
    as the tie-break. NaN first: no score, never champion.

    >>> champion_rank({"score": "0.5", "training_score": "0.2"}) < champion_rank(
    ...     {"score": "0.5", "training_score": "0.4"}) < champion_rank({"score": "0.6"})
    True
    """
    return (float(tags.get("score", "nan")), float(tags.get("training_score", "-inf")))


class ModelRegistry:
    """The registry of ``tracker``'s MLflow store (see the module docstring)."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker

    def register_checkpoint(self, run_id: str, ckpt: CheckpointInfo, name: str,
                            base_model: str, dtype: str = "float32", *,
                            partner: CheckpointInfo | None = None,
                            config: dict[str, Any] | None = None,
                            example: dict[str, str] | None = None) -> RegisteredVersion:
        """Register ``ckpt`` as a new pyfunc version of ``name`` that runs the five-stage chain
        (``serving/served.py``): ``partner`` is the other role's checkpoint of the same step
        (a generator version writes its tests with it, a discriminator version its chains),
        ``config`` the run's resolved config (sampling, context length), ``example`` the
        input example row (default: a built-in problem). Alias ``candidate`` moves to the new
        version, ``champion`` to the best score so far."""
        ref, bundle = base_reference(base_model)
        with tempfile.TemporaryDirectory() as tmp:
            adapter_root = self.tracker.load_checkpoint(ckpt, Path(tmp) / "ckpt")  # verified
            spec = Path(tmp) / BASE_SPEC
            spec.write_text(json.dumps({**ref, "dtype": dtype, "role": ckpt.role,
                                        "checkpoint": ckpt.to_dict(),
                                        "partner": partner.to_dict() if partner else None,
                                        "config": config}, indent=1))
            artifacts = {"adapter": str(adapter_root / "adapter"), "base": str(spec)}
            if partner is not None:
                partner_root = self.tracker.load_checkpoint(partner,  # verified
                                                            Path(tmp) / "partner")
                artifacts["partner_adapter"] = str(partner_root / "adapter")
            if bundle is not None:  # MLflow stores an artifact under its own file name
                shutil.copytree(bundle, Path(tmp) / "base_model")
                artifacts["base_model"] = str(Path(tmp) / "base_model")
            logged = self.tracker.client.create_logged_model(
                self.tracker.experiment_id, name=f"{ckpt.role}-step{ckpt.step:06d}",
                source_run_id=run_id, model_type="lora-pyfunc",
                tags={"content_hash": ckpt.content_hash, "role": ckpt.role})
            import pandas as pd  # deferred: heavy, and only registration needs it

            with warnings.catch_warnings(), _quiet("mlflow.pyfunc"):
                # With an explicit signature MLflow checks the example against it (and says so
                # at INFO, once per version); it does not run the model (which would cost a
                # generation per registration).
                warnings.simplefilter("ignore", UserWarning)
                mlflow.pyfunc.save_model(
                    str(Path(tmp) / "model"), python_model=str(PYFUNC_CODE),
                    artifacts=artifacts, code_paths=[str(REPO / p) for p in CODE_PACKAGES],
                    signature=signature(ckpt.role),
                    input_example=pd.DataFrame([example or example_row()]),
                    pip_requirements=_requirements(),
                    mlflow_model=Model(artifact_path=logged.artifact_location, run_id=run_id,
                                       model_id=logged.model_id, model_uuid=logged.model_id))
            self.tracker.client.log_model_artifacts(logged.model_id, str(Path(tmp) / "model"))
        self.tracker.client.finalize_logged_model(logged.model_id, "READY")
        self.tracker.client.log_outputs(run_id, [LoggedModelOutput(logged.model_id, ckpt.step)])
        try:
            self.tracker.client.create_registered_model(name)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        tie_break = training_score(ckpt.metrics)
        tags = {"score": repr(ckpt.score), "score_basis": score_basis(ckpt.metrics),
                **({} if tie_break is None else {"training_score": repr(tie_break)}),
                "role": ckpt.role, "step": str(ckpt.step),
                "stage": str(ckpt.stage), "content_hash": ckpt.content_hash,
                "checkpoint": f"runs:/{run_id}/{ckpt.artifact_path}",
                **{f"metric.{k}": repr(v) for k, v in ckpt.metrics.items()}}
        # source = the logged model's storage location, not "models:/<id>": MLflow 3.17's SQL
        # registry resolves "models:/<id>" with a client on the *global* tracking URI.
        description = (f"{ckpt.role} adapter after training stage {ckpt.stage}, step "
                       f"{ckpt.step} (score {ckpt.score:.3f} on {score_basis(ckpt.metrics)}) "
                       f"of MLflow run {run_id}; base model "
                       f"{ref['base_model']} ({ref['base_source']}). Serves the five-stage "
                       "chain" + (f" with the {partner.role} of the same step" if partner else "")
                       + "; input: description, entry_point.")
        mv = self.tracker.client.create_model_version(name, source=logged.artifact_location,
                                              run_id=run_id, tags=tags, model_id=logged.model_id,
                                              description=description)
        self.tracker.client.set_registered_model_alias(name, CANDIDATE, mv.version)
        self._update_champion(name)
        aliases = tuple(self.tracker.client.get_model_version(name, mv.version).aliases)
        return RegisteredVersion(name, str(mv.version), ckpt.score, aliases,
                                 f"models:/{name}/{mv.version}")

    def _update_champion(self, name: str) -> None:
        """``champion`` moves only to a version that ranks strictly higher
        (:func:`champion_rank`)."""
        versions = self.tracker.client.search_model_versions(f"name = '{name}'")
        ranked = [r for r in ((champion_rank(v.tags), v.version) for v in versions)
                  if not math.isnan(r[0][0])]
        if not ranked:
            return
        best_rank, best = max(ranked, key=lambda r: (r[0], -int(r[1])))  # ties: the earlier
        try:
            current = self.tracker.client.get_model_version_by_alias(name, CHAMPION)
            if champion_rank(current.tags) >= best_rank:
                return
        except MlflowException:
            pass  # no champion yet
        self.tracker.client.set_registered_model_alias(name, CHAMPION, best)

    def alias_version(self, name: str, alias: str) -> str | None:
        """Version number holding ``alias``, or None."""
        try:
            return str(self.tracker.client.get_model_version_by_alias(name, alias).version)
        except MlflowException:
            return None

    def resolve_model_uri(self, model_uri: str) -> tuple[str, str]:
        """(name, version) for ``models:/<name>@<alias>`` or ``models:/<name>/<version>``."""
        m = re.fullmatch(r"models:/([^/@]+)(?:@([^/]+)|/(\d+))", model_uri)
        if not m:
            raise ValueError(f"{model_uri!r}: expected models:/<name>@<alias> or "
                             "models:/<name>/<version>")
        name, alias, version = m.groups()
        if alias:
            version = self.alias_version(name, alias)
            if version is None:
                raise ValueError(f"{model_uri}: no version of {name!r} has alias {alias!r} in "
                                 f"{self.tracker.tracking_uri}")
        return name, str(version)

    def load_registered(self, model_uri: str) -> Any:
        """``mlflow.pyfunc`` model for ``models:/<name>@<alias>`` or ``models:/<name>/<v>``
        from this tracker's registry. Resolved here rather than by ``mlflow.pyfunc.load_model``
        because MLflow resolves ``models:/`` URIs against the *global* registry URI, and
        setting that is process-wide state."""
        name, version = self.resolve_model_uri(model_uri)
        with tempfile.TemporaryDirectory() as tmp:
            local = self._download_version(name, version, tmp)
            # load_context reads the artifacts during load_model, so the temp copy can go.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "add type hints to predict"
                return mlflow.pyfunc.load_model(local)

    def registered_base_spec(self, name: str, version: str) -> dict[str, Any]:
        """``base.json`` of a registered version: base model, dtype, role and checkpoint info.

        It lives in the pyfunc folder of the version's logged model, so only that file is
        fetched."""
        with tempfile.TemporaryDirectory() as tmp:
            local = self._download_version(name, version, tmp, f"artifacts/{BASE_SPEC}")
            return json.loads(Path(local).read_text())

    def registered_checkpoint(self, model_uri: str, dst: str | Path) -> RegisteredCheckpoint:
        """The checkpoint registered as ``models:/<name>@<alias>`` or ``models:/<name>/<v>``,
        downloaded into ``dst/<name>-v<version>`` with every hash verified, and the base model
        it goes on. Raises ``ValueError`` naming an alias no version holds.

        The checkpoint itself, not the pyfunc copy of its adapter, is what is fetched: only the
        checkpoint has the manifest that the hashes are checked against."""
        name, version = self.resolve_model_uri(model_uri)
        base = self.registered_base_spec(name, version)
        ckpt = CheckpointInfo(**base["checkpoint"])
        folder = self.tracker.load_checkpoint(ckpt, Path(dst) / f"{name}-v{version}")
        bundled = None
        if base.get("base_source") == "bundled":
            bundled = self._download_version(name, version, str(Path(dst) / f"{name}-v{version}"
                                                                 "-base"), "artifacts/base_model")
        return RegisteredCheckpoint(name, version, model_uri.partition("@")[2] or None,
                                    resolve_base(base, bundled), base.get("dtype"), ckpt, folder)

    def _download_version(self, name: str, version: str, dst: str, path: str = "") -> str:
        """A registered version's logged model (or ``path`` inside it) into ``dst``; the
        version's storage location comes from this tracker's client (see
        :meth:`load_registered`)."""
        location = self.tracker.client.get_model_version_download_uri(name, version)
        uri = f"{location.rstrip('/')}/{path}" if path else location
        return mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=dst,
                                                   tracking_uri=self.tracker.tracking_uri)


def signature(role: str) -> ModelSignature:
    """A version's declared input, output and params (``serving/served.py``); only the default
    of ``with_tests`` differs between the roles."""
    inputs = [ColSpec("string", c) for c in INPUT_COLUMNS] + [
        ColSpec("string", c, required=False) for c in OPTIONAL_COLUMNS]
    return ModelSignature(
        inputs=Schema(inputs),
        outputs=Schema([ColSpec("string", c, required=c != "code") for c in OUTPUT_COLUMNS]),
        params=ParamSchema([ParamSpec("with_tests", "boolean", role == "discriminator"),
                            ParamSpec("seed", "long", 0),
                            ParamSpec("max_new_tokens", "long", 0)]))


def _requirements() -> list[str]:
    """Pinned from this environment: given explicitly, MLflow skips its slow inference."""
    out = []
    for pkg in ("mlflow", "torch", "transformers", "peft", "tokenizers", "safetensors", "pandas"):
        try:
            out.append(f"{pkg}=={importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(pkg)
    return out
