"""The held-out evaluation before training, cached: the same adapters give the same figures.

A new run's ``before`` evaluation (``tasks.heldout``) samples the untrained policies on the
held-out problems and judges them: seconds of every start, even on the tiny model, and the same
result every time the same adapters meet the same problems, settings and code (sampling is
seeded, judging is deterministic). So its result is kept under ``.cache/heldout/<key>.json``,
``key`` a hash of everything it is a function of (:func:`before_key`):

- both roles' adapter contents (``adapter_version``: warm start, ``--init-from`` or fresh) and
  the base model's files;
- the held-out problems, every field;
- the whole config except where results are written (``artifacts``, ``tracking``);
- every source file of the packages the evaluation runs through (sampling, prompts, parsing,
  the judge, the family's hidden suites), torch's and transformers' versions, the device and
  torch's thread count (a reduction's order changes floats, and with them samples).

Anything else changed evaluates again. An entry is written atomically (temp file, rename); one
that does not parse is reported and evaluated again. Delete the folder to evaluate afresh.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from configs import config_to_dict
from lifecycle.digests import base_digests, files_digest

CACHE_ROOT = Path(".cache") / "heldout"
REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("configs", "lifecycle", "models", "pipeline", "problems", "rewards", "sandbox",
            "tasks")


def before_key(cfg: Any, adapter_versions: dict[str, str], problems: list,
               device: str) -> str:
    """A hash of everything the ``before`` evaluation's figures are a function of."""
    import transformers  # deferred: flows.train loads it while its Prefect server starts

    config = {k: v for k, v in config_to_dict(cfg).items() if k not in ("artifacts", "tracking")}
    code = [p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")]
    blob = json.dumps({
        "adapters": adapter_versions, "bases": base_digests(cfg), "config": config,
        "problems": [dataclasses.asdict(p) for p in problems],
        "code": files_digest(code, REPO), "torch": torch.__version__,
        "transformers": transformers.__version__, "device": device,
        "threads": torch.get_num_threads(),
    }, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def load(key: str) -> dict[str, Any] | None:
    """The cached ``{"metrics", "wrong", "saved_by"}`` or None (missing, or damaged: said)."""
    path = CACHE_ROOT / f"{key}.json"
    try:
        entry = json.loads(path.read_text())
        if not isinstance(entry.get("metrics"), dict) or not isinstance(entry.get("wrong"), list):
            raise ValueError("no metrics or wrong solutions")
        return entry
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        print(f"held-out before: cached entry {path} is damaged ({exc}); evaluating again")
        return None


def save(key: str, metrics: dict[str, float], wrong: list, run_id: str) -> Path:
    """Write the entry atomically; returns its path."""
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    path = CACHE_ROOT / f"{key}.json"
    tmp = path.with_name(f".tmp-{key}-{os.getpid()}")
    tmp.write_text(json.dumps({"metrics": metrics, "wrong": wrong, "saved_by": run_id}))
    os.replace(tmp, path)
    return path
