"""Inference: the chain for new problems, from any model the registry or a path names.

    from serving.inference import InferenceEngine, format_result
    engine = InferenceEngine.load("tiny-generator@champion")       # registry alias (or version:
    result = engine.solve_problem(problem)                          #  models:/tiny-generator/3)
    print(format_result(result))

``InferenceEngine.load(model)`` accepts every spec of :mod:`serving.sources`: a registry alias
or version (downloaded and hash-verified, on the base model recorded with it), a logged or
local checkpoint, an adapter folder, or a base model with fresh adapters. With
``discriminator="auto"`` the sibling ``...-discriminator`` under the same alias is loaded too.

The chain itself (stages, tests, execution) is ``pipeline.solver.ChainSolver``, the one
training, evaluation and the held-out rows use; this module loads what it samples from.
Generation is batched per stage over problems x samples and uses the config's sampling
(temperature, top-p, ``max_new_tokens``): pass@k needs samples, so there is no greedy mode.
No Prefect here.
"""

from __future__ import annotations

import json
import shutil
import weakref
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from configs.errors import ConfigError
from configs.names import CODE_STAGE
from configs.schema import LoraConfig, TrainConfig
from models.policy import Policies
from models.stages import get_stage
from pipeline.solver import ChainSolver, InferenceResult
from serving.sources import ModelSource, resolve_source, sibling
from tempdirs import owned_tempdir

__all__ = ["InferenceEngine", "InferenceResult", "format_result"]

def _lora_from_adapter(folder: Path, fallback: LoraConfig) -> LoraConfig:
    """The adapter's own rank, alpha and targets: ``Policies.load_adapter`` refuses others."""
    data = json.loads((folder / "adapter_config.json").read_text())
    targets = data.get("target_modules")
    targets = tuple(sorted(targets)) if isinstance(targets, list | tuple) else None
    return replace(fallback, r=int(data.get("r", fallback.r)),
                   alpha=int(data.get("lora_alpha", fallback.alpha)), target_modules=targets)


# --- the engine ------------------------------------------------------------------------------
class InferenceEngine(ChainSolver):
    """The chain (``pipeline.solver.ChainSolver``) on policies loaded from model specs, in
    eval mode, with the config's sampling and sandbox settings."""

    def __init__(self, policies: Policies, cfg: TrainConfig,
                 sources: dict[str, ModelSource | None]) -> None:
        super().__init__(policies, cfg)
        self.policies = policies
        self.sources = sources

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def load(cls, model: str | None = None, cfg: TrainConfig | None = None, *,
             discriminator: str | None = "auto", tracker: Any = None) -> InferenceEngine:
        """Load the generator from ``model`` (default: the config's base model) and the
        discriminator from ``discriminator`` (``"auto"``: the registry sibling when there is
        one; ``None`` or not found: fresh adapter on the generator's base)."""
        cfg = cfg or TrainConfig()
        if cfg.model.cpu_threads:
            torch.set_num_threads(cfg.model.cpu_threads)
        # Downloads (a registry version's checkpoint, its bundled base model) land here and
        # live as long as the engine: a sampler started later may read the base from it. Named
        # by pid: a run stopped past its grace period (os._exit) skips the finalizer, and the
        # next load removes what it left.
        workdir = owned_tempdir("inference-")
        try:
            gen = resolve_source(model or cfg.model.generator, cfg, workdir, tracker)
            disc = None
            if discriminator == "auto":
                other = sibling(gen.spec)
                if other:
                    try:
                        disc = resolve_source(other, cfg, workdir, tracker)
                    except ValueError:  # no discriminator under that alias: fresh adapter
                        disc = None
            elif discriminator:
                disc = resolve_source(discriminator, cfg, workdir, tracker)
            engine = cls.from_sources(gen, disc, cfg)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        weakref.finalize(engine, shutil.rmtree, workdir, ignore_errors=True)
        return engine

    @classmethod
    def from_checkpoint(cls, path: str | Path, cfg: TrainConfig | None = None,
                        discriminator: str | Path | None = None) -> InferenceEngine:
        """:meth:`load` of a checkpoint or adapter folder or a ``runs:/`` URI; the discriminator
        only from ``discriminator`` when given (else a fresh adapter), never a registry
        sibling."""
        return cls.load(str(path), cfg, discriminator=str(discriminator) if discriminator
                        else None)

    @classmethod
    def from_sources(cls, gen: ModelSource, disc: ModelSource | None,
                     cfg: TrainConfig) -> InferenceEngine:
        gen_base = gen.base_model or cfg.model.generator
        disc_base = (disc.base_model if disc else None) or gen_base
        shared = gen_base == disc_base or (
            Path(gen_base).exists() and Path(gen_base).resolve() == Path(disc_base).resolve())
        model_cfg = replace(
            cfg.model, generator=gen_base, discriminator=None if shared else disc_base,
            layout="shared" if shared else "separate", dtype=gen.dtype or cfg.model.dtype,
            tiny=cfg.model.tiny and gen_base == cfg.model.generator)
        lora = cfg.lora
        adapters = {r: s.adapter_dir for r, s in (("generator", gen), ("discriminator", disc))
                    if s is not None and s.adapter_dir is not None}
        loras = {r: _lora_from_adapter(p, cfg.lora) for r, p in adapters.items()}
        if loras:
            lora = loras.get("generator") or loras["discriminator"]
            other = loras.get("discriminator", lora)
            if (other.r, other.alpha, other.target_modules) != (
                    lora.r, lora.alpha, lora.target_modules):
                raise ConfigError(f"generator adapter (r={lora.r}, alpha={lora.alpha}) and "
                                  f"discriminator adapter (r={other.r}, alpha={other.alpha}) "
                                  "differ; load them in two engines")
        policies = Policies.load(model_cfg, lora)
        for role, folder in adapters.items():
            policies.load_adapter(role, folder)
        policies.activate("generator")
        return cls(policies, replace(cfg, model=model_cfg, lora=lora),
                   {"generator": gen, "discriminator": disc})

    def describe(self) -> str:
        gen, disc = self.sources["generator"], self.sources["discriminator"]
        return (f"generator: {gen.describe()}; discriminator: "
                f"{disc.describe() if disc else 'fresh adapter on the base model'}")

    def write_tests(self, results: Sequence[InferenceResult], seed: int | None = None) -> None:
        super().write_tests(results, seed)
        self.policies.activate("generator")  # the engine is left as it was loaded: generating


# --- printing --------------------------------------------------------------------------------
def _indent(text: str, prefix: str = "    ") -> str:
    body = text.strip() or "(empty)"
    return "\n".join(prefix + line for line in body.splitlines())


def format_result(result: InferenceResult) -> str:
    """The chain as people read it: stages, code, tests, execution, timing."""
    r = result
    lines = [f"=== {r.problem.id} (sample {r.sample_idx}, {r.mode}) ===",
             _indent(r.problem.description.strip(), "  ")]
    for stage, text, secs in zip(r.reasoning_stages, r.reasoning_chain, r.stage_times,
                                 strict=False):
        lines += [f"--- stage {stage}: {get_stage(stage).name} ({secs:.2f}s)", _indent(text)]
    lines += [f"--- stage {CODE_STAGE}: {get_stage(CODE_STAGE).name} "
              f"({r.stage_times[-1]:.2f}s)",
              _indent(r.generated_code),
              f"--- parsed code: {'ok' if r.code is not None else r.code_reason}"]
    if r.code is not None:
        lines.append(_indent(r.code))
    if r.test_texts:
        lines.append(f"--- discriminator tests ({len(r.tests)} kept)")
        lines += [f"    [stage {s}] {t.splitlines()[0]}" + (" ..." if "\n" in t else "")
                  for s, t in r.tests] or ["    (none parsed)"]
    ex = r.execution_result
    if ex is None:
        lines.append("--- execution: not run" + ("" if r.code is not None else " (no code)"))
    else:
        lines.append(f"--- execution: {ex.passed}/{ex.total} tests passed "
                     f"(isolation {ex.isolation})")
        for test, o in zip(r.executed_tests, ex.outcomes, strict=False):
            first = test.strip().splitlines()[0] if test.strip() else test
            lines.append(f"    {o.status:<8} {first[:90]}")
    lines.append(f"--- time: generation {r.inference_time:.2f}s, tests "
                 f"{sum(r.test_times):.2f}s, execution {r.execution_time:.2f}s, total "
                 f"{r.total_time:.2f}s")
    return "\n".join(lines)
