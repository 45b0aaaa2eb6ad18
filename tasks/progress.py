"""What a training run shows while it runs: one line per step on the console ending with the
time the steps left take (under a progress bar with the time remaining in a terminal, plain
when piped), the same line in the flow run's Prefect logs, a Prefect progress artifact, and a
console kept free of per-task state noise.

Prefect logs every task run's state change ("Finished in state Completed()") through the
``prefect.task_runs`` logger, which both ships it to the API and propagates it to the root
console handler. :func:`quiet_console` filters the console handler only: the lines stay in the
Prefect UI's logs, and the console keeps the run's own lines, what tasks print, warnings and
errors. It also keeps MLflow's notes on creating and migrating its database off the console.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.client.orchestration import get_client
from prefect.context import FlowRunContext
from prefect.runtime import flow_run

from lifecycle.context import RunContext
from pipeline.progress import LiveBar, eta, remaining_s
from pipeline.schedule import PlannedStep
from tasks.runtime import artifact_key

API_ONLY = {"console": False}  # ``extra=`` of a record that goes to Prefect's logs, not the console


STATE_NOISE = ("Finished in state", "Running hook")  # Prefect's per-task-run state lines

# MLflow's SQLite store says at INFO that it creates and migrates its tables, on a new database
# (every first run), through these loggers; warnings and errors still show.
DATABASE_NOTES = ("mlflow.store.db", "mlflow.store.db_migrations", "alembic")


class _ConsoleFilter(logging.Filter):
    """Drop task runs' state lines (what a task prints, its retries and errors stay), records
    marked :data:`API_ONLY` and blank records (a bare ``print()`` under ``log_prints``, which
    would show as a ``Flow run '...' -`` line with nothing after it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "console", True) is False:
            return False
        if not record.args and not str(record.msg).strip():
            return False
        return not (record.name.startswith("prefect.task_runs")
                    and record.levelno < logging.WARNING
                    and str(record.msg).startswith(STATE_NOISE))


def quiet_console() -> None:
    """Install the console filter on every console handler of the root logger and raise
    :data:`DATABASE_NOTES` to WARNING (idempotent)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and \
                not any(isinstance(f, _ConsoleFilter) for f in handler.filters):
            handler.addFilter(_ConsoleFilter())
    for name in DATABASE_NOTES:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.WARNING:
            logger.setLevel(logging.WARNING)


def step_line(planned: PlannedStep, total: int, metrics: dict[str, float],
              seconds: float, remaining: str = "") -> str:
    """The console and log line of a finished step; ``remaining`` (e.g. ``ETA 2m10s``) ends it.

    >>> step_line(PlannedStep(7, 2, "generator", "generator"), 25,
    ...           {"generator/reward": 0.4123, "discriminator/validity": 0.8}, 3.14, "ETA 56s"
    ...           ).split(" | ")  # doctest: +NORMALIZE_WHITESPACE
    ['step 7/25 stage 2 generator', 'gen reward 0.412', 'disc reward 0.000', 'validity 0.80',
     '3.1 s', 'ETA 56s']
    """
    line = (f"step {planned.step}/{total} stage {planned.stage} {planned.role} | "
            f"gen reward {metrics.get('generator/reward', 0):.3f} | "
            f"disc reward {metrics.get('discriminator/reward', 0):.3f} | "
            f"validity {metrics.get('discriminator/validity', 0):.2f}")
    masked = int(metrics.get("sandbox/infra_masked_samples", 0))
    if masked:
        line += f" | infra-masked {masked}"
    return line + f" | {seconds:.1f} s" + (f" | {remaining}" if remaining else "")


class Progress:
    """``with Progress(ctx, total, done) as p: ... p.advance(planned, metrics)``.

    ``done`` steps were complete before (a resumed run): the ETA counts only the steps done
    in this process, at their mean pace (``pipeline.progress.eta``)."""

    def __init__(self, ctx: RunContext, total: int, done: int = 0,
                 interactive: bool | None = None) -> None:
        self.ctx, self.total, self.done = ctx, total, done
        self.interactive = sys.stdout.isatty() if interactive is None else interactive
        self._bar: LiveBar | None = None
        self._artifact: Any = None
        self._start = self._since = time.perf_counter()
        self._done_here = 0

    def __enter__(self) -> Progress:
        if self.interactive:
            bar = LiveBar(f"run {self.ctx.run_id}", self.total, "steps", completed=self.done)
            self._bar = bar if bar.start() else None
        self._artifact = create_progress_artifact(
            100.0 * self.done / max(self.total, 1),
            key=f"{artifact_key(self.ctx.run_id)}-progress",
            description=f"Training steps of run {self.ctx.run_id}")
        self._start = self._since = time.perf_counter()
        return self

    def advance(self, planned: PlannedStep, metrics: dict[str, float]) -> None:
        now = time.perf_counter()
        self.done += 1
        self._done_here += 1
        elapsed, left = now - self._start, self.total - self.done
        line = step_line(planned, self.total, metrics, now - self._since,
                         eta(elapsed, self._done_here, left))
        self._since = now
        if self._bar is not None:
            self._bar.print(line)
            self._bar.update(self.done, remaining_s(elapsed, self._done_here, left))
        else:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        get_run_logger().info(line, extra=API_ONLY)  # the flow run's logs, not the console
        update_progress_artifact(self._artifact, 100.0 * self.done / max(self.total, 1))

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def name_flow_run(run_id: str, tags: list[str]) -> None:
    """Name the current flow run after the training run id and add ``tags`` to it, so the
    Prefect UI lists runs by what they are (a deployment's run starts with a generated name;
    the CLI names it at once). Outside a flow run, nothing."""
    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return
    run = context.flow_run
    merged = sorted(set(run.tags or []) | set(tags))
    with get_client(sync_client=True) as client:
        client.update_flow_run(run.id, name=run_id, tags=merged)


def replay_run_name() -> str:
    """``flow_run_name`` of the replay flow: the recorded run and what is replayed, e.g.
    ``tiny-20261126-204848 replay: step 3 rollout+`` (``+``: and downstream) or ``... replay:
    failed steps``."""
    p = flow_run.parameters
    what = ("failed steps" if p.get("failed") else
            f"step {p.get('step')} {p.get('stage')}{'+' if p.get('downstream') else ''}")
    return f"{p.get('run_id')} replay: {what}"


def flow_run_name() -> str:
    """``flow_run_name`` of the train and evaluate flows: the run id when it is given (the
    CLI always gives it to training), else a placeholder that :func:`name_flow_run` replaces
    once the run id is known (never one of Prefect's random names)."""
    return str(flow_run.parameters.get("run_id") or f"{flow_run.flow_name} (naming...)")
