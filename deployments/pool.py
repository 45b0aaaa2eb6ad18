"""Work pools and deployments of ``prefect.yaml``: idempotent set-up, deploy, and ``serve``.

    python -m deployments setup     # create every work pool prefect.yaml names (process type)
    python -m deployments deploy    # setup, then `prefect --no-prompt deploy --all`
    python -m deployments serve     # no worker: serve them as <flow>/local from this process

All three talk to the Prefect API of the active profile or ``$PREFECT_API_URL``. ``prefect.yaml``
stays the one place where pools, schedules and parameters are written down; this module only
reads it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
PREFECT_YAML = REPO / "prefect.yaml"
POOL_TYPE = "process"
SERVE_NAME = "local"  # served deployments are <flow>/local (see to_runner_deployments)


def load_prefect_yaml(path: Path = PREFECT_YAML) -> dict[str, Any]:
    """The parsed ``prefect.yaml`` (YAML anchors resolved)."""
    with open(path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    if not isinstance(spec, dict) or not isinstance(spec.get("deployments"), list):
        raise ValueError(f"{path}: expected a mapping with a 'deployments' list")
    return spec


def pool_names(spec: dict[str, Any]) -> list[str]:
    """Work pools the deployments use, in first-use order."""
    names = [(d.get("work_pool") or {}).get("name") for d in spec["deployments"]]
    return list(dict.fromkeys(n for n in names if n))


async def ensure_pool(name: str, pool_type: str = POOL_TYPE) -> bool:
    """Create work pool ``name`` with the worker type's default job template unless it exists.
    Returns True when it was created. An existing pool is left as it is (even paused)."""
    # Prefect deferred here and below: this package's __init__ imports this module, and
    # `python -m deployments stack` and --help answer without loading Prefect
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.workers.process import ProcessWorker

    if pool_type != POOL_TYPE:
        raise ValueError(f"pool {name!r}: type {pool_type!r} is not supported here, only "
                         f"{POOL_TYPE!r}; create it with `prefect work-pool create`")
    async with get_client() as client:
        try:
            await client.read_work_pool(name)
            return False
        except ObjectNotFound:
            pass
        try:
            await client.create_work_pool(WorkPoolCreate(
                name=name, type=pool_type,
                base_job_template=ProcessWorker.get_default_base_job_template()))
        except ObjectAlreadyExists:  # created concurrently by someone else: same end state
            return False
        return True


def setup(spec: dict[str, Any]) -> None:
    for name in pool_names(spec):
        created = asyncio.run(ensure_pool(name))
        print(f"work pool {name!r}: {'created' if created else 'exists'}")


def deploy(names: list[str] | None = None) -> int:
    """``prefect --no-prompt deploy`` from the repository root (``--all`` unless names)."""
    selection = [arg for n in names for arg in ("--name", n)] if names else ["--all"]
    cmd = [sys.executable, "-m", "prefect", "--no-prompt", "deploy", *selection]
    return subprocess.run(cmd, cwd=REPO, check=False).returncode


def to_runner_deployments(spec: dict[str, Any], names: list[str] | None = None) -> list[Any]:
    """The deployments of ``spec`` as ``flow.to_deployment`` objects for ``prefect.serve``: same
    entrypoints, parameters, schedules, tags and concurrency limit; no pool, no pull steps (the
    flows run in subprocesses of the serving process, from the current folder).

    They are named ``<flow>/local``, not ``<flow>/<name>``: serving under the worker
    deployment's name would replace it (pool job variables and pull steps gone) and leave it
    paused when the server stops."""
    # deferred: see ensure_pool
    from prefect.flows import load_flow_from_entrypoint
    from prefect.schedules import Cron

    out = []
    for dep in spec["deployments"]:
        if names and dep["name"] not in names:
            continue
        if not (REPO / dep["entrypoint"].split(":", 1)[0]).exists():
            print(f"skipping {dep['name']!r}: {dep['entrypoint']} does not exist", file=sys.stderr)
            continue
        flow = load_flow_from_entrypoint(str(REPO / dep["entrypoint"]))
        schedules = [Cron(s["cron"], timezone=s.get("timezone"), active=s.get("active", True))
                     for s in dep.get("schedules") or [] if "cron" in s]
        limit = dep.get("concurrency_limit")
        out.append(flow.to_deployment(
            name=SERVE_NAME, parameters=dep.get("parameters") or {}, schedules=schedules,
            tags=dep.get("tags"), description=dep.get("description"),
            concurrency_limit=limit.get("limit") if isinstance(limit, dict) else limit))
    return out
