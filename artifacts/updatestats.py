"""What one PPO update of one role measured: the updates table's statistics, declared once.

``models.ppo.ppo_update`` returns an :class:`UpdateStats`; ``pipeline.update.update_role``
writes it as one updates-table row, next to the row's keys, its duration and the adapter
versions. The table's statistics columns (``artifacts.schemas.UPDATES``: name, Arrow type,
nullability, the schema version that added them) and the ``ppo/<role>/*`` metric names
(``pipeline.metrics``) are both read off the fields below, so a new statistic is one field here
(and a schema version bump when it adds a column).

It lives in ``artifacts`` (not next to ``ppo_update`` in ``models``) because the store's
schemas derive from it and ``models`` already depends on ``artifacts``: the other way round
would be a package cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, get_args, get_type_hints


def _column(*, since: int = 1, arrow: str | None = None, metric: bool = True,
            measured_outside: bool = False) -> Any:
    """Table facts about a field: the updates-schema version that added it (``since``; later
    columns are nullable, since older files read as null), its Arrow type when the annotation
    alone does not say (``arrow``, a ``pyarrow.type_for_alias`` name), and whether it is logged
    as a ``ppo/<role>/*`` metric. ``measured_outside``: filled by ``update_role`` around the
    maths (``ppo_update`` leaves it None), so it has a default."""
    meta = {"since": since, "arrow": arrow, "metric": metric}
    return field(default=None, metadata=meta) if measured_outside else field(metadata=meta)


@dataclass(frozen=True)
class UpdateStats:
    """One update's statistics. Loss statistics are means over the optimizer steps of each
    step's token mean (micro-batches weighted by their share of the step's tokens). With no
    optimizer step (no trained token: every sample masked, every group dead, empty responses)
    the loss statistics typed ``float`` are 0 and those typed ``float | None`` are None."""

    loss: float = _column()
    """The minimised objective ``policy_loss + kl_coef kl_ref (+ value_coef value_loss)``."""
    policy_loss: float | None = _column()
    """Clipped surrogate loss. None when no optimizer step was taken (nothing was measured)."""
    value_loss: float | None = _column()
    """``0.5 (values - returns)^2`` token mean. None unless ``ppo.advantage=gae`` (only GAE has
    a value head) and a step was taken."""
    approx_kl: float = _column()
    """k3 estimate of KL(new || old) over the trained tokens: how far the update moved."""
    clip_fraction: float = _column()
    """Share of the trained tokens where the ratio clip bites."""
    entropy: float = _column()
    """Entropy of the trained tokens' sampling distribution; 0 also when the policy function
    gives none (the tests' toy policies)."""
    grad_norm: float = _column()
    """Mean over optimizer steps of the gradient norm before clipping."""
    learning_rate: float = _column()
    """The optimizer's learning rate (its first parameter group's)."""
    n_sequences: int = _column(metric=False)
    """Rows in the batch (scored samples; masked ones are left out). Not a metric: the metric
    names predate this declaration and never included it."""
    n_tokens: int = _column(arrow="int64")
    """Trained tokens: the loss mask's sum after dead groups were switched off."""
    kl_ref: float | None = _column(since=2)
    """KL to the reference policy (adapters off), k3 token mean. None without an optimizer
    step."""
    ratio: float | None = _column(since=2)
    """Mean new/old probability ratio over the trained tokens. None without an optimizer
    step."""
    dead_sample_fraction: float | None = _column(since=2)
    """Share of the batch in problem groups without reward spread (their tokens are not
    trained). None unless advantages are group-relative and computed by the update."""
    optimizer_steps: int = _column(since=2)
    """Clipped optimizer steps taken: epochs x non-empty mini-batches (0: skipped)."""
    explained_variance: float | None = _column(since=2)
    """How much of the GAE returns the value head predicted at rollout time (1 perfect, 0 a
    constant). None unless ``ppo.advantage=gae``, or when the returns do not vary."""
    logprob_mismatch: float | None = _column(since=3, measured_outside=True)
    """Mean ``|log p_sampler - log p_trainer|`` over the batch's response tokens: how far the
    log-probs recorded at sampling (vLLM's, or ``generate``'s) are from the trainer's forward
    pass on the same adapter version. None when nothing was measured (every sample masked)."""
    logprob_mismatch_share: float | None = _column(since=3, measured_outside=True)
    """Share of those tokens whose sampler/trainer probability ratio alone falls outside PPO's
    clip range ``[1 - ppo.clip_epsilon, 1 + ppo.clip_epsilon]``."""

    @property
    def skipped(self) -> bool:
        """No optimizer step was taken: the adapter (and the optimizer state) did not move."""
        return self.optimizer_steps == 0

    @classmethod
    def without_step(cls, *, learning_rate: float, n_sequences: int = 0,
                     dead_sample_fraction: float | None = None,
                     explained_variance: float | None = None) -> UpdateStats:
        """The statistics of an update that took no optimizer step (nothing to learn from)."""
        return cls(loss=0.0, policy_loss=None, value_loss=None, approx_kl=0.0,
                   clip_fraction=0.0, entropy=0.0, grad_norm=0.0, learning_rate=learning_rate,
                   n_sequences=n_sequences, n_tokens=0, kl_ref=None, ratio=None,
                   dead_sample_fraction=dead_sample_fraction, optimizer_steps=0,
                   explained_variance=explained_variance)


class StatColumn(NamedTuple):
    """One statistics column of the updates table, as ``artifacts.schemas`` declares it."""

    name: str
    arrow: str
    """``pyarrow.type_for_alias`` name: ``double``, ``int32`` or ``int64``."""
    nullable: bool


def stat_columns(since: int) -> tuple[StatColumn, ...]:
    """The updates table's columns that :class:`UpdateStats` declares and schema version
    ``since`` added, in field order.

    >>> [c.name for c in stat_columns(2)]
    ['kl_ref', 'ratio', 'dead_sample_fraction', 'optimizer_steps', 'explained_variance']
    """
    hints = get_type_hints(UpdateStats)
    columns = []
    for f in fields(UpdateStats):
        if f.metadata["since"] != since:
            continue
        optional = type(None) in get_args(hints[f.name])
        base = next(t for t in (*get_args(hints[f.name]), hints[f.name]) if t in (float, int))
        arrow = f.metadata["arrow"] or {float: "double", int: "int32"}[base]
        columns.append(StatColumn(f.name, arrow, optional or since > 1))
    return tuple(columns)


METRIC_NAMES: tuple[str, ...] = tuple(f.name for f in fields(UpdateStats)
                                      if f.metadata["metric"])
"""Updates-table columns logged as ``ppo/<role>/<name>`` (when not null)."""
