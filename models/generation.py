"""Batched, seeded sampling that records each sampled token's log-probability.

All prompts of one stage go through ``model.generate`` together, left-padded, in chunks of
``SamplingConfig.batch_size``. Sampling uses only temperature and top-p, applied by our own
processors, and every other knob of ``generate`` is pinned to its no-op value: a model's
``generation_config.json`` (Qwen2.5's sets ``top_k=20``, ``repetition_penalty=1.05``) would
otherwise silently change the distribution, and PPO's ratios would compare log-probs of two
different policies. A last processor records ``log p(token)`` of the processed distribution the
token was drawn from, holding one step's scores at a time (``output_scores`` would keep
``batch x new_tokens x vocab`` floats: 5 GB for Qwen's vocabulary at 16 x 512).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from configs.schema import SamplingConfig


@dataclass
class Generation:
    """One sampled response."""

    text: str
    prompt_ids: list[int]
    response_ids: list[int]
    """Sampled tokens, up to and including the stop token (``finished``) or the length limit."""
    logprobs: list[float]
    """``log p(token)`` under the temperature/top-p distribution it was sampled from."""
    finished: bool
    """The response ended with a stop token rather than at ``max_new_tokens``."""
    seconds: float
    """Wall time of the ``model.generate`` call of this sample's chunk (``sampling.batch_size``
    prompts); the whole call's is ``GenerationBatch.seconds``."""


@dataclass
class GenerationBatch:
    """Every sample of one call (one stage), with timing."""

    generations: list[Generation]
    seconds: float
    new_tokens: int
    chunk_seconds: list[float] = field(default_factory=list)

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0


class _LogprobRecorder:
    """Logits processor, last in the list: records ``log_softmax(scores)[token]``.

    The token sampled at step ``t`` is only known at step ``t + 1`` (as ``input_ids[:, -1]``),
    so it keeps step ``t``'s scores until then; :meth:`finish` resolves the last step.
    """

    def __init__(self) -> None:
        self._scores: torch.Tensor | None = None
        self._lse: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []

    def _resolve(self, tokens: torch.Tensor) -> None:
        if self._scores is not None:
            chosen = self._scores.gather(1, tokens[:, None]).squeeze(1)
            self.steps.append((chosen - self._lse).float().cpu())

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self._scores is not None:
            self._resolve(input_ids[:, -1])
        self._scores = scores
        self._lse = torch.logsumexp(scores.float(), dim=-1)
        return scores

    def finish(self, sequences: torch.Tensor, prompt_len: int) -> torch.Tensor:
        """``(B, n_new)`` log-probs; steps ``generate`` took back are discarded."""
        n_new = sequences.shape[1] - prompt_len
        if len(self.steps) < n_new:
            self._resolve(sequences[:, prompt_len + len(self.steps)])
        self._scores = self._lse = None
        out = torch.stack(self.steps[:n_new], dim=1) if n_new else torch.zeros(
            sequences.shape[0], 0)
        return out


def _sampling_config(max_new_tokens: int, min_new_tokens: int, eos: list[int], pad: int):
    """Temperature and top-p are applied by our processors; every knob that would change the
    sampled distribution is set to its no-op value so the model's defaults cannot fill it."""
    from transformers import GenerationConfig  # deferred: see generate

    return GenerationConfig(
        do_sample=True, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, typical_p=1.0,
        epsilon_cutoff=0.0, eta_cutoff=0.0, repetition_penalty=1.0, no_repeat_ngram_size=0,
        num_beams=1, max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
        eos_token_id=eos, pad_token_id=pad, renormalize_logits=False)


def stop_token_ids(model, tokenizer) -> list[int]:
    """The tokenizer's EOS plus the model's configured ones (Qwen instruct has two)."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return sorted(i for i in ids if i is not None)


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int,
             device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, P)`` input ids and attention mask, prompts aligned to the right edge."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        if len(prompt):
            ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
            mask[row, width - len(prompt):] = 1
    return ids.to(device), mask.to(device)


def _model_device(model) -> torch.device:
    return next(model.parameters()).device


def generate(model, tokenizer, prompts: Sequence[Sequence[int] | str], sampling: SamplingConfig,
             *, seed: int | None = None, max_new_tokens: int | None = None,
             min_new_tokens: int = 0) -> GenerationBatch:
    """Sample one response per prompt (token ids or text), ``sampling.batch_size`` at a time.

    Reproducible: the same prompts, seed and weights give the same samples (each chunk seeds
    its own generator state from ``seed`` and its index, inside ``fork_rng`` so the caller's
    random state is untouched). A sample depends on its chunk's padding, so change the batch
    size and samples change too. ``min_new_tokens`` forbids stopping early (benchmarks only:
    it masks EOS, so those log-probs are of a slightly different distribution).
    """
    # transformers deferred: flows.train imports this module before its Prefect server starts
    # and loads the model libraries while the server starts (flows.train's preload)
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

    seed = sampling.seed if seed is None else seed
    max_new = max_new_tokens or sampling.max_new_tokens
    prompt_ids = [list(tokenizer(p, add_special_tokens=False)["input_ids"]) if isinstance(p, str)
                  else list(p) for p in prompts]
    if any(not p for p in prompt_ids):
        raise ValueError("every prompt needs at least one token")
    device = _model_device(model)
    eos = stop_token_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    config = _sampling_config(max_new, min_new_tokens, eos, pad)
    was_training = model.training
    model.eval()
    out: list[Generation] = []
    chunk_seconds: list[float] = []
    start_all = time.perf_counter()
    try:
        for index, start in enumerate(range(0, len(prompt_ids), sampling.batch_size)):
            chunk = prompt_ids[start:start + sampling.batch_size]
            input_ids, attention_mask = left_pad(chunk, pad, device)
            recorder = _LogprobRecorder()
            processors = []
            if sampling.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(sampling.temperature))
            if sampling.top_p < 1.0:
                processors.append(TopPLogitsWarper(sampling.top_p))
            processors.append(recorder)
            t0 = time.perf_counter()
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                torch.manual_seed(seed * 1_000_003 + index)
                with torch.no_grad():
                    sequences = model.generate(
                        input_ids=input_ids, attention_mask=attention_mask,
                        generation_config=config,
                        logits_processor=LogitsProcessorList(processors))
            if not isinstance(sequences, torch.Tensor):  # a ModelOutput when configured so
                sequences = sequences.sequences
            logprobs = recorder.finish(sequences, input_ids.shape[1])
            seconds = time.perf_counter() - t0
            chunk_seconds.append(seconds)
            new = sequences[:, input_ids.shape[1]:].cpu()
            for row, prompt in enumerate(chunk):
                tokens = new[row].tolist()
                stop = next((i for i, tok in enumerate(tokens) if tok in eos), None)
                length = len(tokens) if stop is None else stop + 1
                response = tokens[:length]
                out.append(Generation(
                    text=tokenizer.decode(response, skip_special_tokens=True),
                    prompt_ids=list(prompt), response_ids=response,
                    logprobs=logprobs[row, :length].tolist(), finished=stop is not None,
                    seconds=seconds))
    finally:
        model.train(was_training)
    total = time.perf_counter() - start_all
    return GenerationBatch(generations=out, seconds=total,
                           new_tokens=sum(len(g.response_ids) for g in out),
                           chunk_seconds=chunk_seconds)

