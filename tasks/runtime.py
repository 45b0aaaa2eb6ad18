"""What the tasks of one training run share: config, run store, tracker, policies, optimizers.

A ``RunContext`` lives in the flow's process (models are not shipped between processes); tasks
take it as a parameter with caching off, read their inputs from the run store and write their
outputs there. Everything in it can be rebuilt from the config and the run id, which is what a
resumed run or a replay does.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from artifacts.store import RunStore
from configs.schema import TrainConfig
from problems import Problem, load_problems
from rewards.mutants import Mutant, make_mutants
from tasks.schedule import ROLES, derive_seed

STATE_KEEP = 2  # resume states kept per run: the last complete step's and the one after it
VALUE_HEAD_FILE = "value_head.safetensors"  # inside a role's adapter folder (GAE runs only)
CONFIG_FILE = "config.json"  # the resolved config, in the run store's ``_run/`` (replays)


def state_root(cfg: TrainConfig, run_id: str) -> Path:
    """Local folder for resume state (adapters + optimizer per step). Next to the Parquet
    store when that is a local folder, else under ``.cache/state`` (peft writes local files)."""
    root = cfg.artifacts.root
    if "://" in root and not root.startswith("file://"):
        return Path(".cache") / "state" / run_id
    return Path(root.removeprefix("file://")) / "_state" / f"run_id={run_id}"


def _optimizer_file(folder: Path, role: str) -> Path:
    """Where a resume state folder keeps ``role``'s optimizer state."""
    return folder / f"{role}-optimizer.pt"


def load_run_problems(cfg: TrainConfig) -> list[Problem]:
    p = cfg.problems
    return load_problems(p.source, ids=p.ids, limit=p.limit, curriculum=p.curriculum)


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
        from a resume state folder or a downloaded stage checkpoint."""
        self.policies.load_adapter(role, adapter_dir)
        if role in self.value_heads:
            from safetensors.torch import load_file

            path = adapter_dir / VALUE_HEAD_FILE
            if not path.is_file():
                raise FileNotFoundError(f"{path}: ppo.advantage='gae' but this state has no "
                                        f"value head for {role}")
            head = self.value_heads[role]
            head.load_state_dict(load_file(path, device=str(head.proj.weight.device)))
        if optimizer_file is not None:
            self.optimizers[role].load_state_dict(torch.load(optimizer_file, weights_only=True))

    def restore_role(self, role: str, folder: Path, optimizer: bool = True) -> None:
        """:meth:`load_role` from a resume state folder written by :meth:`save_role`."""
        self.load_role(role, folder / role,
                       _optimizer_file(folder, role) if optimizer else None)

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
        so a kill leaves either the whole state or none of it."""
        final = self.state_dir / f"step={step:06d}"
        tmp = self.state_dir / f".tmp-step={step:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for role in ROLES:
            self.save_role(role, tmp)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in sorted(self.state_dir.glob("step=*"))[:-STATE_KEEP]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def state_steps(self) -> list[int]:
        return sorted(int(p.name.split("=")[1]) for p in self.state_dir.glob("step=*"))

    def restore_state(self, step: int) -> None:
        folder = self.state_dir / f"step={step:06d}"
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no resume state for step {step}")
        for role in ROLES:
            self.restore_role(role, folder)


# -- run lifecycle (called by the flow) -------------------------------------------------------

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
    """
    done = ctx.store.complete_steps()
    last = max((s for s in done if s <= len(steps)), default=0)
    if last and last not in ctx.state_steps():
        raise FileNotFoundError(
            f"{ctx.state_dir}: step {last} is complete but its adapter state is missing; "
            "cannot resume this run (start a new run id)")
    if last or 0 in ctx.state_steps():
        ctx.restore_state(last)
    return last


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
    print(stage_table(ctx))
    print("\nTraining finished.\n"
          f"  run store   : {summary['run_store']}\n"
          f"  mlflow      : {summary['mlflow_tracking_uri']} (run {ctx.mlflow_run_id})\n"
          f"  models      : {', '.join(summary['registered_models']) or '(not registered)'}"
          " (aliases: candidate, champion)\n"
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
