"""Parsing what a real model writes: outputs SmolLM2-135M-Instruct recorded through the chain
(``tests/real_outputs/smollm2.json``, from ``benchmarks/real_chain.py``: untrained and
warm-started), each with what parsing must make of it; and test classes, which instruct models
write for "write tests", unpacked into one judged test per method."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.parsing import parse_code, parse_tests

RECORDED = json.loads((Path(__file__).parent / "real_outputs" / "smollm2.json").read_text())


def _ids(records):
    return [f"{r['role']}-{r['problem']}-{r['note'][:24]}" for r in records]


CODE = [r for r in RECORDED["outputs"] if r["role"] == "generator"]
TESTS = [r for r in RECORDED["outputs"] if r["role"] == "discriminator"]


@pytest.mark.parametrize("record", CODE, ids=_ids(CODE))
def test_recorded_code_outputs_parse_as_expected(record):
    parsed = parse_code(record["text"], record["entry_point"])
    assert (parsed.ok, parsed.reason) == (record["expect"]["ok"], record["expect"]["reason"])
    if parsed.ok:
        assert f"def {record['entry_point']}" in parsed.code and "```" not in parsed.code
        compile(parsed.code, "<parsed>", "exec")


@pytest.mark.parametrize("record", TESTS, ids=_ids(TESTS))
def test_recorded_test_outputs_parse_as_expected(record):
    tests = parse_tests(record["text"], record["entry_point"])
    assert [t.snippet for t in tests if t.status == "ok"] == record["expect"]["ok"]
    dropped = sorted(t.reason for t in tests if t.status != "ok")
    assert len(dropped) == len(record["expect"]["dropped"])
    for reason, expected in zip(dropped, record["expect"]["dropped"], strict=True):
        assert reason.startswith(expected)


UNITTEST = '''Here are the tests:
```python
import unittest
from solution import add

class TestAdd(unittest.TestCase):
    def test_small(self):
        self.assertEqual(add(1, 2), 3)
        self.assertTrue(add(0, 0) == 0)

    def test_negative(self):
        self.assertEqual(add(-1, -2), -3, "negatives")
        self.assertNotEqual(add(-1, 1), 1)

    def test_type(self):
        with self.assertRaises(TypeError):
            add("a", 1)

if __name__ == "__main__":
    unittest.main()
```'''


def test_a_unittest_class_becomes_one_test_per_method():
    tests = [t for t in parse_tests(UNITTEST, "add") if t.status == "ok"]
    assert len(tests) == 3
    small, negative, raises = (t.snippet for t in tests)
    assert "assert add(1, 2) == 3" in small and "assert add(0, 0) == 0" in small
    assert "assert add(-1, -2) == -3, 'negatives'" in negative
    assert "import pytest" in raises and "with pytest.raises(TypeError):" in raises
    assert all("self" not in t.snippet and "unittest.main" not in t.snippet for t in tests)


def test_unpacked_class_tests_are_judged_one_by_one():
    from sandbox import execute

    tests = [t.snippet for t in parse_tests(UNITTEST, "add") if t.status == "ok"]
    right = execute("def add(a, b):\n    return a + b\n", tests)
    assert [o.status for o in right.outcomes] == ["passed"] * 3
    # wrong on negatives only, and accepts strings: each method's verdict is its own
    wrong = execute("def add(a, b):\n    if isinstance(a, str):\n        return 1\n"
                    "    if a < 0:\n        return 0\n    return a + b\n", tests)
    assert [o.passed for o in wrong.outcomes] == [True, False, False]


def test_a_pytest_style_class_is_unpacked_too():
    text = "class TestAdd:\n    def test_a(self):\n        assert add(1, 2) == 3\n"
    assert [t.status for t in parse_tests(text, "add")] == ["ok"]
