"""MLflow tracking: runs, params, namespaced metrics, LoRA checkpoints and the model registry.

The only project module that imports mlflow (besides ``lora_pyfunc.py``, the model-from-code
file MLflow itself executes when loading a registered version). Every call goes through an
``MlflowClient`` with an explicit run id: the fluent API keeps an active run per thread and is
not safe inside concurrently running Prefect tasks.

Where things live (defaults): tracking + registry in ``sqlite:///<repo>/mlflow.db``, artifacts in
``<repo>/mlartifacts/``. ``TrackingConfig.tracking_uri`` overrides, then ``$MLFLOW_TRACKING_URI``.
Open the UI with ``mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1
--workers 1``.

    tracker = Tracker.from_config(cfg.tracking)
    run_id = tracker.start_run(cfg, flow_run_id=str(flow_run.id))
    tracker.log_metrics(run_id, {"generator/pass_rate": 0.4, "ppo/approx_kl": 0.01}, step=3)
    ckpt = tracker.save_checkpoint(run_id, "generator", step=3, stage=1, adapter=peft_model,
                                   metrics={"generator_reward": 0.4, "test_validity": 0.8})
    tracker.register_checkpoint(run_id, ckpt, cfg.tracking.generator_registry_name,
                                base_model=cfg.model.generator)
"""

from __future__ import annotations

import os

# Before mlflow is imported: it reads these at import time. Offline system: no telemetry.
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bars in task logs

import importlib.metadata  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import mlflow  # noqa: E402
import mlflow.artifacts  # noqa: E402
import mlflow.pyfunc  # noqa: E402
from mlflow import MlflowClient  # noqa: E402
from mlflow.entities import LoggedModelOutput, Metric, Param, RunTag  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.models import Model, ModelSignature  # noqa: E402
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema  # noqa: E402

from artifacts.checkpoints import (  # noqa: E402
    ADAPTER_DIR,
    CheckpointCorruptError,
    CheckpointInfo,
    read_checkpoint_info,
    verify_checkpoint_dir,
    write_checkpoint_dir,
)

REPO = Path(__file__).resolve().parent.parent
PYFUNC_CODE = Path(__file__).resolve().parent / "lora_pyfunc.py"
TAG_FLOW_RUN = "prefect.flow_run_id"
TAG_CONFIG_HASH = "config.hash"
TAG_GIT = "mlflow.source.git.commit"
TAG_RUN_ID = "adversarial.run_id"  # the training run id (resumes share one MLflow run)
CANDIDATE, CHAMPION = "candidate", "champion"
BASE_SPEC = "base.json"  # a registered version's base model, dtype, role and checkpoint info
_METRIC_KEY = re.compile(r"^[a-z][a-z0-9_]*/[A-Za-z0-9_./-]+$")
_PARAM_MAX = 6000  # MLflow's limit on a param value's length


def resolve_tracking_uri(configured: str | None = None) -> str:
    """Config value, else ``$MLFLOW_TRACKING_URI``, else SQLite beside the repository."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{REPO}/mlflow.db"


def default_artifact_location(tracking_uri: str) -> str | None:
    """``<folder of the db>/mlartifacts`` for SQLite; None lets a tracking server decide."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    # SQLAlchemy form: sqlite:///relative.db or sqlite:////absolute.db (urlparse keeps "//").
    db = Path(tracking_uri[len("sqlite:///"):].split("?", 1)[0]).resolve()
    return (db.parent / "mlartifacts").as_uri()


def git_commit(repo: Path = REPO) -> str:
    """HEAD's commit (``+dirty`` with uncommitted changes), or ``unknown`` outside git."""
    try:
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}+dirty" if dirty else sha


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


class Tracker:
    """MLflow for one experiment; pickles without its client (rebuilt lazily in each task)."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = "adversarial-reasoning",
                 artifact_location: str | None = None) -> None:
        self.tracking_uri = resolve_tracking_uri(tracking_uri)
        self.experiment = experiment
        self.artifact_location = artifact_location or default_artifact_location(
            self.tracking_uri)
        self._client: MlflowClient | None = None
        self._experiment_id: str | None = None

    @classmethod
    def from_config(cls, cfg: Any, artifact_location: str | None = None) -> Tracker:
        """From a ``TrackingConfig``."""
        return cls(cfg.tracking_uri, cfg.experiment, artifact_location)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.tracking_uri,
                                        registry_uri=self.tracking_uri)
        return self._client

    @property
    def experiment_id(self) -> str:
        if self._experiment_id is None:
            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is None:
                try:
                    self._experiment_id = self.client.create_experiment(
                        self.experiment, artifact_location=self.artifact_location)
                except MlflowException:  # created concurrently by another task
                    self._experiment_id = self.client.get_experiment_by_name(
                        self.experiment).experiment_id
            else:
                self._experiment_id = exp.experiment_id
        return self._experiment_id

    # -- runs, params, metrics -----------------------------------------------------------------
    def start_run(self, cfg: Any, flow_run_id: str | None = None, *, run_name: str | None = None,
                  commit: str | None = None, tags: Mapping[str, str] | None = None) -> str:
        """The parent run of one training flow run: tagged with the Prefect flow-run id, the git
        commit and the config hash, params logged once from ``cfg`` (a ``TrainConfig``).

        A retried flow run (same ``flow_run_id``) gets its existing run back; a changed config
        under the same flow run is refused rather than mixed into one run.
        """
        from configs.loader import config_hash, config_to_dict, flatten

        chash = config_hash(cfg)
        if flow_run_id:
            found = self.client.search_runs(
                [self.experiment_id], f"tags.`{TAG_FLOW_RUN}` = '{flow_run_id}'", max_results=1)
            if found:
                run = found[0]
                if run.data.tags.get(TAG_CONFIG_HASH) != chash:
                    raise ValueError(f"MLflow run {run.info.run_id} of flow run {flow_run_id} "
                                     f"has config {run.data.tags.get(TAG_CONFIG_HASH)}, not "
                                     f"{chash}; start a new flow run for a new config")
                if run.info.status != "RUNNING":
                    self.client.update_run(run.info.run_id, status="RUNNING")
                return run.info.run_id
        all_tags = {TAG_FLOW_RUN: flow_run_id or "", TAG_CONFIG_HASH: chash,
                    TAG_GIT: commit or git_commit(), "config.name": str(cfg.name),
                    "mlflow.source.type": "JOB", **(tags or {})}
        run = self.client.create_run(self.experiment_id, run_name=run_name or cfg.name,
                                     tags=all_tags)
        params = [Param(k, _param_value(v)) for k, v in flatten(config_to_dict(cfg)).items()]
        self.client.log_batch(run.info.run_id, params=params)
        return run.info.run_id

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int) -> None:
        """Log namespaced metrics (``generator/pass_rate``, ``ppo/approx_kl``, ...) at ``step``
        in one batched call."""
        now = int(time.time() * 1000)
        batch = []
        for key, value in metrics.items():
            if not _METRIC_KEY.match(key):
                raise ValueError(f"metric {key!r}: use 'namespace/name' (e.g. generator/"
                                 "pass_rate, discriminator/validity, ppo/approx_kl, sandbox/"
                                 "timeouts)")
            try:
                batch.append(Metric(key, float(value), now, int(step)))
            except (TypeError, ValueError):
                raise ValueError(f"metric {key}={value!r}: not a number") from None
        self.client.log_batch(run_id, metrics=batch)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        self.client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_dict(self, run_id: str, data: Mapping[str, Any], artifact_file: str) -> None:
        """A small JSON/YAML artifact (by extension), e.g. the resolved config or a summary."""
        self.client.log_dict(run_id, dict(data), artifact_file)

    def run_for(self, cfg: Any, run_id: str, flow_run_id: str | None = None) -> str:
        """The MLflow run of training run ``run_id``: the existing one when the run is resumed
        (a new flow run continuing an old run id), else a new parent run tagged with it."""
        found = self.client.search_runs(
            [self.experiment_id], f"tags.`{TAG_RUN_ID}` = '{run_id}'", max_results=1)
        if found:
            run = found[0]
            if run.info.status != "RUNNING":
                self.client.update_run(run.info.run_id, status="RUNNING")
            if flow_run_id:
                self.client.set_tag(run.info.run_id, TAG_FLOW_RUN, flow_run_id)
            return run.info.run_id
        return self.start_run(cfg, flow_run_id, run_name=run_id, tags={TAG_RUN_ID: run_id})

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        """``FINISHED``, ``FAILED`` or ``KILLED``."""
        self.client.set_terminated(run_id, status=status)

    # -- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, run_id: str, role: str, step: int, stage: int, adapter: Any,
                        metrics: Mapping[str, float], optimizer_state: Any = None,
                        extra: Mapping[str, Any] | None = None) -> CheckpointInfo:
        """Log a LoRA checkpoint (adapter folder, optional optimizer state, manifest with
        hashes) under ``checkpoints/<role>/step-<NNNNNN>`` of the run. The manifest is uploaded
        last: a checkpoint interrupted mid-upload has none and is never listed."""
        path = f"checkpoints/{role}/step-{int(step):06d}"
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            info = write_checkpoint_dir(out, adapter, role=role, step=step, stage=stage,
                                        metrics=metrics, optimizer_state=optimizer_state,
                                        extra=extra)
            for item in sorted(out.iterdir()):
                if item.name == "checkpoint.json":
                    continue
                if item.is_dir():
                    self.client.log_artifacts(run_id, str(item), f"{path}/{item.name}")
                else:
                    self.client.log_artifact(run_id, str(item), path)
            self.client.log_artifact(run_id, str(out / "checkpoint.json"), path)
        self.log_metrics(run_id, {f"checkpoint/{role}_score": info.score}, step=step)
        return CheckpointInfo(**{**info.to_dict(), "run_id": run_id, "artifact_path": path})

    def list_checkpoints(self, run_id: str, role: str | None = None) -> list[CheckpointInfo]:
        """Complete checkpoints of a run (those whose manifest was uploaded), oldest first."""
        roles = [role] if role else [f.path.rsplit("/", 1)[1] for f in
                                     self.client.list_artifacts(run_id, "checkpoints") if f.is_dir]
        out = []
        with tempfile.TemporaryDirectory() as tmp:
            for r in roles:
                for d in self.client.list_artifacts(run_id, f"checkpoints/{r}"):
                    names = {f.path.rsplit("/", 1)[1]
                             for f in self.client.list_artifacts(run_id, d.path)}
                    if not d.is_dir or "checkpoint.json" not in names:
                        continue
                    local = self.client.download_artifacts(run_id, f"{d.path}/checkpoint.json",
                                                           tmp)
                    out.append(read_checkpoint_info(Path(local), run_id=run_id,
                                                    artifact_path=d.path))
        return sorted(out, key=lambda c: (c.step, c.role))

    def latest_checkpoint(self, run_id: str, role: str) -> CheckpointInfo | None:
        found = self.list_checkpoints(run_id, role)
        return found[-1] if found else None

    def best_checkpoint(self, run_id: str, role: str) -> CheckpointInfo | None:
        """Highest score; the earlier checkpoint wins a tie (a later one must beat it)."""
        found = self.list_checkpoints(run_id, role)
        return max(found, key=lambda c: (c.score, -c.step)) if found else None

    def load_checkpoint(self, ckpt: CheckpointInfo, dst: str | Path) -> Path:
        """Download a checkpoint into ``dst`` and verify every hash before returning the folder
        (``<folder>/adapter`` for ``PeftModel.from_pretrained``, ``<folder>/optimizer.pt``)."""
        if not ckpt.run_id or not ckpt.artifact_path:
            raise ValueError("checkpoint info has no run_id/artifact_path (use list_checkpoints)")
        dst = Path(dst)
        dst.mkdir(parents=True, exist_ok=True)
        try:
            local = Path(self.client.download_artifacts(ckpt.run_id, ckpt.artifact_path,
                                                        str(dst)))
        except (MlflowException, OSError) as exc:
            raise CheckpointCorruptError(f"runs:/{ckpt.run_id}/{ckpt.artifact_path}: cannot "
                                         f"download ({exc})") from None
        info = verify_checkpoint_dir(local)
        if info.content_hash != ckpt.content_hash:
            raise CheckpointCorruptError(f"{local}: content hash {info.content_hash[:12]} is not "
                                         f"the expected {ckpt.content_hash[:12]}")
        return local

    # -- registry ------------------------------------------------------------------------------
    def register_checkpoint(self, run_id: str, ckpt: CheckpointInfo, name: str,
                            base_model: str, dtype: str = "float32") -> RegisteredVersion:
        """Register ``ckpt`` as a new pyfunc version of ``name`` (base + adapter, generating
        text); alias ``candidate`` moves to it, ``champion`` to the best score so far."""
        base = Path(base_model)
        base_ref = str(base.resolve()) if base.exists() else base_model  # local path or hub id
        with tempfile.TemporaryDirectory() as tmp:
            adapter_root = self.load_checkpoint(ckpt, Path(tmp) / "ckpt")  # verified
            spec = Path(tmp) / BASE_SPEC
            spec.write_text(json.dumps({"base_model": base_ref, "dtype": dtype, "role": ckpt.role,
                                        "checkpoint": ckpt.to_dict()}, indent=1))
            logged = self.client.create_logged_model(
                self.experiment_id, name=f"{ckpt.role}-step{ckpt.step:06d}",
                source_run_id=run_id, model_type="lora-pyfunc",
                tags={"content_hash": ckpt.content_hash, "role": ckpt.role})
            with warnings.catch_warnings():
                # "add type hints to predict" / "no input example": the explicit signature
                # below covers both; an input example would make MLflow run the model here.
                warnings.simplefilter("ignore", UserWarning)
                mlflow.pyfunc.save_model(
                    str(Path(tmp) / "model"), python_model=str(PYFUNC_CODE),
                    artifacts={"adapter": str(adapter_root / "adapter"), "base": str(spec)},
                    signature=_SIGNATURE, pip_requirements=_requirements(),
                    mlflow_model=Model(artifact_path=logged.artifact_location, run_id=run_id,
                                       model_id=logged.model_id, model_uuid=logged.model_id))
            self.client.log_model_artifacts(logged.model_id, str(Path(tmp) / "model"))
        self.client.finalize_logged_model(logged.model_id, "READY")
        self.client.log_outputs(run_id, [LoggedModelOutput(logged.model_id, ckpt.step)])
        try:
            self.client.create_registered_model(name)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        tags = {"score": repr(ckpt.score), "role": ckpt.role, "step": str(ckpt.step),
                "stage": str(ckpt.stage), "content_hash": ckpt.content_hash,
                "checkpoint": f"runs:/{run_id}/{ckpt.artifact_path}",
                **{f"metric.{k}": repr(v) for k, v in ckpt.metrics.items()}}
        # source = the logged model's storage location, not "models:/<id>": MLflow 3.17's SQL
        # registry resolves "models:/<id>" with a client on the *global* tracking URI.
        mv = self.client.create_model_version(name, source=logged.artifact_location,
                                              run_id=run_id, tags=tags, model_id=logged.model_id)
        self.client.set_registered_model_alias(name, CANDIDATE, mv.version)
        self._update_champion(name)
        aliases = tuple(self.client.get_model_version(name, mv.version).aliases)
        return RegisteredVersion(name, str(mv.version), ckpt.score, aliases,
                                 f"models:/{name}/{mv.version}")

    def _update_champion(self, name: str) -> None:
        """``champion`` moves only when another version scores strictly higher."""
        versions = self.client.search_model_versions(f"name = '{name}'")
        scored = [(float(v.tags.get("score", "nan")), -int(v.version), v.version)
                  for v in versions if not math.isnan(float(v.tags.get("score", "nan")))]
        if not scored:
            return
        best = max(scored)
        try:
            current = self.client.get_model_version_by_alias(name, CHAMPION)
            if float(current.tags.get("score", "-inf")) >= best[0]:
                return
        except MlflowException:
            pass  # no champion yet
        self.client.set_registered_model_alias(name, CHAMPION, best[2])

    def alias_version(self, name: str, alias: str) -> str | None:
        """Version number holding ``alias``, or None."""
        try:
            return str(self.client.get_model_version_by_alias(name, alias).version)
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
                                 f"{self.tracking_uri}")
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
        folder = self.load_checkpoint(ckpt, Path(dst) / f"{name}-v{version}")
        return RegisteredCheckpoint(name, version, model_uri.partition("@")[2] or None,
                                    base["base_model"], base.get("dtype"), ckpt, folder)

    def _download_version(self, name: str, version: str, dst: str, path: str = "") -> str:
        """A registered version's logged model (or ``path`` inside it) into ``dst``; the
        version's storage location comes from this tracker's client (see
        :meth:`load_registered`)."""
        location = self.client.get_model_version_download_uri(name, version)
        uri = f"{location.rstrip('/')}/{path}" if path else location
        return mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=dst,
                                                   tracking_uri=self.tracking_uri)


_SIGNATURE = ModelSignature(inputs=Schema([ColSpec("string", "prompt")]),
                            outputs=Schema([ColSpec("string")]),
                            params=ParamSchema([ParamSpec("max_new_tokens", "long", 32)]))


def _requirements() -> list[str]:
    """Pinned from this environment: given explicitly, MLflow skips its slow inference."""
    out = []
    for pkg in ("mlflow", "torch", "transformers", "peft", "tokenizers", "safetensors", "pandas"):
        try:
            out.append(f"{pkg}=={importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(pkg)
    return out


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= _PARAM_MAX else text[:_PARAM_MAX - 3] + "..."
