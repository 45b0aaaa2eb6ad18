"""Which problem groups carry a learning signal.

Advantages are relative to a problem's group of samples: when every sample of a problem scored
the same (all pass, all fail, all neutral), every advantage in it is zero and the group only adds
noise (and KL drift) to an update. Such groups are reported (so the rewards table and MLflow can
count them) and skipped by the update.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class GroupSignal:
    """Per-sample mask and the groups without signal, in first-seen order."""

    mask: tuple[bool, ...]
    """``mask[i]``: sample ``i`` belongs to a group whose rewards differ."""
    dead_groups: tuple[Hashable, ...]
    """Groups in which every sample scored the same (single-sample groups included)."""

    @property
    def n_dead(self) -> int:
        return len(self.dead_groups)


def group_signal(rewards: Sequence[float], group_ids: Sequence[Hashable],
                 atol: float = 1e-9) -> GroupSignal:
    """Mask out samples whose group (problem) has no reward spread.

    A group of one sample has no spread either: with group-relative advantages its only
    sample's advantage is zero.

    >>> s = group_signal([1.0, 1.0, 0.0, 0.5, 0.7], ["a", "a", "b", "b", "c"])
    >>> s.mask, s.dead_groups
    ((False, False, True, True, False), ('a', 'c'))
    """
    if len(rewards) != len(group_ids):
        raise ValueError(f"group_signal: {len(rewards)} rewards but {len(group_ids)} group ids")
    spread: dict[Hashable, tuple[float, float]] = {}
    for r, g in zip(rewards, group_ids, strict=True):
        lo, hi = spread.get(g, (r, r))
        spread[g] = (min(lo, r), max(hi, r))
    live = {g: hi - lo > atol for g, (lo, hi) in spread.items()}
    return GroupSignal(mask=tuple(live[g] for g in group_ids),
                       dead_groups=tuple(g for g, ok in live.items() if not ok))
