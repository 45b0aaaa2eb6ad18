"""What the steps of one training run share: the run context.

A ``RunContext`` lives in the flow's process (models are not shipped between processes); tasks
take it as a parameter with caching off, read their inputs from the run store and write their
outputs there. It holds the config and problems, the run store, each role's trainable state
(``models.rolestate.RoleState``: adapter, value head, optimizer), the run's resume states
(``models.resume.ResumeStore``) and the MLflow run. Everything in it can be rebuilt from the
config and the run id, which is what a resumed run, a replay or a recovery does.

Prefect-free at import: opening a run inside a Prefect flow (its flow run id, its artifacts) is
``tasks.runtime.open_run``, and :meth:`RunContext.quoted` imports Prefect's ``quote`` only when
called, by a task's caller.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from artifacts.store import RunStore
from artifacts.tracking import Tracker
from configs.errors import ConfigError
from configs.names import ROLES
from configs.schema import TrainConfig
from models.engine.sampler import VllmSampler
from models.policy import Policies
from models.reference import attach_reference, save_reference
from models.restore import restore_role, restore_state, save_state
from models.resume import ResumeStore, recorded_state_versions
from models.rolestate import RoleState, build_role_states
from models.seeds import derive_seed
from pipeline.chains import Sampler, step_samples
from pipeline.execution import problem_mutants
from problems import Problem
from problems.vet import RUN_RECORD, load_for_run
from rewards.mutants import Mutant

if TYPE_CHECKING:
    from prefect.utilities.annotations import quote

CONFIG_FILE = "config.json"  # the resolved config, in the run store's ``_run/`` (replays)
ENGINE_LOG = "engine.log"    # the vLLM engine's own log, in the run store's ``_run/``


def load_run_problems(cfg: TrainConfig) -> list[Problem]:
    """The run's problems: ``cfg.problems.source`` vetted under the run's sandbox limits
    (structure; each reference against its own baseline tests; recorded-format repairs), then
    selected. ``problems.on_invalid=fail`` raises ``ProblemLoadError`` listing every invalid
    problem; ``skip`` keeps the valid ones. The result is a list whose ``.report`` says what was
    repaired and skipped (:func:`record_problem_report` stores it). Vetted once per process:
    ``flows.train`` calls this before Prefect starts and the flow reuses the result."""
    p, box = cfg.problems, cfg.sandbox
    return load_for_run(p.source, on_invalid=p.on_invalid, ids=p.ids, limit=p.limit,
                        curriculum=p.curriculum, limits=box.limits(), workers=box.workers,
                        isolation=box.isolation, quiet=True)


def record_problem_report(ctx: RunContext) -> None:
    """Store what vetting the run's problems found (counts, every repair, every skipped problem
    with its reasons, the valid ids) in the run store (``_run/problems.json``) and as the MLflow
    artifact ``problems.json``. A resumed run whose problems now vet differently (the file
    changed, or a reference timed out this time) is warned about, naming the ids."""
    report = getattr(ctx.problems, "report", None)
    if report is None:
        return
    data = report.to_dict()
    before = ctx.store.read_json(RUN_RECORD)
    if before is not None and before.get("valid_ids") != data["valid_ids"]:
        old, new = set(before.get("valid_ids") or ()), set(data["valid_ids"])
        print(f"warning: {ctx.store.run_dir}/_run/{RUN_RECORD}: the valid problems differ from "
              f"the run's earlier record (now valid: {sorted(new - old)[:20]}; no longer: "
              f"{sorted(old - new)[:20]}); the steps from here draw from the new set")
    uri = ctx.store.write_json(RUN_RECORD, data)
    if ctx.tracker is not None and ctx.mlflow_run_id is not None:
        ctx.tracker.log_dict(ctx.mlflow_run_id, data, RUN_RECORD)
    if report.skipped or report.repairs:
        print(f"problems: {report.summary()}; recorded in {uri}")


@dataclass
class RunContext:
    """Shared, process-local state of one run. Built by :meth:`open`."""

    cfg: TrainConfig
    run_id: str
    store: RunStore
    problems: list[Problem]
    resume: ResumeStore
    policies: Policies | None = None   # loaded lazily: replays may not need models
    roles: dict[str, RoleState] = field(default_factory=dict)
    tracker: Tracker | None = None
    mlflow_run_id: str | None = None
    timings: list[dict[str, float]] = field(default_factory=list)  # time/* of steps run here
    _mutants: dict[str, list[Mutant]] = field(default_factory=dict)
    _engine: VllmSampler | None = None

    @classmethod
    def open(cls, cfg: TrainConfig, run_id: str, *, load_models: bool = True) -> RunContext:
        ctx = cls(cfg=cfg, run_id=run_id, store=RunStore(cfg.artifacts.root, run_id),
                  problems=load_run_problems(cfg),
                  resume=ResumeStore.for_run(cfg.artifacts.root, run_id))
        if load_models:
            ctx.load_policies()
        return ctx

    # -- models ----------------------------------------------------------------------------
    def load_policies(self) -> None:
        """Base models with fresh adapters, and a fresh state (value head, optimizer) per role.

        No KL reference yet: the models are loaded before the run's start point is known, and
        a run with no complete step replaces the reference an earlier attempt saved
        (:meth:`fix_reference`), so reading that one here could only refuse a start that
        would have written over it. Redoing recorded steps attaches the saved one
        (:meth:`attach_saved_reference`, from ``lifecycle.recorded.load_start_state``)."""
        if self.cfg.model.cpu_threads:
            torch.set_num_threads(self.cfg.model.cpu_threads)
        self.policies = Policies.load(self.cfg.model, self.cfg.lora)
        self.roles = build_role_states(self.policies, self.cfg.ppo)
        if self._engine is not None:  # a running engine samples with the new models' adapters
            self._engine.use(self.policies)

    @property
    def sampler(self) -> Sampler:
        """What samples the chains (``sampling.engine``): the policies themselves (``hf``), or
        the run's one vLLM engine, started on first use and reused by every step after it."""
        if self.cfg.sampling.engine == "hf":
            return self.policies
        if self._engine is None:
            run_dir = self.store.run_dir  # a remote store keeps its log beside the process
            log = (Path(run_dir) if run_dir.startswith("/") else Path(tempfile.mkdtemp())) \
                / "_run" / ENGINE_LOG
            engine = VllmSampler(self.policies, self.cfg.model, self.cfg.sampling,
                                 self.cfg.lora.r, log, threads=self.cfg.model.cpu_threads)
            print(f"vLLM engine: starting (log: {engine.client.log_path})")
            engine.start()
            print(f"vLLM engine: ready in {engine.start_seconds:.1f} s")
            self._engine = engine
        return self._engine

    def engine_seconds(self) -> dict[str, float]:
        """Cumulative seconds of the vLLM engine's start and adapter pushes (empty under
        ``hf``): ``time/engine_start_s`` and ``time/engine_sync_s`` per step."""
        if self._engine is None:
            return {} if self.cfg.sampling.engine == "hf" else {"engine_start": 0.0,
                                                                 "engine_sync": 0.0}
        return {"engine_start": self._engine.start_seconds,
                "engine_sync": self._engine.sync_seconds}

    def close(self) -> None:
        """Stop what the run started outside this process (the vLLM engine). Idempotent."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    def restore_role(self, role: str, folder: Path, optimizer: bool = True) -> None:
        """Load ``role`` from a resume state folder, checked (``models.restore``)."""
        restore_role(self.roles, role, folder, optimizer)

    def fix_reference(self, start: int) -> None:
        """``ppo.kl_reference: start``: the adapters as they are at the start point of a run
        with no complete step become its KL reference, saved (replacing any an earlier attempt
        left) and attached; a run continuing after step ``start`` uses the one it saved then.
        No-op under ``base``."""
        if self.cfg.ppo.kl_reference != "start" or self.policies is None:
            return
        folder = self.resume.reference_folder
        if start == 0:
            save_reference(self.resume, self.policies)
            attach_reference(self.resume, self.policies)
        elif not folder.is_dir():
            raise ConfigError(
                f"ppo.kl_reference='start': run {self.run_id} continues after step {start} "
                f"but saved no reference adapters ({folder}); it began under "
                "kl_reference='base': keep that, or start a new run")
        else:
            self.attach_saved_reference()

    def attach_saved_reference(self) -> None:
        """``ppo.kl_reference: start``: attach the reference the run saved as training began
        (checked; a damaged one raises ``StateIntegrityError``), unless attached already or
        none was saved (an update then refuses to run without it). No-op under ``base``."""
        if (self.cfg.ppo.kl_reference == "start" and self.policies is not None
                and self.resume.reference_folder.is_dir()
                and not all(self.policies.has_reference(role) for role in ROLES)):
            attach_reference(self.resume, self.policies)

    # -- problems and seeds ----------------------------------------------------------------
    def samples(self, step: int) -> list[tuple[Problem, int]]:
        """The step's (problem, sample_idx) pairs, problem-major."""
        return step_samples(self.problems, step, self.cfg.schedule.problems_per_step,
                            self.cfg.sampling.samples_per_problem)

    def mutants(self, problem: Problem) -> list[Mutant]:
        """Deterministic AST mutants of the problem's reference (cached per run)."""
        if problem.id not in self._mutants:
            self._mutants[problem.id] = problem_mutants(problem,
                                                        self.cfg.rewards.mutants_per_problem)
        return self._mutants[problem.id]

    def seed(self, *parts: object) -> int:
        return derive_seed(self.cfg.sampling.seed, *parts)

    def quoted(self) -> quote:
        """This context as a task's argument (``task(ctx.quoted(), ...)``): the task gets this
        very object. Unquoted, Prefect walks every list, dict and dataclass of a task's
        arguments at each call, twice (for futures to resolve, and for the task's inputs), and a
        RunContext holds the run's problems, config, mutants and timings: a walk costs a
        noticeable share of a step's CPU (docs/training.md has the profile). The walk finds
        nothing to resolve here, and where it found something it would hand the task a
        ``dataclasses.replace`` copy, whose changes the run would lose. A task called with the
        context unquoted fails the flow tests (their ``context_walks`` spy sees Prefect walk
        into it). Prefect is imported here, not at the module's top: the run context itself
        does not need it."""
        from prefect.utilities.annotations import quote

        return quote(self)

    # -- resume state (the checks and the loading: ``models.restore``) ----------------------
    def save_state(self, step: int) -> Path:
        """Both roles' state after ``step``, atomically, manifest last."""
        return save_state(self.resume, step, self.roles)

    def restore_state(self, step: int,
                      recorded: dict[str, tuple[str, str]] | None = None) -> dict[str, str]:
        """Load the state saved after ``step``, checked against the run's record (``recorded``,
        by default :func:`recorded_state_versions`); returns role -> version."""
        if recorded is None:
            recorded = recorded_state_versions(self.store, step)
        return restore_state(self.resume, step, self.roles,
                             gae=self.cfg.ppo.advantage == "gae", recorded=recorded)


def new_run_id(cfg: TrainConfig) -> str:
    return f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def problem_frame(problems: list[Problem]) -> Any:
    """The run's problems as the table logged as its MLflow dataset input."""
    return pd.DataFrame([{"id": p.id, "entry_point": p.entry_point, "description": p.description,
                          "n_baseline_tests": len(p.baseline_tests)} for p in problems])
