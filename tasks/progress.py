"""Progress of a training run: a rich bar on the console and a Prefect progress artifact."""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from pipeline.schedule import PlannedStep
from tasks.runtime import RunContext, artifact_key


class Progress:
    """``with Progress(ctx, total, done) as p: ... p.advance(planned, metrics)``."""

    def __init__(self, ctx: RunContext, total: int, done: int = 0) -> None:
        self.ctx, self.total, self.done = ctx, total, done
        self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn())
        self._task: Any = None
        self._artifact: Any = None

    def __enter__(self) -> Progress:
        from prefect.artifacts import create_progress_artifact

        self._bar.start()
        self._task = self._bar.add_task(f"run {self.ctx.run_id}", total=self.total,
                                        completed=self.done)
        self._artifact = create_progress_artifact(
            100.0 * self.done / max(self.total, 1),
            key=f"{artifact_key(self.ctx.run_id)}-progress",
            description=f"Training steps of run {self.ctx.run_id}")
        return self

    def advance(self, planned: PlannedStep, metrics: dict[str, float]) -> None:
        from prefect.artifacts import update_progress_artifact

        self.done += 1
        line = (f"stage {planned.stage} step {planned.step} ({planned.role}): "
                f"gen reward {metrics.get('generator/reward', 0):.3f} | "
                f"disc reward {metrics.get('discriminator/reward', 0):.3f} | "
                f"validity {metrics.get('discriminator/validity', 0):.2f} | "
                f"infra-masked {int(metrics.get('sandbox/infra_masked_samples', 0))}")
        self._bar.update(self._task, completed=self.done, description=line)
        self._bar.console.print(line)
        update_progress_artifact(self._artifact, 100.0 * self.done / max(self.total, 1))

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()
