"""AST mutants of a reference solution: near-miss programs that strong tests should reject.

The ``mutation_kill`` reward pays the discriminator for tests that tell the reference apart
from these mutants, which keeps a learning signal once the generator passes every test.

    from rewards.mutants import make_mutants
    mutants = make_mutants(problem.reference_solution, problem.entry_point, n=6, seed=0)
    # run each test against problem.program(m.code) for m in mutants, in the sandbox

Each mutant is one single-point change of a kind in :data:`KINDS`: flipped comparison,
integer constant off by one, changed or swapped arithmetic operator, and/or swap or dropped
``not``, dropped or negated branch, ``return None``, ``break``/``continue`` swap, ``max``/``min``
swap, deleted statement. Every mutant compiles, still defines the entry point at module level
and differs from the original AST; duplicates and syntactic no-ops are skipped. Selection is
deterministic for a given ``seed`` and spreads over the kinds round-robin.

What it does not promise: a mutant may be *semantically* equivalent to the reference (a test
can then never kill it) and may loop forever or exhaust memory; run mutants in the sandbox,
never in the harness. Pass the reference without the problem's preamble where there is one,
so the preamble (environment the candidate also gets) is not mutated.
"""

from __future__ import annotations

import ast
import copy
import random
from dataclasses import dataclass
from typing import Any

KINDS = ("compare", "constant", "arith", "boolean", "branch", "return", "control", "call",
         "statement")

# Boundary shift and negation of each comparison (the two commonest real off-by-one bugs).
_COMPARE_FLIPS: dict[type, tuple[type, ...]] = {
    ast.Lt: (ast.LtE, ast.GtE), ast.LtE: (ast.Lt, ast.Gt),
    ast.Gt: (ast.GtE, ast.LtE), ast.GtE: (ast.Gt, ast.Lt),
    ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,),
    ast.In: (ast.NotIn,), ast.NotIn: (ast.In,),
    ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
}
_ARITH_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub, ast.Mult), ast.Sub: (ast.Add,), ast.Mult: (ast.Add, ast.FloorDiv),
    ast.Div: (ast.Mult, ast.FloorDiv), ast.FloorDiv: (ast.Div, ast.Mult),
    ast.Mod: (ast.FloorDiv,), ast.Pow: (ast.Mult,),
    ast.BitAnd: (ast.BitOr,), ast.BitOr: (ast.BitAnd,), ast.BitXor: (ast.BitOr,),
    ast.LShift: (ast.RShift,), ast.RShift: (ast.LShift,),
}
# Swapping the operands of a commutative operator is (for numbers) a semantic no-op.
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)
_CALL_SWAPS = {"max": "min", "min": "max", "any": "all", "all": "any"}
# Fields that hold type annotations: mutating them changes nothing at run time.
_SKIPPED_FIELDS = frozenset({"annotation", "returns", "type_comment", "decorator_list"})


@dataclass(frozen=True)
class Mutant:
    """A mutated program and what was changed."""

    code: str
    """The whole program (``ast.unparse`` of the mutated module: comments are dropped)."""
    description: str
    """``<kind> line <n>: <before> -> <after>``, for logs and the executions table."""
    kind: str = ""
    """One of :data:`KINDS`."""


def _walk(tree: ast.AST) -> list[tuple[ast.AST, ast.AST | None, str, int | None]]:
    """Pre-order ``(node, parent, field, index_in_field)``; the same order on a deep copy,
    which is how a site found on the original is located again on a fresh copy."""
    out: list[tuple[ast.AST, ast.AST | None, str, int | None]] = []

    def visit(node: ast.AST, parent: ast.AST | None, fld: str, idx: int | None) -> None:
        out.append((node, parent, fld, idx))
        for name, value in ast.iter_fields(node):
            if name in _SKIPPED_FIELDS:
                continue
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        visit(child, node, name, i)
            elif isinstance(value, ast.AST):
                visit(value, node, name, None)

    visit(tree, None, "", None)
    return out


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int  # bool excluded


def _sites(node: ast.AST) -> list[tuple[str, Any]]:
    """Every ``(kind, payload)`` mutation possible at this node."""
    sites: list[tuple[str, Any]] = []
    if isinstance(node, ast.Compare):
        sites += [("compare", (i, new)) for i, op in enumerate(node.ops)
                  for new in _COMPARE_FLIPS.get(type(op), ())]
    elif _is_int(node):
        sites += [("constant", +1), ("constant", -1)]
    elif isinstance(node, ast.BinOp):
        sites += [("arith", new) for new in _ARITH_SWAPS.get(type(node.op), ())
                  # x + 0 and x - 0 are the same program
                  if not (isinstance(node.op, ast.Add | ast.Sub)
                          and isinstance(node.right, ast.Constant) and node.right.value == 0)]
        if isinstance(node.op, _NON_COMMUTATIVE):
            sites.append(("arith", "swap"))
    elif isinstance(node, ast.AugAssign):
        sites += [("arith", new) for new in _ARITH_SWAPS.get(type(node.op), ())]
    elif isinstance(node, ast.BoolOp):
        sites.append(("boolean", "swap"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        sites.append(("boolean", "drop_not"))
    elif isinstance(node, ast.If):
        sites += [("branch", "negate"), ("branch", "pass_body")]
        if node.orelse:
            sites.append(("branch", "drop_else"))
    elif isinstance(node, ast.IfExp):
        sites.append(("branch", "swap"))
    elif isinstance(node, ast.Return):
        if node.value is not None and not (isinstance(node.value, ast.Constant)
                                           and node.value.value is None):
            sites.append(("return", "none"))
    elif isinstance(node, ast.Break | ast.Continue):
        sites.append(("control", "swap"))
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) \
            and node.id in _CALL_SWAPS:
        sites.append(("call", "swap"))
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) or (
            isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant)):
        # Statement deletion (docstrings and bare constants excluded): a forgotten update.
        sites.append(("statement", "delete"))
    return sites


def _mutate(node: ast.AST, kind: str, payload: Any) -> ast.AST:
    """A mutated copy of ``node`` (the caller puts it in place of the original)."""
    new = copy.deepcopy(node)
    if kind == "compare":
        i, op = payload
        new.ops[i] = op()
    elif kind == "constant":
        new.value = node.value + payload
    elif kind == "arith" and payload == "swap":
        new.left, new.right = new.right, new.left
    elif kind == "arith":
        new.op = payload()
    elif kind == "boolean" and payload == "swap":
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "boolean":  # drop_not
        return new.operand
    elif kind == "branch" and payload == "negate":
        new.test = ast.UnaryOp(op=ast.Not(), operand=new.test)
    elif kind == "branch" and payload == "pass_body":
        new.body = [ast.Pass()]
    elif kind == "branch" and payload == "drop_else":
        new.orelse = []
    elif kind == "branch":  # IfExp swap
        new.body, new.orelse = new.orelse, new.body
    elif kind == "return":
        new.value = ast.Constant(value=None)
    elif kind == "control":
        return ast.Continue() if isinstance(node, ast.Break) else ast.Break()
    elif kind == "call":
        new.id = _CALL_SWAPS[node.id]
    elif kind == "statement":
        return ast.Pass()
    else:  # pragma: no cover - _sites and _mutate are written together
        raise AssertionError(f"unknown mutation {kind}/{payload}")
    return new


def _describe(kind: str, payload: Any, old: ast.AST, new: ast.AST) -> str:
    line = getattr(old, "lineno", "?")
    if isinstance(old, ast.If):
        what = {"negate": "condition negated", "pass_body": "body replaced by pass",
                "drop_else": "elif/else dropped"}[payload]
        return f"{kind} line {line}: if {ast.unparse(old.test)}: {what}"
    before = ast.unparse(old).splitlines()[0]
    after = ast.unparse(new).splitlines()[0]
    return f"{kind} line {line}: {before} -> {after}"


def _defines(tree: ast.Module, name: str) -> bool:
    """The module binds ``name`` at top level (def, class, assignment or import)."""
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                and stmt.name == name:
            return True
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(stmt, ast.Import | ast.ImportFrom) and any(
                (a.asname or a.name.split(".")[0]) == name for a in stmt.names):
            return True
    return False


def _apply(tree: ast.Module, index: int, kind: str, payload: Any) -> tuple[ast.Module, str]:
    """A deep copy of ``tree`` with the node at pre-order ``index`` mutated."""
    fresh = copy.deepcopy(tree)
    node, parent, fld, idx = _walk(fresh)[index]
    new = _mutate(node, kind, payload)
    if idx is None:
        setattr(parent, fld, new)
    else:
        getattr(parent, fld)[idx] = new
    return fresh, _describe(kind, payload, node, new)


def make_mutants(code: str, entry_point: str, n: int, seed: int = 0) -> list[Mutant]:
    """Up to ``n`` distinct single-point mutants of ``code``, chosen deterministically.

    Candidates are shuffled within each kind with ``seed`` and taken round-robin across kinds
    (a kind with few sites does not starve the others), skipping any that do not compile, no
    longer define ``entry_point``, equal the original or repeat an earlier mutant. Code that
    does not parse yields no mutants (the caller's reference check reports it).

    >>> ms = make_mutants("def f(a, b):\\n    return a + b if a < b else b\\n", "f", 3, seed=0)
    >>> len(ms), len({m.code for m in ms}), len({m.kind for m in ms})
    (3, 3, 3)
    >>> ms == make_mutants("def f(a, b):\\n    return a + b if a < b else b\\n", "f", 3, seed=0)
    True
    >>> make_mutants("def f(x):\\n    return x\\n", "f", 5)[0].description
    'return line 2: return x -> return None'
    """
    if n < 0:
        raise ValueError(f"make_mutants: n={n!r} must be >= 0")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    original = ast.dump(ast.parse(ast.unparse(tree)))
    by_kind: dict[str, list[tuple[int, Any]]] = {k: [] for k in KINDS}
    for index, (node, *_rest) in enumerate(_walk(tree)):
        for kind, payload in _sites(node):
            by_kind[kind].append((index, payload))
    rng = random.Random(seed)
    queues = []
    for kind in KINDS:
        sites = by_kind[kind]
        rng.shuffle(sites)
        if sites:
            queues.append((kind, sites))
    rng.shuffle(queues)

    mutants: list[Mutant] = []
    seen = {original}
    while queues and len(mutants) < n:
        for kind, sites in list(queues):
            # Take the next candidate of this kind that survives the checks.
            while sites:
                index, payload = sites.pop(0)
                mutated, description = _apply(tree, index, kind, payload)
                text = ast.unparse(mutated)
                try:
                    compile(text, "<mutant>", "exec")
                    reparsed = ast.parse(text)
                except (SyntaxError, ValueError):
                    continue
                key = ast.dump(reparsed)
                if key in seen or not _defines(reparsed, entry_point):
                    continue
                seen.add(key)
                mutants.append(Mutant(code=text + "\n", description=description, kind=kind))
                break
            if not sites:
                queues.remove((kind, sites))
            if len(mutants) >= n:
                break
    return mutants
