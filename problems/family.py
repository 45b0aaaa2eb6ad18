"""A procedural problem family a tiny model can generalise over, with disjoint splits.

``load_problems("family:piecewise:train")`` (and ``:warmstart``, ``:heldout``) builds seed-format
records from parameters, so every problem goes through the same conversion and checks as a
file's. The family exists to show, on CPU with a tiny model, what the system is for: a
generator that improves on problems it never saw, and a discriminator whose tests matter.

Grammar (``piecewise``): a function ``<name>(x, a=A, b=B, c=C, t=T)`` with a *main path*
``x * a + b`` and an *edge path* that returns ``c`` when a guard holds; the problem's constants
``A, B, C, T`` are its preamble (provided to every program, like LeetCode's imports)::

    Return x * a + b. If x is negative, return c instead. By default a = 3, b = 4, c = 1 and t = 0.
    Return x * a + b. If x is zero, return c instead. By default ...
    Return x * a + b. If x is greater than t, return c instead. By default ... t = 40.

with ``a`` in 2..6, ``b`` in 0..9, ``c`` in -1..3 and ``t`` in {10, 20, 30, 40, 50}, and the
function's name drawn from a fixed list by the parameters: 5 x 10 x 5 x 7 guards = 1750
combinations, less the 20 ``zero`` ones with ``c == b`` (their edge path returns what the main
path would), 1730 in all. The numbers live in the defaults, so a correct solution is the same
code for every combination of a guard's kind: solving a held-out problem takes reading its
guard from the description (what a tiny model can learn), not copying numbers (which a
two-layer, 64-wide model does not learn in a CPU budget).

Why it is built this way:

* **Baseline tests exercise only the main path** (inputs the guard never fires on); the
  **hidden suite** (``hidden_tests``) covers both paths and is used only for evaluation: it
  is never in a ``Problem``, so no training code can see it. A generator rewarded on baseline
  tests alone is never told that a missing guard is wrong; a discriminator that writes edge
  tests is what tells it. That is the adversarial effect, measurable.
* **Disjoint splits by construction**: a combination's split is a hash of its parameters
  (``warmstart`` 50%, ``train`` 30%, ``heldout`` 20%), so no parameter combination is in two
  splits. Only ``warmstart`` problems are ever used for the supervised start, ``train`` for
  PPO, ``heldout`` for evaluation.
* **An imperfect warm start on purpose** (``warm_targets``): like a real pretrained model, it
  learns the family's language and usually, not always, writes the edge path (the guard is left
  out of ``WARM_EDGE_MISS`` of the generator's targets), and the discriminator's targets are
  mostly main-path tests (an edge test in ``WARM_EDGE_TEST`` of them), written with explicit
  arguments (``Params.written_test``). Both roles have room to
  improve, and the generator has a reason to need the discriminator.

Everything is deterministic in the parameters: the same split always holds the same problems,
in the same order.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from typing import Any

from configs.names import STAGES
from problems import guards

FAMILIES = ("piecewise", "guards")  # guards: problems/guards.py (three ways to be wrong)
SPLITS = ("warmstart", "train", "heldout")
SPLIT_SHARES = {"warmstart": range(0, 5), "train": range(5, 8), "heldout": range(8, 10)}
WARM_EDGE_MISS = 0.3  # share of warm-start code targets without the guard
WARM_EDGE_TEST = 0.2  # share of warm-start test targets with one edge-path test

NAMES = ("scale", "shift", "adjust", "boost", "lift", "tune", "warp", "bend")
A_VALUES = tuple(range(2, 7))
B_VALUES = tuple(range(0, 10))
C_VALUES = tuple(range(-1, 4))
GUARDS = ("negative", "zero", *(f"above{t}" for t in (10, 20, 30, 40, 50)))


@dataclass(frozen=True)
class Params:
    """One combination of the ``piecewise`` grammar."""

    a: int
    b: int
    c: int
    guard: str  # negative | zero | above<t>

    @property
    def key(self) -> str:
        return f"a{self.a}-b{self.b}-c{self.c}-{self.guard}".replace("c-", "cm")  # id-safe

    @property
    def threshold(self) -> int | None:
        return int(self.guard[5:]) if self.guard.startswith("above") else None

    def _hash(self, salt: str) -> int:
        return int(hashlib.sha256(f"{salt}:{self.key}".encode()).hexdigest()[:12], 16)

    @property
    def split(self) -> str:
        bucket = self._hash("split") % 10
        return next(s for s, r in SPLIT_SHARES.items() if bucket in r)

    @property
    def name(self) -> str:
        return NAMES[self._hash("name") % len(NAMES)]

    def main(self, x: int) -> int:
        return x * self.a + self.b

    def edge(self, x: int) -> bool:
        if self.guard == "negative":
            return x < 0
        if self.guard == "zero":
            return x == 0
        return x > self.threshold

    def value(self, x: int) -> int:
        return self.c if self.edge(x) else self.main(x)

    # -- text ------------------------------------------------------------------------------
    def condition_text(self) -> str:
        return {"negative": "x is negative", "zero": "x is zero"}.get(
            self.guard, "x is greater than t")

    def condition_code(self) -> str:
        return {"negative": "x < 0", "zero": "x == 0"}.get(self.guard, "x > t")

    @property
    def t_default(self) -> int:
        return self.threshold or 0

    def preamble(self) -> str:
        """The problem's constants, provided to every program (the reference's and each
        candidate's): the defaults of the signature."""
        return f"A, B, C, T = {self.a}, {self.b}, {self.c}, {self.t_default}\n"

    def signature(self) -> str:
        return (f"def {self.name}(x: int, a: int = A, b: int = B, c: int = C, "
                f"t: int = T) -> int:")

    def description(self) -> str:
        return (f"Return x * a + b. If {self.condition_text()}, return c instead. By default "
                f"a = {self.a}, b = {self.b}, c = {self.c} and t = {self.t_default}.")

    def code(self, with_guard: bool = True) -> str:
        guard = (f"    if {self.condition_code()}:\n        return c\n" if with_guard else "")
        return (f"def {self.name}(x, a=A, b=B, c=C, t=T):\n{guard}"
                "    return x * a + b\n")

    # -- inputs ----------------------------------------------------------------------------
    def main_inputs(self) -> tuple[int, ...]:
        """Inputs on the main path only (the guard never fires)."""
        t = self.threshold
        return (1, 2, 7) if t is None else (1, t // 2, t)

    def edge_inputs(self) -> tuple[int, ...]:
        """Two inputs on the edge path (one for ``zero``) where the main path's value differs
        from ``c``, so a test on them tells a missing guard apart."""
        if self.guard == "zero":
            candidates: tuple[int, ...] = (0,)
        elif self.guard == "negative":
            candidates = (-1, -2, -3, -4, -5)
        else:
            candidates = (self.threshold + 1, self.threshold + 2, self.threshold * 2)
        return tuple(x for x in candidates if self.main(x) != self.c)[:2]

    def test(self, x: int) -> str:
        return f"assert {self.name}({x}) == {self.value(x)}"

    def written_test(self, edge: bool = False) -> str:
        """A test as the warm start teaches the discriminator to write it: explicit arguments
        it picks itself (a=2, b=3, c=7, t=50), so a valid test takes reading the guard's kind
        from the description, neither copying the defaults nor arithmetic. Main path: x=0
        (returns b), or x=1 (returns a + b) when the guard is ``zero``; edge path: an input
        the guard catches (returns c)."""
        if edge:
            x = {"negative": -1, "zero": 0}.get(self.guard, 51)
            return f"assert {self.name}({x}, 2, 3, 7, 50) == 7"
        if self.guard == "zero":
            return f"assert {self.name}(1, 2, 3, 7, 50) == 5"
        return f"assert {self.name}(0, 2, 3, 7, 50) == 3"


def all_params() -> list[Params]:
    """Every combination whose edge path can be told apart from its main path (``zero`` with
    ``c == b`` cannot: the main path already returns ``c`` at 0)."""
    return [p for a, b, c, g in itertools.product(A_VALUES, B_VALUES, C_VALUES, GUARDS)
            if (p := Params(a, b, c, g)).edge_inputs()]


def split_params(split: str) -> list[Params]:
    """The combinations of ``split``, in a fixed shuffled order (a prefix is a fair sample)."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    return sorted((p for p in all_params() if p.split == split), key=lambda p: p._hash("order"))


def problem_id(p: Params) -> str:
    return f"piecewise-{p.key}"


def params_of(problem_id_: str) -> Params:
    """The parameters behind a family problem id (``ValueError`` for any other id)."""
    key = problem_id_.removeprefix("piecewise-")
    try:
        a, b, c, guard = key.split("-", 3)
        if not (a[0] == "a" and b[0] == "b" and c[0] == "c"):
            raise ValueError
        params = Params(int(a[1:]), int(b[1:]), int(c[1:].replace("m", "-")), guard)
    except (ValueError, IndexError):
        raise ValueError(f"{problem_id_!r} is not a piecewise family problem id") from None
    if guard not in GUARDS or problem_id(params) != problem_id_:
        raise ValueError(f"{problem_id_!r} is not a piecewise family problem id")
    return params


def record(p: Params | guards.Params) -> dict[str, Any]:
    """The seed-format record of one combination of either grammar (baseline tests: main path
    only), tagged with its family, split and guard kinds."""
    if isinstance(p, guards.Params):
        pid, kinds = guards.problem_id(p), [f"family:{guards.NAME}", p.edge, p.bound]
    else:
        pid, kinds = problem_id(p), ["family:piecewise", p.guard]
    return {"id": pid, "description": p.description(), "function_signature": p.signature(),
            "entry_point": p.name, "preamble": p.preamble(), "reference_solution": p.code(),
            "baseline_tests": [p.test(x) for x in p.main_inputs()], "difficulty": "easy",
            "tags": [kinds[0], f"split:{p.split}", *kinds[1:]]}


def family_records(spec: str) -> list[dict[str, Any]]:
    """Records for ``family:<name>[:<split>]`` (no split: all three, warm-start first)."""
    parts = spec.split(":")
    if parts[0] != "family" or len(parts) not in (2, 3) or parts[1] not in FAMILIES or (
            len(parts) == 3 and parts[2] not in SPLITS):
        raise ValueError(f"{spec!r}: expected family:<name>[:<split>] with name in "
                         f"{', '.join(FAMILIES)} and split in {', '.join(SPLITS)}")
    splits = [parts[2]] if len(parts) == 3 else list(SPLITS)
    params = guards.split_params if parts[1] == guards.NAME else split_params
    return [record(p) for s in splits for p in params(s)]


def is_family(problem: Any) -> bool:
    """Whether ``problem`` was loaded from a ``family:`` source (its id names its parameters)."""
    return problem.source.startswith("family:")


def _is_guards(problem_id_: str) -> bool:
    return problem_id_.startswith(f"{guards.NAME}-")


def hidden_tests(problem_id_: str) -> list[str]:
    """The hidden suite of a family problem: every path. Evaluation only."""
    if _is_guards(problem_id_):
        return guards.hidden_tests(problem_id_)
    p = params_of(problem_id_)
    return [p.test(x) for x in (*p.main_inputs(), *p.edge_inputs())]


def edge_tests(problem_id_: str) -> list[str]:
    """The hidden suite's tests off the main path alone."""
    if _is_guards(problem_id_):
        return guards.edge_tests(problem_id_)
    p = params_of(problem_id_)
    return [p.test(x) for x in p.edge_inputs()]


def warm_targets(problem_id_: str, ideal: bool = False) -> tuple[str, list[str]]:
    """The warm start's code and discriminator tests for a ``piecewise`` problem: the
    guard is missing from ``WARM_EDGE_MISS`` of the codes, and ``WARM_EDGE_TEST`` of the test
    sets hold one edge test (see the module docstring); ``ideal``: always the guard and the
    edge test."""
    p = params_of(problem_id_)
    miss, edge_test = (0.0, 1.0) if ideal else (WARM_EDGE_MISS, WARM_EDGE_TEST)
    with_guard = (p._hash("warm-code") % 1000) / 1000 >= miss
    tests = [p.written_test()]
    if (p._hash("warm-tests") % 1000) / 1000 < edge_test:
        tests.append(p.written_test(edge=True))
    return p.code(with_guard), tests


def warm_chain(problem_id_: str, ideal: bool = False) -> tuple[list[str], list[list[str]]]:
    """The warm start's targets for a family problem: the generator's text of each chain stage
    (the last one the code, fenced) and the discriminator's tests of each stage.
    ``piecewise`` teaches formulaic reasoning stages and the same tests at every stage;
    ``guards`` teaches a chain whose stages decide the code and stage-specific tests
    (``problems/guards.py``).
    ``ideal``: the same chain without its deliberate flaws (``pipeline/basefit.py``)."""
    if _is_guards(problem_id_):
        return guards.warm_chain(problem_id_, ideal)
    code, tests = warm_targets(problem_id_, ideal)
    name = params_of(problem_id_).name
    return ([*formulaic_stages(name), f"```python\n{code.strip()}\n```"],
            [tests] * len(STAGES))


def formulaic_stages(name: str) -> list[str]:
    """The reasoning stages' texts (every stage but the code) of a problem without a family
    chain: short and formulaic on purpose, so a tiny model learns them quickly and the code
    stage's prompt holds clean earlier stages. A chain with more reasoning stages than these
    four texts repeats the last three in turn."""
    return list(guards.per_reasoning_stage(f"We need {name}.", (
        f"1. Read the inputs.\n2. Compute {name}.\n3. Return it.", f"return {name}(inputs)",
        "Handle empty inputs.")).values())
