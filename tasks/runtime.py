"""A run opened inside its Prefect flow (the run context itself: ``lifecycle.context``).

:func:`open_run` builds the run's ``RunContext``, opens (or re-opens) its MLflow run under the
flow run's id and links it from a Prefect artifact; :func:`artifact_key` makes the keys of the
run's Prefect artifacts.
"""

from __future__ import annotations

import re

from prefect.artifacts import create_link_artifact, create_markdown_artifact
from prefect.context import get_run_context

from artifacts.tracking import Tracker, run_page
from configs import config_to_dict
from configs.schema import TrainConfig
from lifecycle.context import CONFIG_FILE, RunContext, problem_frame, record_problem_report


def open_run(cfg: TrainConfig, run_id: str) -> RunContext:
    """Load problems and models, open (or re-open, for a resumed run) the MLflow run."""

    ctx = RunContext.open(cfg, run_id)
    ctx.store.write_json(CONFIG_FILE, config_to_dict(cfg))  # what flows.replay rebuilds from
    ctx.tracker = Tracker.from_config(cfg.tracking)
    try:
        flow_run_id = str(get_run_context().flow_run.id)
    except Exception:  # outside a flow run (unit tests call this directly)
        flow_run_id = None
    ctx.mlflow_run_id = ctx.tracker.run_for(cfg, run_id, flow_run_id)
    record_problem_report(ctx)  # skipped and repaired problems: run store and MLflow
    ctx.tracker.log_dataset(ctx.mlflow_run_id, problem_frame(ctx.problems),
                            name=f"problems:{cfg.problems.source}",
                            source=str(cfg.problems.source))
    _link_artifact(ctx)
    return ctx


def _link_artifact(ctx: RunContext) -> None:
    """A Prefect artifact pointing at the run's MLflow page: a link for a tracking server, else
    the exact ``mlflow ui`` command for the run's store and the page to open once it runs."""
    url, command = run_page(ctx.tracker.tracking_uri, ctx.tracker.experiment_id,
                            ctx.mlflow_run_id)
    key = f"{artifact_key(ctx.run_id)}-mlflow"
    if command is None:
        create_link_artifact(url, link_text=f"MLflow run {ctx.mlflow_run_id}", key=key,
                             description=f"MLflow run of {ctx.run_id}")
    else:
        create_markdown_artifact(
            f"MLflow run `{ctx.mlflow_run_id}` of `{ctx.run_id}` is in the store "
            f"`{ctx.tracker.tracking_uri}`. Start its UI from the repository root:\n\n"
            f"```bash\n{command}\n```\n\nthen open <{url}>.",
            key=key, description=f"MLflow run of {ctx.run_id}")


def artifact_key(text: str) -> str:
    """A Prefect artifact key from ``text``: lowercase letters, digits and dashes only."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
