"""Where a model spec's weights come from: a registry version, a checkpoint, an adapter, a base.

``resolve_source(spec, cfg, workdir)`` accepts

* ``NAME@ALIAS`` or ``models:/NAME@ALIAS`` / ``models:/NAME/VERSION``: a registered version. Its
  checkpoint is downloaded and every file is checked against its manifest's hashes before use;
  the base model (path or hub id) is the one recorded with the version (``base.json``). For a
  generator alias, :func:`sibling` names the discriminator registered under the same alias.
* ``runs:/<mlflow run>/checkpoints/<role>/step-NNNNNN``: a logged checkpoint (verified too);
* a local checkpoint folder (``checkpoint.json`` + ``adapter/``, verified) or adapter folder
  (``adapter_config.json``): put on the config's base model;
* anything else: a base model path or hub id, with fresh adapters (which leave the base model
  unchanged: LoRA B starts at zero). This is the "before training" model of ``show``.

Registry and run lookups go through an ``artifacts.tracking.Tracker`` (and
``serving.registry.ModelRegistry`` over it), imported only when a spec needs them: a registered
version imports this module (through ``serving.served``) without ``artifacts`` bundled, and
``artifacts`` brings mlflow, pandas and pyarrow. No Prefect here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from configs.schema import TrainConfig

_ALIAS = re.compile(r"^(?:models:/)?([^/@\s]+)@([A-Za-z0-9_.-]+)$")
_VERSION = re.compile(r"^models:/([^/@\s]+)/(\d+)$")


@dataclass(frozen=True)
class ModelSource:
    """One role's weights: a base model plus, optionally, a verified LoRA adapter folder."""

    spec: str
    kind: str  # registry | checkpoint | adapter | base
    base_model: str | None  # None: the config's base model
    adapter_dir: Path | None = None
    dtype: str | None = None
    label: str = ""
    content_hash: str | None = None

    def describe(self) -> str:
        return self.label or self.spec


def _tracker(cfg: TrainConfig, tracker: Any = None) -> Any:
    if tracker is not None:
        return tracker
    from artifacts.tracking import Tracker  # deferred: see the module docstring

    return Tracker.from_config(cfg.tracking)


def _registry_source(spec: str, uri: str, tracker: Any, workdir: Path) -> ModelSource:
    from serving.registry import ModelRegistry  # deferred: see the module docstring

    reg = ModelRegistry(tracker).registered_checkpoint(uri, workdir)  # ValueError: no alias
    return ModelSource(spec, "registry", reg.base_model, reg.adapter_dir, reg.dtype,
                       f"{reg.name} v{reg.version}" + (f" (@{reg.alias})" if reg.alias else ""),
                       reg.checkpoint.content_hash)


def _run_checkpoint_source(spec: str, tracker: Any, workdir: Path) -> ModelSource:
    from artifacts.checkpoints import ADAPTER_DIR  # deferred: see the module docstring

    run_id, _, path = spec.removeprefix("runs:/").partition("/")
    found = [c for c in tracker.list_checkpoints(run_id) if c.artifact_path == path.rstrip("/")]
    if not found:
        raise ValueError(f"{spec}: no complete checkpoint at that path of MLflow run {run_id} "
                         f"in {tracker.tracking_uri}")
    folder = tracker.load_checkpoint(found[0], workdir / f"{run_id}-{found[0].step}")
    return ModelSource(spec, "checkpoint", None, folder / ADAPTER_DIR, None,
                       f"checkpoint {spec}", found[0].content_hash)


def resolve_source(spec: str, cfg: TrainConfig, workdir: Path, tracker: Any = None
                   ) -> ModelSource:
    """Where ``spec`` (see the module docstring) points; downloads and verifies adapters.
    ``tracker``: an ``artifacts.tracking.Tracker`` (default: the config's)."""
    from artifacts.checkpoints import ADAPTER_DIR, verify_checkpoint_dir  # deferred: as above

    spec = spec.strip()
    alias, version = _ALIAS.match(spec), _VERSION.match(spec)
    if alias or version:
        uri = f"models:/{'@'.join(alias.groups())}" if alias else spec
        return _registry_source(spec, uri, _tracker(cfg, tracker), workdir)
    if spec.startswith("runs:/"):
        return _run_checkpoint_source(spec, _tracker(cfg, tracker), workdir)
    path = Path(spec)
    if (path / "checkpoint.json").is_file():
        info = verify_checkpoint_dir(path)
        return ModelSource(spec, "checkpoint", None, path / ADAPTER_DIR, None,
                           f"checkpoint {path} (step {info.step})", info.content_hash)
    if (path / "adapter_config.json").is_file():
        return ModelSource(spec, "adapter", None, path, None, f"adapter {path}")
    return ModelSource(spec, "base", spec, None, None, f"base model {spec} (no adapter)")


def sibling(spec: str) -> str | None:
    """``x-generator@alias`` -> ``x-discriminator@alias`` (aliases mean the same across roles;
    version numbers do not, so a version has no sibling)."""
    m = _ALIAS.match(spec)
    if not m or not m.group(1).endswith("-generator"):
        return None
    return f"{m.group(1).removesuffix('-generator')}-discriminator@{m.group(2)}"
