"""The PPO update's input: one role's rollouts packed once, and how their advantages are made.

``models.logprobs.packed_batch`` packs the token tensors, ``pipeline.update.build_batch`` adds
what the rollouts recorded (old log-probs, scores, groups), ``models.ppo.ppo_update`` adds what
it computes (reference log-probs, advantages, returns) and slices rows into mini- and
micro-batches: a row slice (:meth:`PackedBatch.rows`) is a packed batch too.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import StrEnum

import torch
from torch import Tensor


class AdvantageMode(StrEnum):
    """How ``ppo_update`` gets its advantages; ``ppo.advantage`` names the first two."""

    GROUP = "group"
    """Group-relative (GRPO): ``scores`` against their ``group_ids`` group's mean and std, one
    per sequence; groups without reward spread are dropped from the loss mask."""
    GAE = "gae"
    """Generalised advantage estimation: ``scores`` on each row's last trained token, values
    from the policy function's value head, whitened."""
    GIVEN = "given"
    """``advantages`` precomputed by the caller (who masks dead groups itself)."""

    @property
    def needs(self) -> tuple[str, ...]:
        """The optional :class:`PackedBatch` fields this mode reads."""
        return {AdvantageMode.GROUP: ("scores", "group_ids"), AdvantageMode.GAE: ("scores",),
                AdvantageMode.GIVEN: ("advantages",)}[self]


@dataclass(frozen=True)
class PackedBatch:
    """``B`` rollouts of one role as row-sliceable tensors; ``T`` response positions.

    The layout (``models.logprobs``): prompts left-padded to ``prompt_len`` columns, responses
    right-padded to ``T``, so ``input_ids`` and ``attention_mask`` are ``(B, prompt_len + T)``.
    Every tensor's first dimension is ``B``.
    """

    input_ids: Tensor
    """``(B, P+T)`` prompt and response tokens."""
    attention_mask: Tensor
    """``(B, P+T)`` 1 exactly on real tokens (also the response mask; gives position ids)."""
    response_ids: Tensor
    """``(B, T)`` the response tokens whose log-probs are taken."""
    loss_mask: Tensor
    """``(B, T)`` float: 1 on the tokens being trained (``ppo_update`` switches dead groups
    off); the policy function must not read it."""
    prompt_len: int
    """``P``, the common prompt width (a row slice keeps it)."""
    old_logprobs: Tensor | None = None
    """``(B, T)`` log-probs recorded at sampling time; None: ``ppo_update`` computes them with
    the policy as it is before the update (and always does under GAE, which needs values)."""
    scores: Tensor | None = None
    """``(B,)`` each sequence's weighted reward (group and GAE modes)."""
    group_ids: Tensor | None = None
    """``(B,)`` integer group of each sequence, e.g. its problem (group mode)."""
    advantages: Tensor | None = None
    """``(B,)`` or ``(B, T)``: given by the caller (given mode) or computed by ``ppo_update``."""
    returns: Tensor | None = None
    """``(B, T)`` GAE returns, the value head's targets (computed by ``ppo_update``)."""
    ref_logprobs: Tensor | None = None
    """``(B, T)`` the reference policy's log-probs (set by ``ppo_update`` from its argument)."""

    def __post_init__(self) -> None:
        n = self.loss_mask.shape[0]
        for name, t in self._tensors().items():
            if t.dim() == 0 or t.shape[0] != n:
                raise ValueError(f"PackedBatch.{name} has shape {tuple(t.shape)}; every tensor "
                                 f"needs the batch's {n} rows first (loss_mask "
                                 f"{tuple(self.loss_mask.shape)})")

    def _tensors(self) -> dict[str, Tensor]:
        return {f.name: v for f in fields(self) if isinstance(v := getattr(self, f.name), Tensor)}

    def rows(self, rows: Tensor | slice | list[int]) -> PackedBatch:
        """These rows of every tensor (a slice gives views, no copy); ``prompt_len`` as is."""
        return replace(self, **{name: t[rows] for name, t in self._tensors().items()})

    def to(self, device: torch.device | str) -> PackedBatch:
        """Every tensor on ``device``."""
        return replace(self, **{name: t.to(device) for name, t in self._tensors().items()})

    def micro_batches(self, size: int) -> list[PackedBatch]:
        """Consecutive row slices of ``size`` sequences (the last may be shorter): views of
        the batch's tensors, no copy."""
        n = self.loss_mask.shape[0]
        return [self.rows(slice(i, i + size)) for i in range(0, n, size)]

    def missing(self, names: tuple[str, ...]) -> list[str]:
        """Those of the optional fields ``names`` that are None."""
        return [name for name in names if getattr(self, name) is None]

    def present(self) -> list[str]:
        """The fields that hold a value, for error messages."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]
