"""What an assert evaluated in the host may name and call: builtins, type names, ``math``
functions, read-only methods of plain types and the codecs they may decode with. ``evaluate``
refuses any other name (such a test runs whole in the jail); ``safecalls`` prices each call."""

from __future__ import annotations

from typing import Any

from sandbox.cost import EvalLimit

SAFE_FUNCS: dict[str, Any] = {
    f.__name__: f for f in (len, sorted, set, frozenset, list, tuple, dict, abs, round, min,
                            max, sum, all, any, isinstance, int, float, str, bool,
                            reversed, enumerate, zip, type, repr, chr, ord, divmod, hash)
}
SAFE_VALUES: dict[str, Any] = {"int": int, "float": float, "str": str, "bool": bool,
                               "list": list, "tuple": tuple, "dict": dict, "set": set,
                               "frozenset": frozenset, "bytes": bytes, "NoneType": type(None)}
MATH_NAMES = {"isclose", "fabs", "sqrt", "floor", "ceil", "isnan", "isinf", "isfinite", "log",
              "log2", "log10", "exp", "trunc", "gcd", "copysign", "pi", "e", "inf", "nan",
              "sin", "cos", "tan", "hypot", "fsum"}  # no factorial/comb/prod: unbounded cost
# Read-only methods of plain types, by receiver type.
SAFE_METHODS: dict[type, set[str]] = {
    str: {"lower", "upper", "strip", "lstrip", "rstrip", "split", "startswith", "endswith",
          "count", "find", "index", "isdigit", "isalpha", "isalnum", "isspace", "islower",
          "isupper", "splitlines", "title", "capitalize", "casefold"},
    list: {"count", "index", "copy"}, tuple: {"count", "index"},
    dict: {"keys", "values", "items", "get", "copy"},
    set: {"issubset", "issuperset", "isdisjoint", "union", "intersection", "difference"},
    frozenset: {"issubset", "issuperset", "isdisjoint"},
    bytes: {"decode", "count", "startswith", "endswith"}, float: {"is_integer"},
    int: {"bit_length", "bit_count"},
}
# Codecs bytes.decode / str(b, encoding) may use: linear ones only (punycode/idna are not).
SAFE_CODECS = {"utf-8", "utf8", "ascii", "us-ascii", "latin-1", "latin1", "iso-8859-1",
               "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be",
               "cp1252"}
SAFE_ERRORS = {"strict", "ignore", "replace", "backslashreplace", "surrogateescape",
               "surrogatepass"}


def check_codec(name: Any, errors: Any) -> None:
    """Refuse a codec or error handler (either may be None) that is not listed above."""
    if name is not None and (type(name) is not str
                             or name.lower().replace("_", "-").replace(" ", "-")
                             not in SAFE_CODECS):
        raise EvalLimit(f"codec {name!r} is not supported here")
    if errors is not None and errors not in SAFE_ERRORS:
        raise EvalLimit(f"error handler {errors!r} is not supported here")
