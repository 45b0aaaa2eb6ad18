"""``VllmSampler``: the chain's ``Sampler`` on one vLLM engine holding the base model once.

Before each batch it makes sure the engine samples with the role's *current* adapter: the
adapter's content hash (``Policies.adapter_version``, the version the chains rows record) is
compared with the version the engine holds, and a changed one is pushed first, so a step after
a PPO update never samples from a stale adapter. How it is pushed, ``sampling.vllm_weights``:

- ``merged`` (default): ``W + B A * alpha/r`` of every adapted block, computed by peft, written
  once to a safetensors file (in tmpfs) and loaded into the engine's weights in place (vLLM's
  ``reload_weights``, then the prefix cache is reset), as TRL's colocate mode does. The engine
  then runs the plain base-model kernels. Both roles share the engine, so switching role is a
  push too (the step samples one role's stages together: two switches per step).
- ``lora``: the adapter folder (peft ``save_pretrained``) as a vLLM ``LoRARequest``, a new id
  per version. The engine keeps the base weights and applies the adapter per request.

On a CPU, vLLM's LoRA path samples at a fraction of the merged weights' speed, and a merged
push costs far less than that difference saves, so ``merged`` is the default; with
compilation, merged sampling with a push per step is several times faster than transformers
(``benchmarks/rollout_engine.py`` measures it; docs/training.md, "Rollouts on vLLM", has the
figures). On a GPU vLLM's LoRA kernels cost less relative to the base ones and ``lora`` skips
the merge and the copy; it is there to measure that case.

Sampling means what it means under ``hf``: temperature and top-p only (top-k, min-p and
penalties pinned off, no model ``generation_config`` defaults), the same stop tokens
(``models.generation.stop_token_ids``), ``max_new_tokens`` and ``min_new_tokens``, log-probs of
the processed distribution the token was drawn from, and one seed per sample
(``seed * 1_000_003 + index``), so a sample does not depend on what else is in the batch.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from configs.names import ROLES
from configs.schema import ModelConfig, SamplingConfig
from models.engine.client import EngineClient
from models.generation import Generation, GenerationBatch, stop_length, stop_token_ids
from models.merged import merged_weights
from models.policy import Policies
from models.prompts import Prompt
from tempdirs import owned_tempdir, remove_orphans

SEED_MODULUS = 2 ** 63


def engine_settings(model_cfg: ModelConfig, sampling: SamplingConfig, lora_rank: int,
                    dtype: torch.dtype) -> dict[str, Any]:
    """What the engine is started with (``models.engine.worker.Engine.start``)."""
    settings = {"model": str(Path(model_cfg.generator).resolve())
                if Path(model_cfg.generator).exists() else model_cfg.generator,
                "dtype": str(dtype).removeprefix("torch."),
                "max_model_len": model_cfg.max_context_tokens + sampling.max_new_tokens,
                "seed": sampling.seed, "max_num_seqs": 256,
                "kv_cache_gib": sampling.vllm_kv_cache_gib,
                "enforce_eager": not sampling.vllm_compile,
                "gpu_memory_utilization": sampling.vllm_gpu_memory_utilization}
    if sampling.vllm_weights == "lora":
        settings.update(max_lora_rank=lora_rank, max_loras=2)
    return settings


WEIGHTS_PREFIX = "vllm-weights-"


def weights_dir(root: Path | None = None) -> Path:
    """A new folder for this process's merged-weight pushes, ``vllm-weights-<pid>-*`` in
    ``root`` (default :func:`weights_root`). Folders of processes that are gone are removed
    first (:func:`remove_orphaned_weights`), so they do not pile up in memory."""
    return owned_tempdir(WEIGHTS_PREFIX, weights_root() if root is None else root)


def weights_root() -> Path:
    """Where pushes go: memory, ``/dev/shm``, where there is one (a push writes every adapted
    block's weights, far faster to memory than to a disk), else the temporary folder."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else Path(tempfile.gettempdir())


def remove_orphaned_weights(root: Path | None = None) -> None:
    """Remove the push folders in ``root`` of processes that are gone: a ``kill -9`` skips
    :meth:`VllmSampler.close`, which removes its own."""
    remove_orphans(WEIGHTS_PREFIX, weights_root() if root is None else root)


class VllmSampler:
    """``pipeline.chains.Sampler`` on a vLLM engine; ``policies`` stay the trainer's (tokenizers,
    adapters, versions). Start with :meth:`start`, stop with :meth:`close`."""

    def __init__(self, policies: Policies, model_cfg: ModelConfig, sampling: SamplingConfig,
                 lora_rank: int, log_path: str | Path, threads: int | None = None) -> None:
        if model_cfg.discriminator not in (None, model_cfg.generator):
            raise ValueError("sampling.engine=vllm holds one base model for both roles: "
                             f"model.discriminator ({model_cfg.discriminator}) must be unset or "
                             f"equal to model.generator ({model_cfg.generator})")
        self.policies = policies
        self.weights = sampling.vllm_weights
        self.client = EngineClient(log_path, threads=threads)
        model = policies.peft_model("generator")
        self._settings = engine_settings(model_cfg, sampling, lora_rank,
                                         next(model.parameters()).dtype)
        # the same stop tokens as transformers sampling: the tokenizer's EOS and the model's
        self._stop = {role: stop_token_ids(policies.peft_model(role), policies.tokenizer_for(role))
                      for role in ROLES}
        self._loaded: tuple[str, str] | None = None      # (role, version) in the engine
        self._lora_ids: dict[tuple[str, str], int] = {}
        self._dir = weights_dir()
        self.start_seconds = 0.0
        self.sync_seconds = 0.0
        self.syncs = 0

    def use(self, policies: Policies) -> None:
        """Sample with ``policies`` from now on (a run that reloads its models: a damaged warm
        start or resume state); the next batch pushes their adapter whatever its version."""
        self.policies = policies
        self._loaded = None

    def start(self) -> float:
        self.start_seconds = self.client.start(dict(self._settings))
        return self.start_seconds

    def close(self) -> None:
        self.client.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> VllmSampler:
        if not self.client.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the Sampler protocol ----------------------------------------------------------------
    def tokenizer_for(self, role: str) -> Any:
        return self.policies.tokenizer_for(role)

    def adapter_version(self, role: str) -> str:
        return self.policies.adapter_version(role)

    def sample(self, role: str, prompts: Sequence[Prompt | Sequence[int]],
               sampling: SamplingConfig, seed: int, *, max_new_tokens: int | None = None,
               min_new_tokens: int = 0, stop: Any = None) -> GenerationBatch:
        start = time.perf_counter()
        lora = self._sync(role)
        tokenizer = self.tokenizer_for(role)
        prompt_ids = [list(p.ids) if isinstance(p, Prompt) else list(p) for p in prompts]
        if any(not p for p in prompt_ids):
            raise ValueError("every prompt needs at least one token")
        params = {"temperature": sampling.temperature, "top_p": sampling.top_p,
                  "max_tokens": max_new_tokens or sampling.max_new_tokens,
                  "min_tokens": min_new_tokens,
                  "stop_token_ids": self._stop[role]}
        seeds = [(seed * 1_000_003 + i) % SEED_MODULUS for i in range(len(prompt_ids))]
        reply = self.client.call({"op": "generate", "prompts": prompt_ids, "params": params,
                                  "seeds": seeds, "lora": lora})
        seconds = time.perf_counter() - start
        out = []
        for ids, o in zip(prompt_ids, reply["outputs"], strict=True):
            # the stop rule is applied here, as the transformers loop applies it while it
            # samples: the same tokens up to the one that completes the stop text
            cut = stop_length(tokenizer, o["token_ids"], stop) if stop else None
            tokens = list(o["token_ids"])[:cut]
            out.append(Generation(text=tokenizer.decode(tokens, skip_special_tokens=True),
                                  prompt_ids=ids, response_ids=tokens,
                                  logprobs=list(o["logprobs"])[:cut],
                                  finished=o["finish_reason"] == "stop" or cut is not None,
                                  seconds=seconds))
        return GenerationBatch(generations=out, seconds=seconds,
                               new_tokens=sum(len(g.response_ids) for g in out),
                               chunk_seconds=[reply["seconds"]])

    # -- getting the current adapter into the engine -----------------------------------------
    def _sync(self, role: str) -> dict[str, Any] | None:
        """Push ``role``'s current adapter unless the engine holds it; the LoRA request to
        sample with (``lora`` weights), else None."""
        version = self.adapter_version(role)
        if self.weights == "lora":
            return self._lora_request(role, version)
        if self._loaded == (role, version):
            return None
        t0 = time.perf_counter()
        path = self._dir / "merged.safetensors"
        save_file(merged_weights(self.policies.peft_model(role), role), str(path))
        self.client.call({"op": "load_weights", "path": str(path)})
        path.unlink()
        self._loaded = (role, version)
        self.sync_seconds += time.perf_counter() - t0
        self.syncs += 1
        return None

    def _lora_request(self, role: str, version: str) -> dict[str, Any]:
        key = (role, version)
        if key not in self._lora_ids:
            t0 = time.perf_counter()
            lora_id = len(self._lora_ids) + 1
            self.policies.save_adapter(role, self._dir / f"{role}-{lora_id}")
            self._lora_ids[key] = lora_id
            self.sync_seconds += time.perf_counter() - t0
            self.syncs += 1
        lora_id = self._lora_ids[key]
        return {"name": f"{role}-{version[:12]}", "id": lora_id,
                "path": str(self._dir / f"{role}-{lora_id}")}
