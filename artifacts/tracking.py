"""MLflow tracking: runs, params, namespaced metrics and LoRA checkpoints; the model registry
over a tracker is ``serving.registry.ModelRegistry``.

With ``serving/registry.py``, the only project modules that import mlflow (besides
``serving/lora_pyfunc.py``, the model-from-code file MLflow itself executes when loading a
registered version); callers catch ``MlflowException`` from here. Every call goes through an
``MlflowClient`` with an explicit run id: the fluent API keeps an active run per thread and is
not safe inside concurrently running Prefect tasks.

Where things live (defaults): tracking + registry in ``sqlite:///<repo>/mlflow.db``, artifacts in
``<repo>/mlartifacts/``. ``TrackingConfig.tracking_uri`` overrides, then ``$MLFLOW_TRACKING_URI``.
:func:`run_page` gives the command that serves a store's UI and the address of a run's page.

    tracker = Tracker.from_config(cfg.tracking)
    run_id = tracker.start_run(cfg, flow_run_id=str(flow_run.id))
    tracker.log_metrics(run_id, {"generator/pass_rate": 0.4, "ppo/approx_kl": 0.01}, step=3)
    ckpt = tracker.save_checkpoint(run_id, "generator", step=3, stage=1, adapter=peft_model,
                                   metrics={"generator_reward": 0.4, "test_validity": 0.8})
    registry = ModelRegistry(tracker)  # serving.registry: the registry over this tracker
    registry.register_checkpoint(run_id, ckpt, cfg.tracking.generator_registry_name,
                                 base_model=cfg.model.generator)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mlflow.data
from mlflow import MlflowClient
from mlflow.data.code_dataset_source import CodeDatasetSource
from mlflow.entities import DatasetInput, InputTag, Metric, Param, RunTag
from mlflow.exceptions import MlflowException  # noqa: F401  (re-exported for callers)

from artifacts.checkpoints import (
    CheckpointCorruptError,
    CheckpointInfo,
    read_checkpoint_info,
    verify_checkpoint_dir,
    write_checkpoint_dir,
)
from configs.loader import config_hash, config_to_dict, flatten

REPO = Path(__file__).resolve().parent.parent
TAG_FLOW_RUN = "prefect.flow_run_id"
TAG_CONFIG_HASH = "config.hash"
TAG_GIT = "mlflow.source.git.commit"
TAG_RUN_ID = "adversarial.run_id"  # the training run id (resumes share one MLflow run)
# The experiment's kind, as MLflow 3 names it: model development, not a GenAI app. Which view
# the UI opens is not this tag but its GenAI / Model training switch (see run_page).
TAG_EXPERIMENT_KIND, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"
_METRIC_KEY = re.compile(r"^[a-z][a-z0-9_]*/[A-Za-z0-9_./-]+$")
_PARAM_MAX = 6000  # MLflow's limit on a param value's length
DATASET_RACE_RETRIES = 3
_UNIQUE_RACE = re.compile(r"unique|duplicate key", re.I)  # PostgreSQL's and SQLite's words


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


def run_page(tracking_uri: str, experiment_id: str, run_id: str) -> tuple[str, str | None]:
    """Where a user sees an MLflow run: ``(url, command)``. A tracking server (``http(s)://``)
    serves the page itself (command None); any other store needs ``mlflow ui`` started on it
    first, from the repository root (a store inside it is named relative to it), and the URL is
    that UI's default address.

    The URL opens the run in the UI's *Model training* view (``workflowType``): the UI keeps
    its GenAI / Model training switch in the browser, GenAI until the user flips it, and its
    GenAI view opens an experiment on an empty traces overview.

    >>> run_page("http://mlflow:5000/", "1", "abc")[0]
    'http://mlflow:5000/#/experiments/1/runs/abc?workflowType=machine_learning'
    >>> command = run_page("sqlite:///runs/m.db", "1", "abc")[1]
    >>> print(command.replace(" --", "\\n--"))  # doctest: +ELLIPSIS
    MLFLOW_DISABLE_TELEMETRY=true MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false ...mlflow ui
    --backend-store-uri sqlite:///runs/m.db
    --host 127.0.0.1
    --workers 1
    """
    path = f"#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"
    if tracking_uri.startswith(("http://", "https://")):
        return f"{tracking_uri.rstrip('/')}/{path}", None
    return (f"http://127.0.0.1:5000/{path}",
            f"{UI_ENV} {mlflow_cli()} ui --backend-store-uri {_from_repo(tracking_uri)} "
            "--host 127.0.0.1 --workers 1")


UI_ENV = "MLFLOW_DISABLE_TELEMETRY=true MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false"
"""The environment of the printed ``mlflow ui`` command, for a shell without the Makefile's:
no usage telemetry (which also writes an installation id to ``~/.config/mlflow``), and no
queue for MLflow's GenAI jobs (which nothing here submits), which the server otherwise starts
in a folder it makes in ``/dev/shm`` at every start and never removes, even on SIGTERM
(``deployments/stack.py`` sets the same for its server)."""


def _from_repo(tracking_uri: str) -> str:
    """A SQLite URI of a database inside the repository, relative to it (shorter, and the
    command runs from there); any other URI as it is."""
    prefix = "sqlite:///"
    if tracking_uri.startswith(prefix) and tracking_uri[len(prefix):].startswith("/"):
        db = Path(tracking_uri[len(prefix):])
        if db.is_relative_to(REPO):
            return prefix + db.relative_to(REPO).as_posix()
    return tracking_uri


def mlflow_cli() -> str:
    """The ``mlflow`` command of this interpreter's environment, as a fresh shell in the
    repository root can run it (``.venv/bin/mlflow``: a fresh shell has no activated venv,
    so a bare ``mlflow`` is not found); a bare ``mlflow`` where there is none beside it."""
    beside = Path(sys.executable).parent / "mlflow"
    if not beside.is_file():
        return "mlflow"
    return str(beside.relative_to(REPO)) if beside.is_relative_to(REPO) else str(beside)


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
                        self.experiment, artifact_location=self.artifact_location,
                        tags={TAG_EXPERIMENT_KIND: EXPERIMENT_KIND})
                except MlflowException:  # created concurrently by another task
                    self._experiment_id = self.client.get_experiment_by_name(
                        self.experiment).experiment_id
            else:
                self._experiment_id = exp.experiment_id
                if TAG_EXPERIMENT_KIND not in exp.tags:  # made before the tag was set
                    self.client.set_experiment_tag(self._experiment_id, TAG_EXPERIMENT_KIND,
                                                   EXPERIMENT_KIND)
        return self._experiment_id

    # -- runs, params, metrics -----------------------------------------------------------------
    def start_run(self, cfg: Any, flow_run_id: str | None = None, *, run_name: str | None = None,
                  commit: str | None = None, tags: Mapping[str, str] | None = None) -> str:
        """The parent run of one training flow run: tagged with the Prefect flow-run id, the git
        commit and the config hash, params logged once from ``cfg`` (a ``TrainConfig``).

        A retried flow run (same ``flow_run_id``) gets its existing run back; a changed config
        under the same flow run is refused rather than mixed into one run.
        """
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
        schedule = cfg.schedule
        description = (f"Adversarial PPO training run {run_name or cfg.name} of config "
                       f"{cfg.name!r}: training stages {list(schedule.stages)}, each "
                       f"{schedule.n_discriminator_steps} discriminator + "
                       f"{schedule.n_generator_steps} generator + {schedule.k_alternating} "
                       f"alternating steps; generator {cfg.model.generator}.")
        all_tags = {TAG_FLOW_RUN: flow_run_id or "", TAG_CONFIG_HASH: chash,
                    TAG_GIT: commit or git_commit(), "config.name": str(cfg.name),
                    "mlflow.source.type": "JOB", "mlflow.note.content": description,
                    **(tags or {})}
        run = self.client.create_run(self.experiment_id, run_name=run_name or cfg.name,
                                     tags=all_tags)
        params = [Param(k, _param_value(v)) for k, v in flatten(config_to_dict(cfg)).items()]
        self.client.log_batch(run.info.run_id, params=params)
        self.client.log_dict(run.info.run_id, config_to_dict(cfg), "config.json")  # resolved
        return run.info.run_id

    def log_table(self, run_id: str, frame: Any, artifact_file: str) -> None:
        """A table the MLflow UI shows in the run's artifact viewer (an
        artifact ``*.json`` written by ``log_table``; ``mlflow.load_table`` reads it back)."""
        self.client.log_table(run_id, frame, artifact_file)

    def log_dataset(self, run_id: str, frame: Any, name: str, source: str,
                    context: str = "training") -> None:
        """Log ``frame`` (a pandas DataFrame) as a dataset input of the run (the MLflow UI's
        Datasets column); logging the same data again is a no-op for MLflow (same digest)."""
        with warnings.catch_warnings():
            # MLflow infers the table's schema and hints at integer columns with missing
            # values (8 lines per run); the dataset is logged for lineage, never served.
            warnings.filterwarnings("ignore", message="Hint: Inferred schema contains integer",
                                    category=UserWarning)
            try:
                dataset = mlflow.data.from_pandas(frame, source=source, name=name)
            except MlflowException:  # a source MLflow cannot resolve (family:piecewise:train):
                # recorded by name, as code-generated data
                dataset = mlflow.data.from_pandas(
                    frame, source=CodeDatasetSource({"problems.source": source}), name=name)
            entity = dataset._to_mlflow_entity()  # where the schema is inferred
        inputs = [DatasetInput(entity, tags=[InputTag("mlflow.data.context", context)])]
        for attempt in range(DATASET_RACE_RETRIES + 1):
            try:
                self.client.log_inputs(run_id, datasets=inputs)
                return
            except MlflowException as exc:
                # The server's get-or-create of a dataset is not atomic: two runs logging the
                # same problems at once (two workers) can both try to create it, and one gets a
                # unique-key violation. Again, it finds the other's row and only links it.
                if attempt == DATASET_RACE_RETRIES or not _UNIQUE_RACE.search(str(exc)):
                    raise
                time.sleep(0.2 * (attempt + 1))

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
        run = self.training_run(run_id)
        if run is not None:
            if run.info.status != "RUNNING":
                self.client.update_run(run.info.run_id, status="RUNNING")
            if flow_run_id:
                self.client.set_tag(run.info.run_id, TAG_FLOW_RUN, flow_run_id)
            return run.info.run_id
        return self.start_run(cfg, flow_run_id, run_name=run_id, tags={TAG_RUN_ID: run_id})

    def training_run(self, run_id: str) -> Any:
        """The MLflow run (``mlflow.entities.Run``) tagged with training run ``run_id``, or
        None."""
        found = self.client.search_runs(
            [self.experiment_id], f"tags.`{TAG_RUN_ID}` = '{run_id}'", max_results=1)
        return found[0] if found else None

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


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= _PARAM_MAX else text[:_PARAM_MAX - 3] + "..."
