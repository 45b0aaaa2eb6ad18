"""Batched, seeded sampling that records each sampled token's log-probability.

All prompts of one stage are sampled together, left-padded, in chunks of
``SamplingConfig.batch_size``, by our own decode loop over the model's KV cache
(``_sample_chunk``, not ``model.generate``): a model's ``generation_config.json`` (Qwen2.5's sets
``top_k=20``, ``repetition_penalty=1.05``) is never read, so only temperature and top-p shape
the distribution, and PPO's ratios compare log-probs of one policy. Each step records
``log p(token)`` of the processed distribution the token was drawn from, one step's scores at a
time (keeping every step's would be ``batch x new_tokens x vocab`` floats: 5 GB for Qwen's
vocabulary at 16 x 512).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
    """Wall time of the sampling of this sample's chunk (``sampling.batch_size``
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


def _warpers(temperature: float, top_p: float) -> list:
    """Temperature, then top-p (transformers' own warpers: the semantics vLLM's match)."""
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper  # deferred: see generate

    warpers = []
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    return warpers


def draw(probs: torch.Tensor) -> torch.Tensor:
    """One token per row of ``probs`` (``(B, V)``, each row summing to ~1), by inverse CDF: one
    uniform per row, scaled to the row's total mass, found in the row's cumulative sum. The
    same distribution as ``torch.multinomial(probs, 1)``, which on CPU draws an exponential
    variate for every vocabulary entry (``B x V`` logarithms per token), so this is faster, the
    more so the larger the vocabulary (``benchmarks/token_draw.py`` measures it).

    The sum runs in float64, so no entry's share moves by more than ~1e-13. A token of
    probability 0 is never drawn: its cumulative sum equals its predecessor's exactly, and the
    search returns the first entry whose sum exceeds the uniform, which is kept strictly below
    the total.

    >>> g = torch.manual_seed(0)
    >>> draw(torch.tensor([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])).tolist()
    [1, 2]
    """
    cdf = probs.to(torch.float64).cumsum(-1)
    total = cdf[:, -1:]
    if not bool(torch.isfinite(total).all() and (total > 0).all()):
        raise ValueError("sampling needs finite probabilities with a positive sum in every "
                         "row (the model produced NaN or infinite logits?)")
    uniform = torch.rand(total.shape, dtype=torch.float64, device=probs.device) * total
    uniform = torch.minimum(uniform, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, uniform, right=True).squeeze(1)


def distinct_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor
                  ) -> tuple[list[int], list[int]]:
    """Rows that hold the same padded prompt (ids and mask): the first row of each distinct
    one, and for every row the index of its prompt among them.

    >>> ids = torch.tensor([[0, 5], [0, 5], [7, 5], [0, 5]])
    >>> distinct_rows(ids, torch.tensor([[0, 1], [0, 1], [1, 1], [1, 1]]))
    ([0, 2, 3], [0, 0, 1, 2])
    """
    seen: dict[tuple, int] = {}
    firsts: list[int] = []
    expand: list[int] = []
    for row, key in enumerate(zip(map(tuple, input_ids.tolist()),
                                  map(tuple, attention_mask.tolist()), strict=True)):
        if key not in seen:
            seen[key] = len(firsts)
            firsts.append(row)
        expand.append(seen[key])
    return firsts, expand


def _prefill(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             positions: torch.Tensor, share: bool) -> tuple[torch.Tensor, Any]:
    """The prompts' last-position logits and KV cache. With ``share``, each distinct prompt
    (a group's samples share theirs) is run once and its logits and cache rows are copied to
    every row that holds it: the group's samples then draw from the same numbers, the prefill
    costs a quarter for groups of four. A row's numbers do not depend on the other rows of
    its batch, so the samples are the same either way, bit for bit
    (``tests/test_models_generation.py``, float32 and float64)."""
    from transformers import DynamicCache  # deferred: see generate

    firsts, expand = distinct_rows(input_ids, attention_mask) if share else ([], [])
    shared = share and len(firsts) < input_ids.shape[0]
    rows = torch.tensor(firsts, device=input_ids.device) if shared else slice(None)
    out = model(input_ids=input_ids[rows], attention_mask=attention_mask[rows],
                position_ids=positions[rows], past_key_values=DynamicCache(), use_cache=True,
                logits_to_keep=1)
    if not shared:
        return out.logits, out.past_key_values
    copies = torch.tensor(expand, device=input_ids.device)
    out.past_key_values.reorder_cache(copies)
    return out.logits[copies], out.past_key_values


@functools.cache
def _reserved_layer() -> type:
    """The KV cache layer :func:`reserve` puts in (a class made on first use: transformers is
    imported late here, see ``generate``)."""
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):
        """A cache layer whose new positions are written into a buffer reserved up front;
        ``keys`` and ``values`` are views of its filled part. ``DynamicLayer.update``
        concatenates instead, copying the layer's whole cache at every token."""

        def __init__(self, keys: torch.Tensor, values: torch.Tensor, extra: int):
            super().__init__()
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            batch, heads, length, dim = keys.shape
            self._keys = keys.new_empty((batch, heads, length + extra, dim))
            self._values = values.new_empty((batch, heads, length + extra, values.shape[-1]))
            self._keys[:, :, :length], self._values[:, :, :length] = keys, values
            self._length = length
            self.keys, self.values = self._keys[:, :, :length], self._values[:, :, :length]

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
                   **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
            end = self._length + key_states.shape[-2]
            self._keys[:, :, self._length:end] = key_states
            self._values[:, :, self._length:end] = value_states
            self._length = end
            self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
            return self.keys, self.values

        def _only_appends(self, *args: Any, **kwargs: Any) -> None:
            # DynamicLayer's versions would rebind keys/values away from the buffer that
            # update() goes on writing: wrong numbers, silently. Nothing here calls them.
            raise NotImplementedError("a reserved cache layer only appends (the decode loop "
                                      "of models.generation)")

        reorder_cache = crop = batch_repeat_interleave = batch_select_indices = _only_appends

    return ReservedLayer


def reserve(cache: Any, extra: int) -> Any:
    """``cache`` (after the prefill) with room for ``extra`` more positions per layer, written
    in place as they come: attention reads the same numbers as from concatenated tensors, so
    the samples are the same bit for bit (``tests/test_models_generation.py``), without
    transformers' copy of the whole cache at every token, which saves sampling time
    (docs/training.md has the figure)."""
    layer = _reserved_layer()
    cache.layers = [layer(old.keys, old.values, extra) for old in cache.layers]
    return cache


def stop_length(tokenizer, tokens: Sequence[int], stop: Any) -> int | None:
    """The length of the shortest prefix of ``tokens`` whose text ``stop`` (a
    ``models.stages.StopRule``) says has reached its end; ``None`` if none does. The vLLM
    engine's responses are cut there afterwards; the transformers loop finds the same length
    as it samples (it checks the rule after every token)."""
    for length in range(1, len(tokens) + 1):
        if stop.hit(tokenizer.decode(tokens[:length], skip_special_tokens=True)):
            return length
    return None


def _sample_chunk(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_new: int,
                  min_new: int, eos: list[int], pad: int, warpers: list,
                  share_prefill: bool = True, stop: Any = None, tokenizer: Any = None
                  ) -> tuple[torch.Tensor, torch.Tensor, list[int | None]]:
    """``(B, n)`` sampled tokens and their log-probs, ``n <= max_new``: one forward pass per
    token over the KV cache, until every row has sampled a stop token (rows done earlier get
    ``pad``), and per row the length at which ``stop`` hit (``None``: it did not).
    ``model.generate``'s job here without its per-token machinery, which took a
    quarter of the tiny model's sampling time; the model's ``generation_config`` (Qwen2.5's
    sets ``top_k=20``, ``repetition_penalty=1.05``) is never read, so nothing but temperature
    and top-p shapes the distribution PPO's ratios assume."""
    rows, device = input_ids.shape[0], input_ids.device
    stops = torch.tensor(eos, device=device)
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits, cache = _prefill(model, input_ids, attention_mask, positions, share_prefill)
    cache = reserve(cache, max_new)
    running = torch.ones(rows, dtype=torch.bool, device=device)
    tokens, logprobs = [], []
    # with a stop rule: each row's tokens so far, and the length at which its rule hit
    so_far: list[list[int]] = [[] for _ in range(rows)]
    stopped: list[int | None] = [None] * rows
    for step in range(max_new):
        scores = logits[:, -1, :].float()
        if step < min_new:
            scores[:, eos] = float("-inf")
        for warp in warpers:
            scores = warp(None, scores)
        logp = torch.log_softmax(scores, dim=-1)
        sampled = draw(logp.exp())
        sampled = torch.where(running, sampled, torch.full_like(sampled, pad))
        tokens.append(sampled)
        logprobs.append(logp.gather(1, sampled[:, None]).squeeze(1))
        running &= ~torch.isin(sampled, stops)
        if stop is not None:  # a row whose text has done its stage's work ends as at EOS
            drawn = sampled.tolist()
            for row in running.nonzero().flatten().tolist():
                so_far[row].append(drawn[row])
                if stop.hit(tokenizer.decode(so_far[row], skip_special_tokens=True)):
                    running[row] = False
                    stopped[row] = len(so_far[row])
        if not running.any() or step + 1 == max_new:
            break
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((rows, 1))], dim=1)
        positions = positions[:, -1:] + 1
        out = model(input_ids=sampled[:, None], attention_mask=attention_mask,
                    position_ids=positions, past_key_values=cache, use_cache=True)
        logits, cache = out.logits, out.past_key_values
    if not tokens:
        return (torch.zeros((rows, 0), dtype=torch.long, device=device),
                torch.zeros((rows, 0), device=device), stopped)
    return torch.stack(tokens, dim=1), torch.stack(logprobs, dim=1), stopped


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
             min_new_tokens: int = 0, share_prefill: bool = True,
             stop: Any = None) -> GenerationBatch:
    """Sample one response per prompt (token ids or text), ``sampling.batch_size`` at a time.

    Reproducible: the same prompts, seed and weights give the same samples (each chunk seeds
    its own generator state from ``seed`` and its index, inside ``fork_rng`` so the caller's
    random state is untouched). A sample depends on its chunk's padding, so change the batch
    size and samples change too. ``min_new_tokens`` forbids stopping early (benchmarks only:
    it masks EOS, so those log-probs are of a slightly different distribution).
    ``share_prefill``: a prompt that several rows of a chunk hold (a problem's samples) is
    prefilled once for all of them; False prefills every row (the same samples, slower).
    ``stop`` (a ``models.stages.StopRule``): a response also ends, finished, with the token
    that completes its stop text (:func:`stop_length`).
    """
    seed = sampling.seed if seed is None else seed
    max_new = max_new_tokens or sampling.max_new_tokens
    prompt_ids = [list(tokenizer(p, add_special_tokens=False)["input_ids"]) if isinstance(p, str)
                  else list(p) for p in prompts]
    if any(not p for p in prompt_ids):
        raise ValueError("every prompt needs at least one token")
    device = _model_device(model)
    eos = stop_token_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    warpers = _warpers(sampling.temperature, sampling.top_p)
    was_training = model.training
    model.eval()
    out: list[Generation] = []
    chunk_seconds: list[float] = []
    start_all = time.perf_counter()
    try:
        for index, start in enumerate(range(0, len(prompt_ids), sampling.batch_size)):
            chunk = prompt_ids[start:start + sampling.batch_size]
            input_ids, attention_mask = left_pad(chunk, pad, device)
            t0 = time.perf_counter()
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                torch.manual_seed(seed * 1_000_003 + index)
                with torch.no_grad():
                    new, logprobs, stopped = _sample_chunk(
                        model, input_ids, attention_mask, max_new, min_new_tokens, eos, pad,
                        warpers, share_prefill, stop, tokenizer)
            seconds = time.perf_counter() - t0
            chunk_seconds.append(seconds)
            new, logprobs = new.cpu(), logprobs.cpu()
            for row, prompt in enumerate(chunk):
                tokens = new[row].tolist()
                end = next((i for i, tok in enumerate(tokens) if tok in eos), None)
                cut = stopped[row]  # the loop saw the stop text complete at this length
                length = cut or (len(tokens) if end is None else end + 1)
                response = tokens[:length]
                out.append(Generation(
                    text=tokenizer.decode(response, skip_special_tokens=True),
                    prompt_ids=list(prompt), response_ids=response,
                    logprobs=logprobs[row, :length].tolist(),
                    finished=end is not None or cut is not None, seconds=seconds))
    finally:
        model.train(was_training)
    total = time.perf_counter() - start_all
    return GenerationBatch(generations=out, seconds=total,
                           new_tokens=sum(len(g.response_ids) for g in out),
                           chunk_seconds=chunk_seconds)

