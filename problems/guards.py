"""The ``guards`` family: problems with three independent ways to be wrong, one per chain stage.

``load_problems("family:guards:train")`` (and ``:warmstart``, ``:heldout``). Where
``piecewise`` (``problems/family.py``) has one guard, so only one kind of bug for every stage to
find, a ``guards`` problem has two guards of different kinds and a boundary between them::

    Return x * a + b. If x is negative, return c instead. If x is greater than t, return d
    instead. By default a = 3, b = 4, c = 1, d = 7 and t = 30.

with the *edge* guard ``x is negative`` or ``x is zero`` and the *bound* guard ``x is greater
than t`` or ``x is at least t`` (``a`` in 2..5, ``b`` in 0..4, ``c`` in -1..3, ``d`` in 6..8,
``t`` in {10, 30, 50}: 3,600 combinations less the 288 ``zero`` ones with ``c == b``,
3,312 in all). A
solution can be wrong in three independent ways, and each maps to one stage's focus
(``configs.names.STAGE_TABLE``; stages of the shipped five-stage chain):

==========================  ===================================  ==========================
bug                         test that exposes it                 discriminator stage focus
==========================  ===================================  ==========================
edge guard missing          ``x`` negative / zero                2, edge cases
bound off by one (> vs >=)  ``x == t``                           3, boundaries, off-by-one
bound guard missing         a large ``x`` (1000)                 4, extreme values
==========================  ===================================  ==========================

The first stage (happy path) is the main path, which the problem's baseline tests already
cover; the code stage (adversarial, reading the code) targets whatever that code leaves out.
The reasoning stages in between take the three focus tests in turn (``FOCUS``), so a chain
with more of them cycles through edge, boundary and large again, and one with fewer stops
early.

As in ``piecewise``: baseline tests are main-path only (inputs no guard fires on, away from the
boundary), the hidden suite (``hidden_tests``) covers every path and is used for evaluation
only, the splits are disjoint by a hash of the parameters, and the warm start is imperfect on
purpose (``warm_chain``): the generator's chain drops each guard or flips the boundary with
``WARM_MISS`` each, its reasoning stages after the first saying what the code then does (the
code follows its reasoning), and the discriminator's stage-k target is that stage's focus test with
``WARM_FOCUS``, otherwise a repeat of the main-path test (which adds nothing to the suite).
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from typing import TypeVar

from configs.names import CODE_STAGE, STAGES

NAME = "guards"
SPLIT_SHARES = {"warmstart": range(0, 5), "train": range(5, 8), "heldout": range(8, 10)}
WARM_MISS = 0.25   # per guard decision: share of the warm start's chains that get it wrong
WARM_FOCUS = 0.35  # share of the warm start's stage-k test targets that test stage k's focus

# One function name for every problem: what a solution gets right or wrong here is its guards,
# not copying a name: with a name per problem, the warm-started tiny model writes another
# problem's name in its held-out solutions and fails them for that alone.
NAME_OF_FUNCTION = "pick"
A_VALUES = tuple(range(2, 6))
B_VALUES = tuple(range(0, 5))
C_VALUES = tuple(range(-1, 4))
D_VALUES = (6, 7, 8)
T_VALUES = (10, 30, 50)
EDGES = ("negative", "zero")
BOUNDS = ("above", "atleast")
LARGE = 1000  # an input past every threshold: a missing bound guard shows here

# The warm start's discriminator writes tests with explicit arguments it picks itself
# (a, b, c, d, t = 2, 3, 7, 9, 50), so a valid test takes reading the guards' kinds from the
# description, neither copying the defaults nor arithmetic (as piecewise's ``written_test``).
WRITTEN = {"a": 2, "b": 3, "c": 7, "d": 9, "t": 50}


@dataclass(frozen=True)
class Params:
    """One combination of the ``guards`` grammar."""

    a: int
    b: int
    c: int
    d: int
    t: int
    edge: str   # negative | zero
    bound: str  # above | atleast

    @property
    def key(self) -> str:
        c = f"cm{-self.c}" if self.c < 0 else f"c{self.c}"
        return f"a{self.a}-b{self.b}-{c}-d{self.d}-t{self.t}-{self.edge}-{self.bound}"

    def _hash(self, salt: str) -> int:
        return int(hashlib.sha256(f"{NAME}:{salt}:{self.key}".encode()).hexdigest()[:12], 16)

    def _share(self, salt: str) -> float:
        return (self._hash(salt) % 1000) / 1000

    @property
    def split(self) -> str:
        bucket = self._hash("split") % 10
        return next(s for s, r in SPLIT_SHARES.items() if bucket in r)

    @property
    def name(self) -> str:
        return NAME_OF_FUNCTION

    # -- semantics ---------------------------------------------------------------------------
    def value(self, x: int, a: int | None = None, b: int | None = None, c: int | None = None,
              d: int | None = None, t: int | None = None) -> int:
        a, b, c, d, t = (self.a if a is None else a, self.b if b is None else b,
                         self.c if c is None else c, self.d if d is None else d,
                         self.t if t is None else t)
        if (x < 0) if self.edge == "negative" else (x == 0):
            return c
        if (x > t) if self.bound == "above" else (x >= t):
            return d
        return x * a + b

    # -- text ----------------------------------------------------------------------------------
    def edge_text(self) -> str:
        return "x is negative" if self.edge == "negative" else "x is zero"

    def edge_code(self) -> str:
        return "x < 0" if self.edge == "negative" else "x == 0"

    def bound_text(self) -> str:
        return "x is greater than t" if self.bound == "above" else "x is at least t"

    def bound_code(self, flipped: bool = False) -> str:
        inclusive = (self.bound == "atleast") != flipped
        return "x >= t" if inclusive else "x > t"

    def preamble(self) -> str:
        return f"A, B, C, D, T = {self.a}, {self.b}, {self.c}, {self.d}, {self.t}\n"

    def signature(self) -> str:
        return (f"def {self.name}(x: int, a: int = A, b: int = B, c: int = C, d: int = D, "
                f"t: int = T) -> int:")

    def description(self) -> str:
        return (f"Return x * a + b. If {self.edge_text()}, return c instead. If "
                f"{self.bound_text()}, return d instead. By default a = {self.a}, b = {self.b}, "
                f"c = {self.c}, d = {self.d} and t = {self.t}.")

    def code(self, edge: bool = True, bound: bool = True, flipped: bool = False) -> str:
        """The solution, or one wrong in the given ways (a guard left out, the boundary off by
        one)."""
        body = ""
        if edge:
            body += f"    if {self.edge_code()}:\n        return c\n"
        if bound:
            body += f"    if {self.bound_code(flipped)}:\n        return d\n"
        return f"def {self.name}(x, a=A, b=B, c=C, d=D, t=T):\n{body}    return x * a + b\n"

    # -- inputs and tests ----------------------------------------------------------------------
    def main_inputs(self) -> tuple[int, ...]:
        """Inputs no guard fires on, away from the boundary (the baseline tests')."""
        return (1, 2, self.t // 2)

    def edge_inputs(self) -> tuple[int, ...]:
        return (0,) if self.edge == "zero" else (-1, -3)

    def bound_inputs(self) -> tuple[int, ...]:
        """The boundary itself, one past it, and a large input."""
        return (self.t, self.t + 1, LARGE)

    def test(self, x: int) -> str:
        return f"assert {self.name}({x}) == {self.value(x)}"

    def written_test(self, focus: str) -> str:
        """A test as the warm start teaches the discriminator to write it, for one focus:
        ``main`` (x = 1), ``edge`` (the edge guard's input), ``boundary`` (x = t) or ``large``
        (x = 1000), with the explicit arguments of ``WRITTEN``."""
        x = {"main": 1, "edge": -1 if self.edge == "negative" else 0,
             "boundary": WRITTEN["t"], "large": LARGE}[focus]
        args = ", ".join(str(WRITTEN[k]) for k in "abcdt")
        return f"assert {self.name}({x}, {args}) == {self.value(x, **WRITTEN)}"


T = TypeVar("T")


def per_reasoning_stage(first: T, rest: tuple[T, ...]) -> dict[int, T]:
    """One value per reasoning stage (every stage but the code): ``first`` for the first, then
    ``rest`` in turn, cycling when the chain has more stages than ``rest`` has values.

    >>> per_reasoning_stage("main", ("edge", "boundary", "large"))
    {1: 'main', 2: 'edge', 3: 'boundary', 4: 'large'}
    """
    return {stage: first if i == 0 else rest[(i - 1) % len(rest)]
            for i, stage in enumerate(STAGES[:-1])}


FOCUS = per_reasoning_stage("main", ("edge", "boundary", "large"))
"""The test each reasoning stage's discriminator focus asks for (the code stage: what the code
misses)."""
BUG_FOCUS = {"edge": "edge", "flipped": "boundary", "bound": "large"}
"""The focus test that exposes each way of being wrong."""


def all_params() -> list[Params]:
    """Every combination whose edge path differs from its main path (``zero`` with ``c == b``
    does not: the main path already returns ``c`` at 0)."""
    return [p for combo in itertools.product(A_VALUES, B_VALUES, C_VALUES, D_VALUES, T_VALUES,
                                             EDGES, BOUNDS)
            if not ((p := Params(*combo)).edge == "zero" and p.c == p.b)]


def split_params(split: str) -> list[Params]:
    """The combinations of ``split``, in a fixed shuffled order (a prefix is a fair sample)."""
    return sorted((p for p in all_params() if p.split == split), key=lambda p: p._hash("order"))


def problem_id(p: Params) -> str:
    return f"{NAME}-{p.key}"


def params_of(problem_id_: str) -> Params:
    """The parameters behind a ``guards`` problem id (``ValueError`` for any other id)."""
    bad = ValueError(f"{problem_id_!r} is not a {NAME} family problem id")
    parts = problem_id_.removeprefix(f"{NAME}-").split("-")
    if not problem_id_.startswith(f"{NAME}-") or len(parts) != 7:
        raise bad
    try:
        a, b, c, d, t = (-int(s[2:]) if s.startswith("cm") else int(s[1:])
                         for s in parts[:5])
        params = Params(a, b, c, d, t, parts[5], parts[6])
    except ValueError:
        raise bad from None
    if params.edge not in EDGES or params.bound not in BOUNDS or problem_id(params) != \
            problem_id_:
        raise bad
    return params


def hidden_tests(problem_id_: str) -> list[str]:
    """The hidden suite: main path, edge guard, boundary and bound guard. Evaluation only."""
    p = params_of(problem_id_)
    return [p.test(x) for x in (*p.main_inputs(), *p.edge_inputs(), *p.bound_inputs())]


def edge_tests(problem_id_: str) -> list[str]:
    """The hidden suite's tests off the main path (every guard and the boundary)."""
    p = params_of(problem_id_)
    return [p.test(x) for x in (*p.edge_inputs(), *p.bound_inputs())]


def warm_chain(problem_id_: str, ideal: bool = False) -> tuple[list[str], list[list[str]]]:
    """The warm start's targets for one problem: the generator's text of each chain stage (the
    code stage's is the code, in a fenced block) and the discriminator's tests per stage
    (module docstring).

    ``ideal``: the chain without its deliberate flaws (both guards, the boundary as described,
    every stage's focus test), what a base model fitted on the family knows
    (``pipeline/basefit.py``); the adapters' warm start then teaches the flawed habits."""
    p = params_of(problem_id_)
    miss, focus_share = (0.0, 1.0) if ideal else (WARM_MISS, WARM_FOCUS)
    edge = p._share("warm-edge") >= miss
    bound = p._share("warm-bound") >= miss
    flipped = bound and p._share("warm-flip") < miss
    main = "return x * a + b"
    at_t = "d" if p.bound_code(flipped) == "x >= t" else "x * a + b"
    # Each reasoning stage says one thing the code depends on, beside that stage's focus test.
    reasoning = per_reasoning_stage(f"We need {p.name}: x * a + b, except in special cases.", (
        (f"1. If {p.edge_text()}, return c.\n2. Otherwise {main}." if edge
         else f"1. {main.capitalize()}."),
        "\n".join([*([f"if {p.edge_code()}: return c"] if edge else []),
                   *([f"if {p.bound_text()}: return d"] if bound else []), main]),
        (f"O(1). At x = t the answer is {at_t}." if bound else "O(1). No upper limit.")))
    texts = [*reasoning.values(), f"```python\n{p.code(edge, bound, flipped).strip()}\n```"]
    misses = [bug for bug, wrong in (("edge", not edge), ("bound", not bound),
                                     ("flipped", flipped)) if wrong]
    tests = []
    for stage in STAGES:  # the first reasoning stage's focus is the main path itself
        focused = p._share(f"warm-focus-{stage}") < focus_share
        if stage == CODE_STAGE:  # the adversarial stage reads the code: it tests what it misses
            focus = BUG_FOCUS[misses[0]] if focused and misses else "main"
        else:
            focus = FOCUS[stage] if focused else "main"
        tests.append([p.written_test(focus)])
    return texts, tests
