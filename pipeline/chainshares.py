"""Whether a model can follow the chain at all, per stage: the shares that say so before any
reward can mean anything.

For chains worked by :class:`pipeline.solver.ChainSolver` (with the discriminator's tests
written and both the code and the reference executed against them), per stage:

- ``gen_ended``: generator outputs that ended by themselves (a stop token or the stage's stop
  rule), not at their token budget;
- ``tests_ended``: the same for the discriminator's outputs;
- ``tests_parsed``: discriminator outputs that parsed into at least one runnable test;
- ``tests_valid``: of the tests parsed at that stage, the share the reference solution passes;

and over the chains, ``code_parses``: chains whose code stage holds a definition of the entry
point that compiles. ``benchmarks/real_chain.py`` prints them for a real model before and after
its warm start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from configs.names import STAGES

COLUMNS = ("gen_ended", "tests_ended", "tests_parsed", "tests_valid")


@dataclass(frozen=True)
class StageShares:
    """One stage's shares (see the module docstring); ``None`` where nothing was counted."""

    stage: int
    gen_ended: float | None
    tests_ended: float | None
    tests_parsed: float | None
    tests_valid: float | None
    tests: int
    """Tests parsed at this stage (the denominator of ``tests_valid``)."""


@dataclass(frozen=True)
class ChainShares:
    """Every stage's shares and the chains' ``code_parses``; ``overall`` pools the stages."""

    stages: list[StageShares]
    code_parses: float
    chains: int

    def overall(self) -> dict[str, float | None]:
        """Each column pooled over the stages, weighted as counted (outputs or tests)."""
        out: dict[str, float | None] = {}
        for column in COLUMNS:
            rows = [s for s in self.stages if getattr(s, column) is not None]
            weights = [s.tests if column == "tests_valid" else 1 for s in rows]
            total = sum(weights)
            out[column] = (sum(getattr(s, column) * w for s, w in zip(rows, weights, strict=True))
                           / total if total else None)
        return out

    def to_dict(self) -> dict:
        return {"stages": [asdict(s) for s in self.stages], "code_parses": self.code_parses,
                "chains": self.chains, "overall": self.overall()}


def _share(flags: Sequence[bool]) -> float | None:
    return sum(map(bool, flags)) / len(flags) if flags else None


def chain_shares(results: Sequence, reference_passes: Sequence[Sequence[bool]]) -> ChainShares:
    """The shares of ``results`` (``pipeline.solver.InferenceResult`` of the chain mode, tests
    written), ``reference_passes[i][j]`` whether the reference passed result ``i``'s ``j``-th
    discriminator test (``results[i].tests`` order).

    >>> from types import SimpleNamespace as R
    >>> r = R(finished=[True] * 5, test_finished=[True, False, True, True, True],
    ...       test_counts=[2, 0, 1, 0, 1], tests=[(1, "a"), (1, "b"), (3, "c"), (5, "d")],
    ...       code="def f(): pass")
    >>> shares = chain_shares([r], [[True, False, True, True]])
    >>> [(s.stage, s.tests_parsed, s.tests_valid) for s in shares.stages]
    [(1, 1.0, 0.5), (2, 0.0, None), (3, 1.0, 1.0), (4, 0.0, None), (5, 1.0, 1.0)]
    >>> shares.overall()["tests_valid"], shares.code_parses
    (0.75, 1.0)
    """
    rows = []
    # Each output's stage: a result of a shorter chain says which stages it holds
    # (``InferenceResult.stages``, ``test_stages``); without them, the first ones.
    generated = [dict(zip(getattr(r, "stages", STAGES), r.finished, strict=False))
                 for r in results]
    tested = [dict(zip(getattr(r, "test_stages", None) or STAGES,
                       zip(r.test_finished, r.test_counts, strict=True), strict=False))
              for r in results]
    for stage in STAGES:
        gen, ended, parsed, valid = [], [], [], []
        for r, passes, done, tests in zip(results, reference_passes, generated, tested,
                                          strict=True):
            if stage in done:
                gen.append(done[stage])
            if stage in tests:
                ended.append(tests[stage][0])
                parsed.append(tests[stage][1] > 0)
            valid += [ok for (s, _), ok in zip(r.tests, passes, strict=True) if s == stage]
        rows.append(StageShares(stage=stage, gen_ended=_share(gen), tests_ended=_share(ended),
                                tests_parsed=_share(parsed), tests_valid=_share(valid),
                                tests=len(valid)))
    code = [r.code is not None for r in results]
    return ChainShares(stages=rows, code_parses=_share(code) or 0.0, chains=len(results))
