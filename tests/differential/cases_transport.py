"""Values whose identity or hidden fields matter: ``math.nan`` and other NaNs (a list holding
one NaN equals itself only through identity), a builtin exception's fields kept in C slots
(``OSError.filename``, ``ImportError.name``) and its ``__notes__``, annotations read with
``typing.get_type_hints``/``inspect.signature``/``dataclasses.fields`` (with and without
``from __future__ import annotations``), and ``typing`` names the candidate exports."""

from __future__ import annotations

from .corpus import family

NAN = {
    "ok": """
        import math

        MISSING = float("nan")


        def fill(n):
            return [math.nan] * n


        def missing():
            return MISSING


        def pair(x):
            return [x, x]


        def keep(xs, x):
            xs.append(x)
            return x
    """,
    "fresh": """
        def fill(n):
            return [float("nan") for _ in range(n)]


        def missing():
            return float("nan")


        def pair(x):
            return [x, x * 1.0]


        def keep(xs, x):
            xs.append(float("nan"))
            return float("nan")
    """,
}

NAN_TESTS = {
    "math-nan": """
        import math


        def test_fill():
            assert fill(2) == [math.nan, math.nan]
    """,
    "own-nan": """
        import math


        def test_missing():
            a = missing()
            assert math.isnan(a) and [a] == [a]


        def test_argument_comes_back():
            n = float("nan")
            xs = []
            assert keep(xs, n) is n and xs == [n]
            assert pair(n) == [n, n]
    """,
}

ERRORS = {
    "ok": """
        def open_config(path):
            raise FileNotFoundError(2, "No such file or directory", path)


        def load(name):
            raise ImportError(f"no plugin {name}", name=name)


        def check(value):
            err = ValueError(f"bad value {value!r}")
            err.add_note("values must be positive")
            raise err
    """,
    "bare": """
        def open_config(path):
            raise FileNotFoundError(f"No such file or directory: {path!r}")


        def load(name):
            raise ImportError(f"no plugin {name}")


        def check(value):
            raise ValueError(f"bad value {value!r}")
    """,
}

ERROR_TESTS = {
    "fields": """
        import pytest


        def test_oserror():
            with pytest.raises(FileNotFoundError) as info:
                open_config("/etc/app.cfg")
            assert info.value.filename == "/etc/app.cfg" and info.value.errno == 2
            assert str(info.value) == "[Errno 2] No such file or directory: '/etc/app.cfg'"


        def test_import_error():
            with pytest.raises(ImportError) as info:
                load("csv2")
            assert info.value.name == "csv2"


        def test_notes():
            with pytest.raises(ValueError, match="bad value -1") as info:
                check(-1)
            assert info.value.__notes__ == ["values must be positive"]
    """,
}

TYPED = """
    from dataclasses import dataclass, field
    from typing import Callable, Optional


    @dataclass
    class Item:
        name: str
        price: float = 0.0
        tags: list[str] = field(default_factory=list)


    def cheapest(items: list[Item], limit: Optional[float] = None) -> Optional[Item]:
        ok = [i for i in items if limit is None or i.price <= limit]
        return min(ok, key=lambda i: i.price) if ok else None


    def apply(f: Callable[[int], int], x: int | None) -> int:
        return f(x or 0)
"""
HINTS = {
    "objects": TYPED,
    "strings": "\n    from __future__ import annotations\n" + TYPED,
}

HINT_TESTS = {
    "get-type-hints": """
        import typing
        from typing import Callable, Optional


        def test_class():
            assert typing.get_type_hints(Item) == {"name": str, "price": float,
                                                   "tags": list[str]}


        def test_functions():
            assert typing.get_type_hints(cheapest) == {
                "items": list[Item], "limit": Optional[float], "return": Optional[Item]}
            assert typing.get_type_hints(apply) == {
                "f": Callable[[int], int], "x": int | None, "return": int}
    """,
    "raw": """
        import dataclasses
        import inspect


        def test_signature():
            assert inspect.signature(apply).parameters["x"].annotation == (int | None)
            assert [f.type for f in dataclasses.fields(Item)] == [str, float, list[str]]


        def test_exported_typing_names():
            assert Optional[int] == Optional[int] and cheapest([]) is None
    """,
}

PAIRS = [
    *family("transport/nan", NAN, NAN_TESTS),
    *family("transport/errors", ERRORS, ERROR_TESTS),
    *family("transport/hints", HINTS, HINT_TESTS),
]
