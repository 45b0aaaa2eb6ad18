"""The supervised warm start as a Prefect task (the maths: ``pipeline.warmstart``), cached.

The warm-started adapters are a function of the base model, the LoRA and warm-start settings,
the problems, the prompts and the code that fits them; they are kept under
``.cache/warmstart/<key>/`` with ``key`` a hash of all of those (:func:`warm_start_key`), so a
later run or benchmark with the same inputs loads them in seconds and says so. An entry is
written atomically (a temp folder renamed) with a manifest of each role's ``adapter_version``,
checked after loading: a damaged entry is reported and fitted again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import torch
from prefect import task
from prefect.cache_policies import NO_CACHE

from configs import config_to_dict
from lifecycle.context import RunContext
from lifecycle.digests import base_digests, files_digest
from pipeline.warmstart import fit_roles
from problems import load_problems

CACHE_ROOT = Path(".cache") / "warmstart"
REPO = Path(__file__).resolve().parent.parent
# The code whose change changes what the warm start fits (prompts, stage texts, log-probs).
CODE = ("pipeline/warmstart.py", "configs/names.py", "models/prompts.py", "models/stages.py",
        "models/logprobs.py", "models/policy.py", "problems/family.py", "problems/guards.py")


def warm_problems(ctx: RunContext) -> list:
    """The problems the warm start is fitted on: ``warm_start.source`` (first ``limit``) or the
    run's own."""
    ws = ctx.cfg.warm_start
    if ws.source is None:
        return list(ctx.problems)

    return load_problems(ws.source, limit=ws.limit)


def warm_start_key(ctx: RunContext, problems: list | None = None) -> str:
    """A hash of everything that determines the warm-started adapters."""
    import transformers  # deferred: flows.train loads it while its Prefect server starts

    cfg = ctx.cfg
    model = config_to_dict(cfg)["model"]
    problems = [(p.id, p.description, p.entry_point, p.reference_solution,
                 list(p.baseline_tests))
                for p in (warm_problems(ctx) if problems is None else problems)]
    blob = json.dumps({
        "model": model, "bases": base_digests(cfg), "lora": config_to_dict(cfg)["lora"],
        "warm_start": config_to_dict(cfg)["warm_start"], "chain": config_to_dict(cfg)["chain"],
        "seed": cfg.sampling.seed,
        "problems": problems, "code": files_digest([REPO / c for c in CODE], REPO),
        "torch": torch.__version__, "transformers": transformers.__version__,
    }, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _load_cached(ctx: RunContext, folder: Path) -> dict | None:
    """The cached adapters loaded into ``ctx`` (their manifest), or None when the entry is
    missing or damaged (then said, and the caller fits again)."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        for role, version in manifest["adapter_versions"].items():
            ctx.roles[role].load(folder / role, None)
            if ctx.roles[role].version != version:
                raise ValueError(f"{role} adapter_version {ctx.roles[role].version}, "
                                 f"expected {version}")
        return manifest
    except FileNotFoundError:
        return None
    except Exception as exc:  # damaged entry: fitted again, from fresh adapters
        print(f"warm start: cached entry {folder} is damaged ({type(exc).__name__}: {exc}); "
              "fitting again")
        ctx.load_policies()
        shutil.rmtree(folder, ignore_errors=True)
        return None


def _save_cached(ctx: RunContext, folder: Path, stats: dict[str, float]) -> None:
    tmp = folder.with_name(f".tmp-{folder.name}-{time.time_ns()}")
    tmp.mkdir(parents=True)
    roles = [r for r in ctx.cfg.warm_start.roles]
    for role in roles:
        ctx.roles[role].save(tmp / role, None)
    (tmp / "manifest.json").write_text(json.dumps({
        "adapter_versions": {r: ctx.roles[r].version for r in roles}, "stats": stats,
        "saved_by": ctx.run_id, "created_at": time.time()}, indent=1))
    if folder.exists() and not (folder / "manifest.json").exists():
        shutil.rmtree(folder, ignore_errors=True)  # a leftover without its manifest: no entry
    try:
        tmp.rename(folder)
    except OSError:
        # Another run (two workers, the same config) saved this entry first. Its key says its
        # adapters are these; keep the one in place, which a third run may be reading now.
        shutil.rmtree(tmp, ignore_errors=True)
        if not (folder / "manifest.json").exists():
            raise


@task(name="warm-start", task_run_name="warm-start", cache_policy=NO_CACHE)
def warm_start(ctx: RunContext) -> dict[str, float]:
    """Fit both adapters (or load them from the cache); returns first/last loss per role
    (logged as ``warm_start/*``)."""
    problems = warm_problems(ctx)
    folder = CACHE_ROOT / warm_start_key(ctx, problems)
    cached = _load_cached(ctx, folder)
    if cached is not None:
        print(f"warm start: reused {folder} (saved by run {cached.get('saved_by')}; delete the "
              "folder to fit again)")
        stats = dict(cached.get("stats", {}))
    else:
        stats = fit_roles(ctx.policies, problems, ctx.cfg.warm_start,
                          ctx.cfg.model.max_context_tokens,
                          lambda role: ctx.seed("warm-start", role), ctx.cfg.chain)
        _save_cached(ctx, folder, stats)
    if ctx.tracker is not None and ctx.mlflow_run_id:
        ctx.tracker.log_metrics(ctx.mlflow_run_id, stats, step=0)
        ctx.tracker.set_tags(ctx.mlflow_run_id, {"warm_start.cache": str(folder),
                                                 "warm_start.reused": cached is not None})
    return stats
