"""Teacher-forced log-probabilities of response tokens: what PPO differentiates.

The naive ``log_softmax(model(x).logits).gather(...)`` materialises float32 logits and their
log-softmax for every position over the whole vocabulary, and autograd keeps both for the
backward pass: for Qwen2.5's 151,936-token vocabulary that is 0.6 MB per token per copy. Here
the decoder runs once to hidden states; the output head is then applied to a few positions at a
time, each chunk reduced at once to the chosen token's logit minus ``logsumexp``, and (with
gradients on) re-computed in the backward pass, so one chunk's logits exist at any time. A plain
linear head takes a fused path (:class:`_LinearLogprob`) whose backward writes the gradient into
the re-computed scores in place; other heads, and entropy, use activation checkpointing.

Log-probs are of the distribution samples were drawn from: logits divided by ``temperature``
and, when ``top_p < 1``, restricted to the nucleus exactly as transformers' ``TopPLogitsWarper``
does. Pass the sampling temperature, or the PPO ratio compares two different policies.

Layout: prompts are left-padded to a common width ``P`` and responses right-padded to ``T``, so
the logits at columns ``P-1 .. P+T-2`` predict the response tokens. A batch is packed once
(:func:`packed_batch`) and any row slice of it is a packed batch too: :func:`packed_logprobs`
cuts each slice to the columns its rows use, so a micro-batch costs (and computes) what
packing its rows alone would. :func:`response_logprobs` (token lists in) is that same path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from models.ppobatch import PackedBatch


@dataclass
class TokenLogprobs:
    """Per-token results for a batch of responses."""

    logprobs: torch.Tensor
    """``(B, T)`` float32; 0 where ``mask`` is False."""
    mask: torch.Tensor
    """``(B, T)`` bool: True on real response tokens."""
    entropy: torch.Tensor | None = None
    """``(B, T)`` float32 entropy of the sampling distribution, when asked for."""
    values: torch.Tensor | None = None
    """``(B, T)`` float32 value estimates, when a value head was given (GAE)."""


def pack(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]],
         pad_id: int, device: torch.device, width: int | None = None):
    """``input_ids, attention_mask (B, P+T), targets, mask (B, T), P`` for the layout above;
    ``width`` pads responses to a fixed ``T`` (micro-batches then concatenate)."""
    if len(prompt_ids) != len(response_ids):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token (the first response token's "
                         "logit is read at the last prompt position)")
    batch = len(prompt_ids)
    p_len = max((len(p) for p in prompt_ids), default=0)
    t_len = width if width is not None else max((len(r) for r in response_ids), default=0)
    input_ids = torch.full((batch, p_len + t_len), pad_id, dtype=torch.long)
    attention = torch.zeros((batch, p_len + t_len), dtype=torch.long)
    targets = torch.full((batch, t_len), pad_id, dtype=torch.long)
    mask = torch.zeros((batch, t_len), dtype=torch.bool)
    for row, (prompt, response) in enumerate(zip(prompt_ids, response_ids, strict=True)):
        input_ids[row, p_len - len(prompt):p_len] = torch.tensor(list(prompt))
        attention[row, p_len - len(prompt):p_len + len(response)] = 1
        if len(response):
            input_ids[row, p_len:p_len + len(response)] = torch.tensor(list(response))
            targets[row, :len(response)] = torch.tensor(list(response))
            mask[row, :len(response)] = True
    return (input_ids.to(device), attention.to(device), targets.to(device), mask.to(device),
            p_len)


def _split(model):
    """Decoder body and output head of a (peft-wrapped) causal LM. LoRA layers live inside
    both, so adapters (and ``disable_adapter``) apply as in a normal forward pass."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings(), base.config


def _head_logits(head, config, hidden: torch.Tensor) -> torch.Tensor:
    """The model's own logits in float32, including the few architectures' output scalings."""
    logits = head(hidden).float()
    if getattr(config, "logit_scale", None):  # Cohere
        logits = logits * config.logit_scale
    if getattr(config, "logits_scaling", None):  # Granite
        logits = logits / config.logits_scaling
    if getattr(config, "final_logit_softcapping", None):  # Gemma 2
        cap = config.final_logit_softcapping
        logits = torch.tanh(logits / cap) * cap
    return logits


def sampling_scores(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Logits -> the processed scores ``generate`` samples from (temperature, then top-p with
    transformers' exact tie and keep-one rules)."""
    scores = logits / temperature if temperature != 1.0 else logits
    if top_p < 1.0:
        with torch.no_grad():  # which tokens are in the nucleus is a discrete choice
            sorted_scores, order = torch.sort(scores, descending=False)
            cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
            remove_sorted = cumulative <= (1 - top_p)
            remove_sorted[..., -1:] = False
            remove = remove_sorted.scatter(-1, order, remove_sorted)
        scores = scores.masked_fill(remove, float("-inf"))
    return scores


def _fused_scores(hidden: torch.Tensor, weight: torch.Tensor, temperature: float,
                  top_p: float) -> torch.Tensor:
    """Processed scores of a plain linear head, temperature applied in place (no extra copy)."""
    logits = torch.nn.functional.linear(hidden, weight).float()
    if temperature != 1.0:
        logits.div_(temperature)
    return sampling_scores(logits, 1.0, top_p)


class _LinearLogprob(torch.autograd.Function):
    """``log_softmax(h W^T / T)[target]`` for one chunk of rows that keeps no logits for the
    backward pass: it saves ``h`` and the ``logsumexp``, rebuilds the scores in backward and
    turns them in place into the gradient ``(onehot - softmax) * grad / T``. One
    vocabulary-sized float32 tensor per chunk at any time, where autograd through
    ``logsumexp`` and ``gather`` (even re-computed under checkpointing) holds about four."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, temperature, top_p):  # (N, H), (V, H), (N,)
        with torch.no_grad():
            scores = _fused_scores(hidden, weight, temperature, top_p)  # (N, V)
            lse = torch.logsumexp(scores, dim=-1)
            chosen = scores.gather(-1, targets[:, None]).squeeze(-1)
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.temperature, ctx.top_p = temperature, top_p
        return chosen - lse  # (N,)

    @staticmethod
    def backward(ctx, grad):  # grad (N,)
        hidden, weight, targets, lse = ctx.saved_tensors
        with torch.no_grad():
            probs = _fused_scores(hidden, weight, ctx.temperature, ctx.top_p)
            probs.sub_(lse[:, None]).exp_()  # softmax; tokens outside the nucleus get 0
            probs.mul_(-grad[:, None]).scatter_add_(-1, targets[:, None], grad[:, None].float())
            if ctx.temperature != 1.0:
                probs.div_(ctx.temperature)
            probs = probs.to(weight.dtype)  # d loss / d (h W^T), (N, V)
            grad_hidden = probs @ weight if ctx.needs_input_grad[0] else None
            grad_weight = probs.T @ hidden if ctx.needs_input_grad[1] else None
        return grad_hidden, grad_weight, None, None, None


def _fusable(head, config) -> bool:
    """A plain bias-free linear head without output scaling: the fused path applies."""
    return (type(head) is torch.nn.Linear and head.bias is None
            and not any(getattr(config, name, None) for name in
                        ("logit_scale", "logits_scaling", "final_logit_softcapping")))


def _chunk_stats(head, config, hidden: torch.Tensor, targets: torch.Tensor, temperature: float,
                 top_p: float, with_entropy: bool) -> torch.Tensor:
    """``(B, c, 1 or 2)``: log-prob of each target (and entropy) for one chunk of positions."""
    scores = sampling_scores(_head_logits(head, config, hidden), temperature, top_p)
    lse = torch.logsumexp(scores, dim=-1)
    chosen = scores.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    stats = [chosen - lse]
    if with_entropy:
        probs = torch.softmax(scores, dim=-1)
        finite = torch.where(torch.isfinite(scores), scores, torch.zeros_like(scores))
        stats.append(lse - (probs * finite).sum(-1))
    return torch.stack(stats, dim=-1)


def _micro_batch(model, input_ids, attention, targets, p_len, temperature, top_p,
                 with_entropy, chunk_tokens, value_head=None) -> torch.Tensor:
    decoder, head, config = _split(model)
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    hidden = decoder(input_ids=input_ids, attention_mask=attention, position_ids=position_ids,
                     use_cache=False).last_hidden_state  # (B, P+T, H)
    t_len = targets.shape[1]
    hidden = hidden[:, p_len - 1:p_len - 1 + t_len]  # (B, T, H): states predicting responses
    step = max(1, chunk_tokens // max(1, hidden.shape[0]))
    recompute = torch.is_grad_enabled()
    pieces = []
    fused = _fusable(head, config) and not with_entropy
    for s in range(0, t_len, step):
        if fused:
            h, tgt = hidden[:, s:s + step], targets[:, s:s + step]
            out = _LinearLogprob.apply(h.reshape(-1, h.shape[-1]), head.weight,
                                       tgt.reshape(-1), temperature, top_p)
            pieces.append(out.view(tgt.shape[0], tgt.shape[1], 1))
            continue
        args = (head, config, hidden[:, s:s + step], targets[:, s:s + step], temperature, top_p,
                with_entropy)
        # Checkpointing frees the chunk's (B, c, V) logits after the forward pass and rebuilds
        # them in backward: only one chunk of vocabulary-sized activations is alive at a time.
        pieces.append(checkpoint(_chunk_stats, *args, use_reentrant=False) if recompute
                      else _chunk_stats(*args))
    stats = torch.cat(pieces, dim=1)  # (B, T, 1 or 2)
    if value_head is not None:  # the value of the state before each response token
        stats = torch.cat([stats, value_head(hidden.float()).unsqueeze(-1)], dim=-1)
    return stats


def _check_sampling(temperature: float, top_p: float) -> None:
    if temperature <= 0:
        raise ValueError(f"temperature={temperature!r}: must be > 0")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p={top_p!r}: must be in (0, 1]")


def response_logprobs(model, prompt_ids: Sequence[Sequence[int]],
                      response_ids: Sequence[Sequence[int]], *, temperature: float,
                      pad_token_id: int, top_p: float = 1.0, micro_batch_size: int = 8,
                      chunk_tokens: int = 256, with_entropy: bool = False,
                      value_head=None) -> TokenLogprobs:
    """Log-probs ``(B, T)`` of ``response_ids`` given ``prompt_ids`` (see module docstring):
    :func:`packed_batch` on the model's device, then :func:`packed_logprobs`.

    Differentiable when called with gradients enabled (PPO); wrap in ``torch.no_grad()`` for
    old/reference log-probs. ``micro_batch_size`` sequences run per forward pass, but every
    micro-batch's graph lives until ``backward``: PPO should call :func:`packed_logprobs` once
    per micro-batch and back-propagate each. ``chunk_tokens`` bounds the rows of each
    vocabulary-sized logits chunk: the fused path holds one float32 ``(chunk_tokens, vocab)``
    tensor at a time (156 MB at 256 rows for Qwen's 151,936-token vocabulary), the
    checkpointed path (entropy, unusual heads) about four. ``value_head`` (a module
    ``(B, T, H) -> (B, T)``, for GAE) also maps the same final hidden states to ``values``; its
    gradient flows into the adapters as well.
    """
    _check_sampling(temperature, top_p)
    device = next(model.parameters()).device
    return packed_logprobs(model, packed_batch(prompt_ids, response_ids, pad_token_id, device),
                           temperature=temperature, top_p=top_p,
                           micro_batch_size=micro_batch_size, chunk_tokens=chunk_tokens,
                           with_entropy=with_entropy, value_head=value_head)


def packed_batch(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]],
                 pad_token_id: int, device: torch.device | str = "cpu",
                 width: int | None = None) -> PackedBatch:
    """Rollouts packed once, as row-sliceable tensors for ``models.ppo.ppo_update``
    (``models.ppobatch.PackedBatch``): ``input_ids`` and ``attention_mask`` ``(B, P+T)``
    (prompts left-padded to ``P``, responses right-padded to ``T``; the attention mask is 1
    exactly on real tokens, so it is also the response mask and gives position ids),
    ``response_ids`` and ``loss_mask`` ``(B, T)`` (1 on every response token), and the common
    prompt width ``prompt_len``. ``width`` fixes ``T`` (at least the longest response).

    A row slice (any rows, any order) is itself a packed batch: :func:`packed_logprobs`
    drops the columns that none of its rows uses, so it costs what packing those rows alone
    would, and gives their log-probs (up to float rounding).
    """
    input_ids, attention, targets, mask, p_len = pack(prompt_ids, response_ids, pad_token_id,
                                                      torch.device(device), width)
    return PackedBatch(input_ids=input_ids, attention_mask=attention, response_ids=targets,
                       loss_mask=mask.float(), prompt_len=p_len)


def _cut(input_ids: torch.Tensor, attention: torch.Tensor, targets: torch.Tensor, p_len: int):
    """A row slice of a packed batch without the columns none of its rows uses (views, no
    copy): prompt padding left of its longest prompt, response padding right of its longest
    response. Those columns are masked out in every row and position ids count attended
    tokens only, so the result is what :func:`pack` makes of these rows alone:
    ``input_ids, attention_mask, targets, prompt_len``."""
    n_prompt, n_response = torch.stack([attention[:, :p_len].sum(-1).max(),
                                        attention[:, p_len:].sum(-1).max()]).tolist()
    cut, end = p_len - n_prompt, p_len + n_response
    return input_ids[:, cut:end], attention[:, cut:end], targets[:, :n_response], n_prompt


def _slice_stats(model, input_ids, attention, targets, p_len, temperature, top_p, with_entropy,
                 chunk_tokens, value_head, channels) -> torch.Tensor:
    """``(b, T, channels)`` for a row slice of a packed batch, 0 off the response tokens."""
    rows, t_len = targets.shape
    input_ids, attention, targets, p_len = _cut(input_ids, attention, targets, p_len)
    if targets.shape[1] == 0:
        return torch.zeros((rows, t_len, channels), device=targets.device)
    stats = _micro_batch(model, input_ids, attention, targets, p_len, temperature, top_p,
                         with_entropy, chunk_tokens, value_head)           # (b, t, channels)
    stats = stats.masked_fill(attention[:, p_len:].unsqueeze(-1) == 0, 0.0)
    return torch.nn.functional.pad(stats, (0, 0, 0, t_len - targets.shape[1]))


def packed_logprobs(model, batch: PackedBatch, *, temperature: float, top_p: float = 1.0,
                    micro_batch_size: int | None = None, chunk_tokens: int = 256,
                    with_entropy: bool = False, value_head=None) -> TokenLogprobs:
    """:func:`response_logprobs` of a (micro-)batch made by :func:`packed_batch` (or a row
    slice of one): ``micro_batch_size`` rows per forward pass (None: all in one), each a row
    slice of the packed tensors, cut to the columns its rows use (with gradients on, every
    micro-batch's graph lives until ``backward``: PPO calls this once per micro-batch and
    back-propagates each; the no-grad reference pass takes ``micro_batch_size``). Reads only
    ``input_ids``, ``attention_mask``, ``response_ids`` and ``prompt_len`` (the response tokens
    are where the attention mask is 1 past the prompt, whatever a caller did to
    ``loss_mask``). PPO's ``policy_logprobs_fn`` is then::

        def policy_logprobs_fn(mb):
            out = packed_logprobs(model, mb, temperature=sampling.temperature)
            return out.logprobs, out.entropy, None
    """
    _check_sampling(temperature, top_p)
    input_ids, attention = batch.input_ids, batch.attention_mask
    targets, p_len = batch.response_ids, batch.prompt_len
    rows, t_len = targets.shape
    channels = 1 + with_entropy + (value_head is not None)  # logp[, entropy][, value]
    step = micro_batch_size or max(1, rows)
    outs = [_slice_stats(model, input_ids[s:s + step], attention[s:s + step],
                         targets[s:s + step], p_len, temperature, top_p, with_entropy,
                         chunk_tokens, value_head, channels)
            for s in range(0, rows, step)]
    stats = (torch.cat(outs) if outs
             else torch.zeros((rows, t_len, channels), device=targets.device))
    return TokenLogprobs(logprobs=stats[..., 0], mask=attention[:, p_len:] > 0,
                         entropy=stats[..., 1] if with_entropy else None,
                         values=stats[..., -1] if value_head is not None else None)


def naive_response_logprobs(model, prompt_ids: Sequence[Sequence[int]],
                            response_ids: Sequence[Sequence[int]], *, temperature: float,
                            pad_token_id: int) -> TokenLogprobs:
    """Reference implementation (tests and ``benchmarks/logprob_memory.py``): full logits,
    full float32 log-softmax, gather. Same layout and results, several times the memory."""
    device = next(model.parameters()).device
    input_ids, attention, targets, mask, p_len = pack(prompt_ids, response_ids, pad_token_id,
                                                      device)
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attention, position_ids=position_ids,
                   use_cache=False).logits.float()  # (B, P+T, V)
    logits = logits[:, p_len - 1:p_len - 1 + targets.shape[1]] / temperature
    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return TokenLogprobs(logprobs=logprobs.masked_fill(~mask, 0.0), mask=mask)
