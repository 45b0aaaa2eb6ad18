"""Test classes, as code models write them, turned into plain test functions.

Instruct models asked for tests often write a ``unittest.TestCase`` class (or a pytest
``Test*`` class) instead of bare asserts. Each ``test_*`` method becomes a function of its own,
so every test is judged on its own: ``self.assertEqual(a, b)`` becomes ``assert a == b`` (and
the other ``assert*`` methods their plain forms), ``with self.assertRaises(E):`` becomes
``with pytest.raises(E):``. A method that reads anything else of ``self`` (fixtures made in
``setUp``, helper methods) is dropped with that reason: it cannot run without its class.
"""

from __future__ import annotations

import ast

# self.assertX(a, b, msg=None) -> the expression asserted
_BINARY = {
    "assertEqual": ast.Eq, "assertEquals": ast.Eq, "assertNotEqual": ast.NotEq,
    "assertIs": ast.Is, "assertIsNot": ast.IsNot, "assertIn": ast.In, "assertNotIn": ast.NotIn,
    "assertGreater": ast.Gt, "assertGreaterEqual": ast.GtE, "assertLess": ast.Lt,
    "assertLessEqual": ast.LtE,
}
_UNARY = {"assertTrue", "assertFalse", "assertIsNone", "assertIsNotNone"}


def _asserted(name: str, args: list[ast.expr]) -> ast.expr | None:
    """The expression ``self.<name>(*args)`` asserts; ``None`` for a method not known here."""
    if name in _BINARY and len(args) >= 2:
        return ast.Compare(left=args[0], ops=[_BINARY[name]()], comparators=[args[1]])
    if name in _UNARY and args:
        if name == "assertTrue":
            return args[0]
        if name == "assertFalse":
            return ast.UnaryOp(op=ast.Not(), operand=args[0])
        op = ast.Is() if name == "assertIsNone" else ast.IsNot()
        return ast.Compare(left=args[0], ops=[op], comparators=[ast.Constant(None)])
    if name == "assertIsInstance" and len(args) >= 2:
        return ast.Call(func=ast.Name("isinstance", ast.Load()), args=args[:2], keywords=[])
    if name == "assertAlmostEqual" and len(args) >= 2:  # unittest's default: 7 places
        diff = ast.BinOp(left=args[0], op=ast.Sub(), right=args[1])
        rounded = ast.Call(func=ast.Name("round", ast.Load()),
                           args=[diff, ast.Constant(7)], keywords=[])
        return ast.Compare(left=rounded, ops=[ast.Eq()], comparators=[ast.Constant(0)])
    return None


def _is_self_method(node: ast.expr, name: str | None = None) -> bool:
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "self" and (name is None or node.attr == name))


class _Unself(ast.NodeTransformer):
    """Rewrites a method's ``self.assert*`` uses; records what it could not rewrite."""

    def __init__(self) -> None:
        self.problem: str | None = None

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        call = node.value
        if isinstance(call, ast.Call) and _is_self_method(call.func):
            expr = _asserted(call.func.attr, [self.visit(a) for a in call.args])
            if expr is not None:
                msg = call.args[2] if len(call.args) > 2 else None
                return ast.copy_location(ast.Assert(test=expr, msg=msg), node)
        return self.generic_visit(node)

    def visit_withitem(self, node: ast.withitem) -> ast.AST:
        call = node.context_expr
        if isinstance(call, ast.Call) and _is_self_method(call.func, "assertRaises"):
            pytest_raises = ast.Attribute(value=ast.Name("pytest", ast.Load()), attr="raises",
                                          ctx=ast.Load())
            node.context_expr = ast.Call(func=pytest_raises, args=call.args, keywords=[])
            return node
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == "self" and self.problem is None:
            self.problem = "uses self beyond its assertions (setUp state or helper methods)"
        return node


def is_test_class(node: ast.ClassDef) -> bool:
    """A ``unittest.TestCase`` subclass, or a class named as pytest collects (``Test*``)."""
    bases = {ast.unparse(b) for b in node.bases}
    return node.name.startswith("Test") or bool(bases & {"unittest.TestCase", "TestCase"})


def class_tests(node: ast.ClassDef) -> list[tuple[ast.FunctionDef | None, str]]:
    """Each ``test_*`` method of a test class as a plain function (``(function, "")``), or
    ``(None, why)`` where it cannot stand alone. Other methods are not tests; ``setUp``-style
    state makes the methods that read it unusable, which the reason says."""
    out: list[tuple[ast.FunctionDef | None, str]] = []
    for item in node.body:
        if not (isinstance(item, ast.FunctionDef) and item.name.startswith("test")):
            continue
        rewriter = _Unself()
        args = item.args
        params = [a.arg for a in args.posonlyargs + args.args]
        if params[:1] != ["self"] or len(params) > 1 or args.vararg or args.kwarg:
            out.append((None, f"{node.name}.{item.name}: test methods take only self"))
            continue
        body = [rewriter.visit(stmt) for stmt in item.body]
        if rewriter.problem:
            out.append((None, f"{node.name}.{item.name} {rewriter.problem}"))
            continue
        uses_pytest = any(isinstance(n, ast.Attribute) and n.attr == "raises"
                          and isinstance(n.value, ast.Name) and n.value.id == "pytest"
                          for stmt in body for n in ast.walk(stmt))
        if uses_pytest:
            body = [ast.Import(names=[ast.alias("pytest")]), *body]
        function = ast.FunctionDef(name=item.name, args=ast.arguments(
            posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=body, decorator_list=[], returns=None, type_params=[])
        out.append((ast.fix_missing_locations(function), ""))
    if not out:
        out.append((None, f"{node.name} has no test methods"))
    return out
