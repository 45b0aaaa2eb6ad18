"""What a registered model version does when it is served: the five-stage chain, and tests.

``serving/lora_pyfunc.py`` (the file MLflow executes when a version loads) builds a
:class:`ChainPredictor` from the version's artifacts; MLflow bundles this package (with
``models``, ``configs`` and what they import: ``registry.CODE_PACKAGES``) into every version as
code, so a version runs the same chain code as training and ``flows.infer`` in a process that
never saw this repository.

Each version carries its own role's adapter and, when one was saved at the same step, the
other role's (the *partner*): a generator version writes chains, and with ``with_tests`` its
partner discriminator's tests; a discriminator version writes tests on chains from its partner
generator (``with_tests`` defaults to true for it). A role without an adapter runs on the base
model with a fresh adapter, which leaves the base unchanged.

Input: one row per problem with ``description`` and ``entry_point`` (``function_signature``
and ``id`` optional). Output: one row per problem with ``stage_1`` ... ``stage_5`` (the
generator's text per stage), ``code`` (the parsed entry point, or null), ``code_reason`` and
``tests`` (JSON: ``[{"stage": k, "test": snippet}, ...]``, ``[]`` without ``with_tests``).
Sampling uses the training run's settings; ``seed`` makes it reproducible.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from configs.loader import config_from_dict
from configs.names import ROLES, STAGES
from problems.model import Problem
from serving.sources import ModelSource

INPUT_COLUMNS = ("description", "entry_point")  # required
OPTIONAL_COLUMNS = ("function_signature", "id")
OUTPUT_COLUMNS = (*(f"stage_{k}" for k in STAGES), "code", "code_reason", "tests")

EXAMPLE_PROBLEM = {
    "id": "example-add",
    "description": "Return the sum of the two integers a and b.",
    "entry_point": "add",
    "function_signature": "def add(a: int, b: int) -> int:",
}


def example_row(problem: Any | None = None) -> dict[str, str]:
    """An input row: ``problem`` (a ``Problem``, e.g. one the version was trained on) or a
    built-in one."""
    if problem is None:
        return dict(EXAMPLE_PROBLEM)
    return {"id": problem.id, "description": problem.description,
            "entry_point": problem.entry_point,
            "function_signature": problem.function_signature}


def _problems(frame: Any) -> list[Any]:
    """Rows of the input frame as ``Problem`` objects; a missing or empty required column is an
    error that names it."""
    missing = [c for c in INPUT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"input is missing column(s) {missing}; expected {list(INPUT_COLUMNS)} "
                         f"(optional: {list(OPTIONAL_COLUMNS)})")
    out = []
    for i, row in enumerate(frame.to_dict("records")):
        for col in INPUT_COLUMNS:
            if not isinstance(row.get(col), str) or not row[col].strip():
                raise ValueError(f"row {i}: {col!r} must be a non-empty string, got "
                                 f"{row.get(col)!r}")
        signature = row.get("function_signature")
        out.append(Problem(
            id=str(row.get("id") or f"row-{i}"), description=row["description"],
            function_signature=signature if isinstance(signature, str) else "",
            entry_point=row["entry_point"].strip(), baseline_tests=(), reference_solution=""))
    return out


class ChainPredictor:
    """An ``InferenceEngine`` on the version's base model and adapters."""

    def __init__(self, base_model: str, adapters: dict[str, str | Path], role: str,
                 config: dict[str, Any] | None = None) -> None:
        from serving.inference import InferenceEngine  # deferred: torch, off the registration path

        if role not in ROLES:
            raise ValueError(f"role {role!r}: expected one of {ROLES}")
        cfg = config_from_dict(config or {})
        # The version's own base model, shared by both roles: never the training machine's.
        cfg = replace(cfg, model=replace(cfg.model, generator=str(base_model),
                                         discriminator=None, layout="shared", tiny=False,
                                         device="auto"))
        sources = {r: ModelSource(str(adapters[r]), "adapter", str(base_model),
                                  Path(adapters[r]), None, f"{r} adapter")
                   for r in ROLES if adapters.get(r)}
        gen = sources.get("generator") or ModelSource(str(base_model), "base", str(base_model))
        self.engine = InferenceEngine.from_sources(gen, sources.get("discriminator"), cfg)
        self.role = role

    def predict(self, frame: Any, params: dict[str, Any] | None = None) -> Any:
        import pandas as pd  # deferred: heavy, and only a loaded version predicts

        params = params or {}
        problems = _problems(frame)
        with_tests = params.get("with_tests")
        with_tests = self.role == "discriminator" if with_tests is None else bool(with_tests)
        engine = self.engine
        sampling = engine.cfg.sampling
        if params.get("max_new_tokens"):
            sampling = replace(sampling, max_new_tokens=int(params["max_new_tokens"]))
        seed = int(params["seed"]) if params.get("seed") is not None else sampling.seed
        engine.cfg = replace(engine.cfg, sampling=sampling)
        results = engine.generate(problems, 1, seed=seed)
        if with_tests:
            engine.write_tests(results, seed=seed)
        rows = []
        for r in results:
            texts = [*r.reasoning_chain, r.generated_code]
            rows.append({**{f"stage_{k}": t for k, t in zip(STAGES, texts, strict=True)},
                         "code": r.code, "code_reason": r.code_reason,
                         "tests": json.dumps([{"stage": s, "test": t} for s, t in r.tests])})
        return pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))
