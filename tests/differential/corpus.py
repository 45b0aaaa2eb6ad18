"""The differential corpus: (candidate code, pytest test module) pairs, as a code model writes
them, right and wrong.

A theme module (``cases_*.py``) lists its pairs in ``PAIRS``. Most come in families: one test
module meets several candidate variants (the right one, and ways of getting it wrong), or one
candidate meets several shapes of test; ``family`` makes the product, and every pair of it is
a distinct (code, test) combination. Nothing here says what the verdict should be: real pytest
decides that (``reference.py``), and the sandbox must agree with it.

Left out on purpose (the judge's documented deviations from one process, which the pairs must
not depend on): comparing a candidate's object with a value the test made itself (identity is
used), builtin-named candidate functions used without an explicit ``from solution import``,
aliasing of a mutable argument that the candidate keeps across calls, output written to file
descriptors (``capfd``, ``os.write``), and the iteration order of sets whose order depends on
their history (only sets of small ints, whose order is their value, are used).
"""

from __future__ import annotations

import importlib
import textwrap
from dataclasses import dataclass

THEMES = ("cases_basic", "cases_marks", "cases_classes", "cases_bank", "cases_fixtures",
          "cases_values", "cases_proxies", "cases_helpers", "cases_protocols", "cases_shared",
          "cases_stdlib", "cases_edge", "cases_stops", "cases_transport",
          "cases_boundary_values", "cases_boundary_calls", "cases_async")


@dataclass(frozen=True)
class Pair:
    name: str
    code: str
    test: str


def src(text: str) -> str:
    """Source from an indented triple-quoted block."""
    return textwrap.dedent(text).lstrip("\n")


def family(name: str, candidates: dict[str, str], tests: dict[str, str]) -> list[Pair]:
    """Every candidate variant against every test module."""
    return [Pair(f"{name}/{c}*{t}", src(code), src(test))
            for c, code in candidates.items() for t, test in tests.items()]


def single(name: str, code: str, test: str) -> Pair:
    return Pair(name, src(code), src(test))


def all_pairs() -> list[Pair]:
    pairs: list[Pair] = []
    for theme in THEMES:
        pairs.extend(importlib.import_module(f"{__package__}.{theme}").PAIRS)
    names = [p.name for p in pairs]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"pair names must be unique: {sorted(duplicates)}")
    return pairs
