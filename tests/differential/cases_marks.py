"""pytest's own vocabulary: raises (match, excinfo), warns, approx, skip/skipif (a string
condition too), xfail strict and not, ``pytest.param`` marks, stacked parametrize,
``pytest.fail`` inside ``except Exception: pass``, module-level ``pytestmark`` and
``importorskip``."""

from __future__ import annotations

from .corpus import family

DIVIDE = {
    "ok": """
        import warnings


        def divide(a, b):
            if b == 0:
                raise ZeroDivisionError("cannot divide by zero")
            if isinstance(a, float) or isinstance(b, float):
                warnings.warn("float division", UserWarning)
            return a / b
    """,
    "value_error": """
        def divide(a, b):
            if b == 0:
                raise ValueError("cannot divide by zero")
            return a / b
    """,
    "floor": """
        def divide(a, b):
            if b == 0:
                return None
            return a // b
    """,
    "rounding": """
        def divide(a, b):
            return round(a / b, 2)
    """,
}
DIVIDE_TESTS = {
    "raises_match": """
        import pytest


        def test_zero():
            with pytest.raises(ZeroDivisionError, match="divide by zero"):
                divide(1, 0)
    """,
    "excinfo": """
        import pytest


        def test_message():
            with pytest.raises(ZeroDivisionError) as excinfo:
                divide(5, 0)
            assert "zero" in str(excinfo.value)
            assert excinfo.type is ZeroDivisionError
    """,
    "approx": """
        import pytest


        def test_thirds():
            assert divide(1, 3) == pytest.approx(0.3333333, rel=1e-6)
            assert divide(10, 4) == pytest.approx(2.5)
    """,
    "approx_list": """
        from pytest import approx


        def test_many():
            results = [divide(x, 7) for x in range(1, 4)]
            assert results == approx([1 / 7, 2 / 7, 3 / 7])
    """,
    "warns": """
        import pytest


        def test_float_warns():
            with pytest.warns(UserWarning, match="float"):
                assert divide(1.0, 2) == 0.5
    """,
    "recwarn": """
        def test_no_warning_for_ints(recwarn):
            assert divide(4, 2) == 2
            assert len(recwarn) == 0
    """,
    "fail_in_except": """
        import pytest


        def test_zero_must_raise():
            try:
                divide(1, 0)
                pytest.fail("expected an exception")
            except Exception:
                pass
    """,
}

SKIPS = {
    "ok": "def double(x):\n    return 2 * x\n",
    "wrong": "def double(x):\n    return x * x\n",
}
SKIP_TESTS = {
    "skip_mark": """
        import pytest


        @pytest.mark.skip(reason="not ready")
        def test_skipped():
            assert double(2) == 4
    """,
    "skip_and_run": """
        import pytest


        @pytest.mark.skip(reason="later")
        def test_later():
            assert False

        def test_now():
            assert double(3) == 6
    """,
    "skipif_true": """
        import sys

        import pytest


        @pytest.mark.skipif(sys.version_info < (4, 0), reason="python 4 only")
        def test_future():
            assert double(1) == 2
    """,
    "skipif_false": """
        import sys

        import pytest


        @pytest.mark.skipif(sys.platform == "nonexistent-os", reason="never")
        def test_runs():
            assert double(5) == 10
    """,
    "skipif_string": """
        import pytest


        @pytest.mark.skipif("sys.version_info < (3, 0)")
        def test_py3():
            assert double(-1) == -2

        @pytest.mark.skipif("True", reason="always skipped")
        def test_never():
            assert False
    """,
    "skip_call": """
        import pytest


        def test_dynamic():
            if double(2) == 4:
                pytest.skip("skipping on purpose")
            assert double(2) == 4
    """,
    "xfail_fails": """
        import pytest


        @pytest.mark.xfail(reason="known bug")
        def test_bug():
            assert double(2) == 5
    """,
    "xfail_passes": """
        import pytest


        @pytest.mark.xfail
        def test_maybe():
            assert double(2) == 4
    """,
    "xfail_strict": """
        import pytest


        @pytest.mark.xfail(strict=True)
        def test_strict():
            assert double(2) == 4
    """,
    "xfail_raises": """
        import pytest


        @pytest.mark.xfail(raises=TypeError)
        def test_type():
            double(None)
    """,
    "xfail_call": """
        import pytest


        def test_imperative():
            if double(3) != 6:
                pytest.xfail("double is wrong")
            assert double(3) == 6
    """,
    "param_marks": """
        import pytest


        @pytest.mark.parametrize("x, y", [
            (1, 2),
            pytest.param(2, 5, marks=pytest.mark.xfail),
            pytest.param(3, 6, marks=pytest.mark.skip(reason="slow")),
            pytest.param(4, 8, id="four"),
        ])
        def test_double(x, y):
            assert double(x) == y
    """,
    "stacked_param": """
        import pytest


        @pytest.mark.parametrize("x", [0, 1, 2])
        @pytest.mark.parametrize("k", [1, 3])
        def test_linear(x, k):
            assert double(k * x) == k * double(x)
    """,
    "pytestmark_skip": """
        import pytest

        pytestmark = pytest.mark.skip(reason="whole module")


        def test_a():
            assert double(1) == 2
    """,
    "importorskip": """
        import pytest

        nope = pytest.importorskip("surely_not_installed_module_xyz")


        def test_a():
            assert double(1) == 2
    """,
    "module_skip": """
        import pytest

        if double(2) != 4:
            pytest.skip("double is broken", allow_module_level=True)


        def test_b():
            assert double(4) == 8
    """,
}

PAIRS = family("divide", DIVIDE, DIVIDE_TESTS) + family("skip", SKIPS, SKIP_TESTS)
