"""What the tasks of one training run share: config, run store, tracker, policies, optimizers.

A ``RunContext`` lives in the flow's process (models are not shipped between processes); tasks
take it as a parameter with caching off, read their inputs from the run store and write their
outputs there. Everything in it can be rebuilt from the config and the run id, which is what a
resumed run or a replay does.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from artifacts.checkpoints import sha256_file
from artifacts.store import RunStore
from configs.errors import ConfigError
from configs.schema import TrainConfig
from problems import Problem
from rewards.mutants import Mutant, make_mutants
from tasks.schedule import ROLES, derive_seed, plan
from tasks.statefiles import (  # noqa: F401 - re-exported: callers import them from here
    ADAPTER_FILE,
    DAMAGED_PREFIX,
    STATE_FORMAT,
    STATE_MANIFEST,
    VALUE_HEAD_FILE,
    StateCheck,
    StateFileMissingError,
    StateIntegrityError,
    _optimizer_file,
    _state_files,
    _state_steps,
    adapter_file_version,
    recorded_state_versions,
    verify_state_files,
)

STATE_KEEP = 2  # resume states kept per run: the last complete step's and the one after it
CONFIG_FILE = "config.json"  # the resolved config, in the run store's ``_run/`` (replays)


def state_root(cfg: TrainConfig, run_id: str) -> Path:
    """Local folder for resume state (adapters + optimizer per step). Next to the Parquet
    store when that is a local folder, else under ``.cache/state`` (peft writes local files)."""
    root = cfg.artifacts.root
    if "://" in root and not root.startswith("file://"):
        return Path(".cache") / "state" / run_id
    return Path(root.removeprefix("file://")) / "_state" / f"run_id={run_id}"


def load_run_problems(cfg: TrainConfig) -> list[Problem]:
    """The run's problems: ``cfg.problems.source`` vetted under the run's sandbox limits
    (structure; each reference against its own baseline tests; recorded-format repairs), then
    selected. ``problems.on_invalid=fail`` raises ``ProblemLoadError`` listing every invalid
    problem; ``skip`` keeps the valid ones. The result is a list whose ``.report`` says what was
    repaired and skipped (:func:`record_problem_report` stores it). Vetted once per process:
    ``flows.train`` calls this before Prefect starts and the flow reuses the result."""
    from problems.vet import load_for_run
    from sandbox import options_from_config

    p = cfg.problems
    return load_for_run(p.source, on_invalid=p.on_invalid, ids=p.ids, limit=p.limit,
                        curriculum=p.curriculum, quiet=True, **options_from_config(cfg.sandbox))


def record_problem_report(ctx: RunContext) -> None:
    """Store what vetting the run's problems found (counts, every repair, every skipped problem
    with its reasons, the valid ids) in the run store (``_run/problems.json``) and as the MLflow
    artifact ``problems.json``. A resumed run whose problems now vet differently (the file
    changed, or a reference timed out this time) is warned about, naming the ids."""
    from problems.vet import RUN_RECORD

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
    policies: Any = None          # models.policy.Policies (loaded lazily: replays may not need it)
    tracker: Any = None           # artifacts.tracking.Tracker
    mlflow_run_id: str | None = None
    optimizers: dict[str, torch.optim.Optimizer] = field(default_factory=dict)
    value_heads: dict[str, torch.nn.Module] = field(default_factory=dict)  # GAE only
    _mutants: dict[str, list[Mutant]] = field(default_factory=dict)

    @classmethod
    def open(cls, cfg: TrainConfig, run_id: str, *, load_models: bool = True) -> RunContext:
        ctx = cls(cfg=cfg, run_id=run_id, store=RunStore(cfg.artifacts.root, run_id),
                  problems=load_run_problems(cfg))
        if load_models:
            ctx.load_policies()
        return ctx

    # -- models ----------------------------------------------------------------------------
    def load_policies(self) -> None:
        from models.policy import Policies
        from models.ppo import ValueHead, make_optimizer

        if self.cfg.model.cpu_threads:
            torch.set_num_threads(self.cfg.model.cpu_threads)

        self.policies = Policies.load(self.cfg.model, self.cfg.lora)
        if self.cfg.ppo.advantage == "gae":  # one value head per role, on its final hidden states
            for role in ROLES:
                model = self.policies.model_for(role)
                device = next(model.parameters()).device
                self.value_heads[role] = ValueHead(model.config.hidden_size).to(device)
        self.optimizers = {role: make_optimizer(self.trainable_parameters(role), self.cfg.ppo)
                           for role in ROLES}

    def trainable_parameters(self, role: str) -> list[torch.nn.Parameter]:
        """What PPO trains for ``role``: its LoRA adapter, plus its value head under GAE."""
        head = self.value_heads.get(role)
        return self.policies.trainable_parameters(role) + (
            list(head.parameters()) if head is not None else [])

    def save_role(self, role: str, folder: Path) -> None:
        """``role``'s adapter (with its value head inside the adapter folder, so stage
        checkpoints carry it too) and optimizer into ``folder``."""
        self.policies.save_adapter(role, folder / role)
        if role in self.value_heads:
            from safetensors.torch import save_file

            save_file({k: v.detach().cpu().contiguous()
                       for k, v in self.value_heads[role].state_dict().items()},
                      folder / role / VALUE_HEAD_FILE)
        torch.save(self.optimizers[role].state_dict(), _optimizer_file(folder, role))

    def load_role(self, role: str, adapter_dir: Path, optimizer_file: Path | None) -> None:
        """Inverse of :meth:`save_role` (the optimizer only when ``optimizer_file`` is given):
        from a resume state folder or a downloaded stage checkpoint. A file that cannot be read
        raises ``StateIntegrityError`` naming it (never a bare safetensors or torch error);
        the caller checks the files' hashes before (``verify_state_files``)."""
        try:
            self.policies.load_adapter(role, adapter_dir)
        except (ConfigError, StateIntegrityError):
            raise
        except Exception as exc:  # SafetensorError, JSON, shape errors: a damaged adapter
            raise StateIntegrityError(f"{adapter_dir / ADAPTER_FILE}: cannot load {role}'s "
                                      f"adapter ({type(exc).__name__}: {exc})") from None
        if role in self.value_heads:
            from safetensors.torch import load_file

            path = adapter_dir / VALUE_HEAD_FILE
            if not path.is_file():
                raise StateFileMissingError(f"{path}: ppo.advantage='gae' but this state has no "
                                            f"value head for {role}")
            head = self.value_heads[role]
            try:
                head.load_state_dict(load_file(path, device=str(head.proj.weight.device)))
            except Exception as exc:
                raise StateIntegrityError(f"{path}: cannot load {role}'s value head "
                                          f"({type(exc).__name__}: {exc})") from None
        if optimizer_file is not None:
            try:
                self.optimizers[role].load_state_dict(
                    torch.load(optimizer_file, weights_only=True))
            except Exception as exc:
                raise StateIntegrityError(f"{optimizer_file}: cannot load {role}'s optimizer "
                                          f"state ({type(exc).__name__}: {exc})") from None

    def restore_role(self, role: str, folder: Path, optimizer: bool = True) -> None:
        """:meth:`load_role` from a resume state folder written by :meth:`save_role`, after
        checking the role's files against the folder's manifest, and its loaded
        ``adapter_version`` after. A state without a manifest (written before manifests) is
        loaded with a warning: the caller checks the loaded version against the run's record
        (``tasks.recorded.load_start_state`` does; :meth:`restore_state` refuses such a state
        unless the run's tables record the version it must have)."""
        check = verify_state_files(folder, [role], gae=role in self.value_heads,
                                   optimizer=optimizer)
        if check.legacy:
            print(f"warning: {folder}: no {STATE_MANIFEST} (written before resume states had "
                  f"one): {role}'s files are not checked by hash")
        self.load_role(role, folder / role, _optimizer_file(folder, role) if optimizer else None)
        self._check_loaded(folder, check.expected)

    def _check_loaded(self, folder: Path, expected: dict[str, str | None]) -> None:
        """The loaded adapters have the versions the state must hold."""
        for role, version in expected.items():
            found = self.policies.adapter_version(role)
            if version is not None and found != version:
                raise StateIntegrityError(
                    f"{folder / role / ADAPTER_FILE}: {role} adapter_version after loading is "
                    f"{found}, expected {version}", loaded=True)

    # -- problems --------------------------------------------------------------------------
    @property
    def problems_by_id(self) -> dict[str, Problem]:
        return {p.id: p for p in self.problems}

    def mutants(self, problem: Problem) -> list[Mutant]:
        """Deterministic AST mutants of the problem's reference (cached per run)."""
        if problem.id not in self._mutants:
            self._mutants[problem.id] = make_mutants(
                problem.reference_solution, problem.entry_point,
                self.cfg.rewards.mutants_per_problem, seed=derive_seed(0, problem.id))
        return self._mutants[problem.id]

    def seed(self, *parts: object) -> int:
        return derive_seed(self.cfg.sampling.seed, *parts)

    # -- resume state ----------------------------------------------------------------------
    @property
    def state_dir(self) -> Path:
        return state_root(self.cfg, self.run_id)

    def save_state(self, step: int) -> Path:
        """Both adapters and optimizers after ``step``, written to a temp folder and renamed,
        so a kill leaves either the whole state or none of it. The folder's manifest, written
        last, holds the sha256 and size of every file and each role's ``adapter_version``:
        :meth:`restore_state` checks them all before anything is loaded."""
        final = self.state_dir / f"step={step:06d}"
        tmp = self.state_dir / f".tmp-step={step:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for role in ROLES:
            self.save_role(role, tmp)
        manifest = {"format": STATE_FORMAT, "run_id": self.run_id, "step": int(step),
                    "created_at": time.time(),
                    "adapter_versions": {r: self.policies.adapter_version(r) for r in ROLES},
                    "files": {rel: {"sha256": sha256_file(tmp / rel),
                                    "bytes": (tmp / rel).stat().st_size}
                              for rel in _state_files(tmp)}}
        (tmp / STATE_MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in sorted(self.state_dir.glob("step=*"))[:-STATE_KEEP]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def state_steps(self) -> list[int]:
        return _state_steps(self.state_dir)

    def restore_state(self, step: int,
                      recorded: dict[str, tuple[str, str]] | None = None) -> dict[str, str]:
        """Load the state saved after ``step``: every file of both roles is checked against the
        state's manifest and the manifest's versions against the run's record (``recorded``,
        by default :func:`recorded_state_versions`) before anything is loaded; the loaded
        adapters' versions are checked after. Raises ``StateIntegrityError`` naming the
        file with expected and found values. A state without a manifest is accepted only when
        every role's adapter file holds the version the run's tables record (with a warning:
        its optimizer and value head files cannot be checked). Returns role -> version."""
        folder = self.state_dir / f"step={step:06d}"
        if not folder.is_dir():
            raise StateFileMissingError(f"{folder}: no resume state for step {step}")
        if recorded is None:
            recorded = recorded_state_versions(self.store, step)
        check = verify_state_files(folder, ROLES, gae=bool(self.value_heads), optimizer=True,
                                   recorded=recorded, require_verified=True)
        if check.legacy:
            print(f"warning: {folder}: no {STATE_MANIFEST} (written before resume states had "
                  "one); its adapters hold the versions the run recorded ("
                  + ", ".join(f"{r} {v} from the {recorded[r][1]}"
                              for r, v in check.expected.items())
                  + "), its optimizer and value head files cannot be checked")
        try:
            for role in ROLES:
                self.load_role(role, folder / role, _optimizer_file(folder, role))
        except StateIntegrityError as exc:  # part of the state may be loaded already
            raise StateIntegrityError(str(exc), loaded=True) from None
        self._check_loaded(folder, check.expected)
        return {role: self.policies.adapter_version(role) for role in ROLES}


def new_run_id(cfg: TrainConfig) -> str:
    import time

    return f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def open_run(cfg: TrainConfig, run_id: str) -> RunContext:
    """Load problems and models, open (or re-open, for a resumed run) the MLflow run."""
    from prefect.context import get_run_context

    from artifacts.tracking import Tracker
    from configs import config_to_dict

    ctx = RunContext.open(cfg, run_id)
    ctx.store.write_json(CONFIG_FILE, config_to_dict(cfg))  # what flows.replay rebuilds from
    ctx.tracker = Tracker.from_config(cfg.tracking)
    try:
        flow_run_id = str(get_run_context().flow_run.id)
    except Exception:  # outside a flow run (unit tests call this directly)
        flow_run_id = None
    ctx.mlflow_run_id = ctx.tracker.run_for(cfg, run_id, flow_run_id)
    record_problem_report(ctx)  # skipped and repaired problems: run store and MLflow
    _link_artifact(ctx)
    return ctx


def _link_artifact(ctx: RunContext) -> None:
    from prefect.artifacts import create_link_artifact

    exp = ctx.tracker.experiment_id
    create_link_artifact(
        f"http://127.0.0.1:5000/#/experiments/{exp}/runs/{ctx.mlflow_run_id}",
        link_text=f"MLflow run {ctx.mlflow_run_id}",
        key=f"{artifact_key(ctx.run_id)}-mlflow",
        description=f"MLflow run of {ctx.run_id} (tracking URI {ctx.tracker.tracking_uri}; "
                    "start the UI as the README shows)")


def artifact_key(text: str) -> str:
    """A Prefect artifact key from ``text``: lowercase letters, digits and dashes only."""
    import re

    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def resume_point(ctx: RunContext, steps: list) -> int:
    """The last complete step (0 for a new run), with its adapters and optimizers restored.

    Steps after it that left files but no manifest are incomplete: their parts are rewritten.
    The restored state is verified first (:meth:`RunContext.restore_state`). When it is damaged,
    missing or cannot be verified, the message names the file with the expected and found
    values, and the newest intact older state is restored instead: the steps after it are
    made incomplete again (manifests, then their parts, removed from the run store), so the
    flow redoes them, and the damaged states are set aside as ``damaged-step=NNNNNN``. No
    intact state: ``StateIntegrityError`` (the CLI exits 2 with its message). A damaged
    warm-start state when no step is complete is set aside and the warm start redone.
    """
    done = ctx.store.complete_steps()
    last = max((s for s in done if s <= len(steps)), default=0)
    kept = ctx.state_steps()
    if not last and 0 not in kept:
        return 0
    damaged: list[tuple[int, StateIntegrityError]] = []
    if last not in kept:
        damaged.append((last, StateFileMissingError(
            f"{ctx.state_dir / f'step={last:06d}'}: missing (step {last} is complete)")))
    loaded = False
    for step in sorted((s for s in kept if s <= last), reverse=True):
        try:
            versions = ctx.restore_state(step)
        except StateIntegrityError as exc:
            loaded |= exc.loaded
            print(f"resume state of step {step} failed its check: {exc}")
            damaged.append((step, exc))
            continue
        if step < last:
            _fall_back(ctx, step, last, damaged)
            print(f"resuming from the resume state of step {step} ("
                  + ", ".join(f"{r} {v}" for r, v in versions.items())
                  + f", verified) instead of step {last}")
        return step
    if last == 0:  # only a damaged warm-start state: no step is lost by redoing it
        if loaded:  # weights of the damaged state are in the model: start from fresh ones
            ctx.load_policies()
        _fall_back(ctx, 0, 0, damaged)
        print("the warm start is redone (no step was complete)")
        return 0
    raise StateIntegrityError(_no_intact_state(ctx.run_id, ctx.state_dir, last, damaged))


def _no_intact_state(run_id: str, state_dir: Path, last: int,
                     damaged: list[tuple[int, Exception]]) -> str:
    return (f"run {run_id}: no intact resume state to continue from (step {last} is the last "
            f"complete step; states kept in {state_dir}):\n"
            + "\n".join(f"  step {s}: {exc}" for s, exc in damaged)
            + "\nnothing was trained on them; start a new run id, or put back intact state "
              "folders")


def _fall_back(ctx: RunContext, step: int, last: int,
               damaged: list[tuple[int, StateIntegrityError]]) -> None:
    """After restoring the state of ``step`` in place of ``last``'s: set the damaged states
    aside, drop every other state after ``step``, and make every step after ``step`` incomplete
    again (manifests first, newest first, then their parts), saying so on the console. A kill
    half-way leaves a run that resumes the same way."""
    bad = {s for s, _ in damaged}
    for folder in sorted(ctx.state_dir.glob("step=*")):
        s = int(folder.name.split("=")[1])
        if s < step or (s == step and step not in bad):
            continue
        if s in bad:
            aside = folder.with_name(DAMAGED_PREFIX + folder.name)
            shutil.rmtree(aside, ignore_errors=True)
            folder.rename(aside)
            print(f"set aside the damaged resume state {folder} as {aside.name} (delete it "
                  "once inspected)")
        else:  # an intact state of a step that is redone: it would be stale
            shutil.rmtree(folder)
    redo = [s for s in ctx.store.list_steps() if s > step]
    if redo:
        _discard_steps(ctx.store, redo)
        span = f"step {redo[0]}" if len(redo) == 1 else f"steps {redo[0]}..{redo[-1]}"
        print(f"{span} of run {ctx.run_id} will be redone from the state of step {step}: "
              f"{'its' if len(redo) == 1 else 'their'} recorded data was removed from "
              f"{ctx.store.run_dir}")


def _discard_steps(store: RunStore, steps: list[int]) -> None:
    """Remove steps from the run store: every manifest first (newest first, so the complete
    steps stay a prefix of the run at any point), then the steps' parts."""
    import pyarrow.fs as pafs

    fs = store.fs
    for s in sorted(steps, reverse=True):
        path = f"{store.run_dir}/_manifests/step={s:06d}.json"
        if fs.get_file_info(path).type == pafs.FileType.File:
            fs.delete_file(path)
    if fs.get_file_info(store.run_dir).type != pafs.FileType.Directory:
        return
    tables = [i.path for i in fs.get_file_info(pafs.FileSelector(store.run_dir))
              if i.type == pafs.FileType.Directory and i.base_name.startswith("table=")]
    for s in sorted(steps, reverse=True):
        for table in tables:
            folder = f"{table}/step={s:06d}"
            if fs.get_file_info(folder).type == pafs.FileType.Directory:
                fs.delete_dir(folder)


def check_resume_state(cfg: TrainConfig, run_id: str, artifacts_root: str | None = None) -> None:
    """Before any model is loaded (the CLI calls it before Prefect starts): raise
    ``StateIntegrityError`` when ``run_id`` has complete steps but no resume state at or
    before the last of them passes :func:`verify_state_files`. Prints nothing: the flow's
    :func:`resume_point` checks again, reports and falls back."""
    import dataclasses

    if artifacts_root:
        cfg = dataclasses.replace(cfg, artifacts=dataclasses.replace(cfg.artifacts,
                                                                     root=artifacts_root))
    store = RunStore(cfg.artifacts.root, run_id)
    n_steps = len(plan(cfg.schedule))
    last = max((s for s in store.complete_steps() if s <= n_steps), default=0)
    if not last:
        return
    state_dir = state_root(cfg, run_id)
    kept = _state_steps(state_dir)
    damaged: list[tuple[int, Exception]] = []
    if last not in kept:
        damaged.append((last, StateFileMissingError(
            f"{state_dir / f'step={last:06d}'}: missing (step {last} is complete)")))
    for step in sorted((s for s in kept if s <= last), reverse=True):
        try:
            verify_state_files(state_dir / f"step={step:06d}", ROLES,
                               gae=cfg.ppo.advantage == "gae", optimizer=True,
                               recorded=recorded_state_versions(store, step),
                               require_verified=True)
            return
        except StateIntegrityError as exc:
            damaged.append((step, exc))
    raise StateIntegrityError(_no_intact_state(run_id, state_dir, last, damaged))


def finish_run(ctx: RunContext) -> dict:
    """Close the MLflow run and say where everything is."""
    ctx.tracker.end_run(ctx.mlflow_run_id)
    cfg = ctx.cfg
    summary = {
        "run_id": ctx.run_id,
        "run_store": ctx.store.run_dir,
        "mlflow_tracking_uri": ctx.tracker.tracking_uri,
        "mlflow_run_id": ctx.mlflow_run_id,
        "registered_models": [cfg.tracking.generator_registry_name,
                              cfg.tracking.discriminator_registry_name]
        if cfg.tracking.register_models else [],
    }
    from tasks.reporting import skipped_line, skipped_updates

    updates = ctx.store.read("updates")
    summary["updates"] = len(updates)
    summary["skipped_updates"] = skipped_updates(updates.to_dict("records"),
                                                 ctx.store.read("rewards").to_dict("records"),
                                                 cfg.ppo.advantage == "group")
    print(stage_table(ctx))
    print("\nTraining finished.\n"
          f"  run store   : {summary['run_store']}\n"
          f"  mlflow      : {summary['mlflow_tracking_uri']} (run {ctx.mlflow_run_id})\n"
          f"  models      : {', '.join(summary['registered_models']) or '(not registered)'}"
          " (aliases: candidate, champion)\n"
          f"  updates     : {skipped_line(len(updates), summary['skipped_updates'])}\n"
          f"  browse      : mlflow ui --backend-store-uri {summary['mlflow_tracking_uri']}"
          " --host 127.0.0.1 --workers 1\n"
          f"  read tables : pandas.read_parquet('{ctx.store.run_dir}/table=rewards')")
    return summary


def stage_table(ctx: RunContext) -> str:
    """The seeds' progress table: rates at the last step of each training stage."""
    import pandas as pd

    rewards = ctx.store.read("rewards")
    if rewards.empty:
        return "(no complete steps)"
    lines = ["stage  steps  generator reward  baseline pass rate  test validity",
             "-----  -----  ----------------  ------------------  -------------"]
    for stage, rows in rewards.groupby("stage"):
        last = rows[rows["step"] == rows["step"].max()]
        base = last["n_baseline_passed"].sum() / max(int(last["n_baseline"].sum()), 1)
        lines.append(f"{int(stage):5d}  {rows['step'].nunique():5d}  "
                     f"{last['generator_reward'].mean():16.3f}  {base:18.3f}  "
                     f"{pd.to_numeric(last['validity']).mean():13.3f}")
    return "\n".join(lines)
