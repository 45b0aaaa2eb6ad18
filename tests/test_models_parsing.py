"""Parsing of model output: each accepted format, each malformed case, never an exception."""

from __future__ import annotations

import pytest

from models.parsing import fenced_blocks, parse_code, parse_critique, parse_tests

EP = "add"


def ok(tests):
    return [t.snippet for t in tests if t.status == "ok"]


def run_snippet(code: str, snippet: str) -> None:
    """Execute a snippet the way the sandbox will: code, then the test, in one namespace."""
    namespace: dict = {}
    exec(compile(code, "<code>", "exec"), namespace)
    exec(compile(snippet, "<test>", "exec"), namespace)


GOOD = "def add(a, b):\n    return a + b\n"
BAD = "def add(a, b):\n    return a - b\n"


# --- parse_code ------------------------------------------------------------------------------

def test_code_from_fenced_block_with_prose_around():
    text = f"Here is my solution:\n```python\n{GOOD}```\nIt adds the numbers."
    parsed = parse_code(text, EP)
    assert parsed.ok and parsed.reason == "fenced block"
    run_snippet(parsed.code, "assert add(2, 3) == 5")


def test_code_picks_the_block_that_defines_the_entry_point():
    text = ("```python\nprint('example')\n```\n"
            f"```python\nimport math\n\n{GOOD}```")
    parsed = parse_code(text, EP)
    assert parsed.ok and "import math" in parsed.code and "print" not in parsed.code


def test_code_strips_example_usage_and_main_block():
    text = (f"```python\n{GOOD}\nassert add(1, 1) == 3\nprint(add(1, 2))\n"
            "if __name__ == '__main__':\n    add(0, 0)\n```")
    parsed = parse_code(text, EP)
    assert parsed.ok and "example usage stripped" in parsed.reason
    assert "assert" not in parsed.code and "print" not in parsed.code
    assert "__main__" not in parsed.code


def test_code_without_fences():
    parsed = parse_code(GOOD, EP)
    assert parsed.ok and parsed.reason == "raw text"


def test_code_salvaged_from_prose_mixed_text():
    text = f"Sure! The function is below.\n{GOOD}This returns the sum of a and b."
    parsed = parse_code(text, EP)
    assert parsed.ok and parsed.reason.startswith("salvaged")
    run_snippet(parsed.code, "assert add(2, 3) == 5")


def test_code_unclosed_fence_at_length_limit():
    parsed = parse_code(f"```python\n{GOOD}", EP)
    assert parsed.ok


@pytest.mark.parametrize("text, reason", [
    ("", "empty output"),
    ("I am not sure how to solve this.", "no definition of add"),
    ("```python\ndef other(a, b):\n    return a\n```", "no definition of add"),
    ("```python\ndef add(a, b)\n    return a + b\n```", "does not compile"),
    ("```python\ndef add(a, b):\n    return (a +\n```", "does not compile"),
])
def test_code_malformed_is_reported_not_raised(text, reason):
    parsed = parse_code(text, EP)
    assert not parsed.ok and reason in parsed.reason


def test_code_never_raises_on_garbage():
    for text in ["```", "``````", "```python\n\x00\x01```", "def add(" * 50, None]:
        assert parse_code(text, EP).ok is False


# --- parse_tests -----------------------------------------------------------------------------

def test_bare_asserts_in_a_fence():
    text = "Tests:\n```python\nassert add(1, 2) == 3\nassert add(-1, 1) == 0\n```\nDone."
    assert ok(parse_tests(text, EP)) == ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"]


def test_pytest_functions_become_self_running_snippets():
    text = ("```python\nimport pytest\n\ndef test_basic():\n    assert add(1, 2) == 3\n\n"
            "def test_negative():\n    x = -4\n    assert add(x, 1) == -3\n```")
    tests = ok(parse_tests(text, EP))
    assert len(tests) == 2
    assert tests[0].startswith("import pytest") and tests[0].endswith("test_basic()")
    run_snippet(GOOD, tests[1])
    with pytest.raises(AssertionError):  # the snippet really runs its test
        run_snippet(BAD, tests[1])


def test_tuple_lists_become_asserts():
    text = "test_cases = [((1, 2), 3), ((0, 0), 0)]\nfor args, want in test_cases:\n" \
           "    assert add(*args) == want\n"
    tests = parse_tests(text, EP)
    assert ok(tests) == ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]
    assert all(t.status == "ok" for t in tests)  # the runner loop is not reported as dropped


def test_bare_tuple_expression_and_single_argument_inputs():
    tests = ok(parse_tests("[('ab', 'ba'), ('', '')]", "rev"))
    assert tests == ["assert rev('ab') == 'ba'", "assert rev('') == ''"]


def test_data_lists_of_pairs_are_setup_not_tests():
    text = "pairs = [(1, 2), (3, 4)]\nassert add(*pairs[0]) == 3\n"
    assert ok(parse_tests(text, EP)) == ["pairs = [(1, 2), (3, 4)]\nassert add(*pairs[0]) == 3"]


def test_setup_statements_are_prepended():
    text = "nums = list(range(10))\nassert add(nums[1], nums[2]) == 3\n"
    (snippet,) = ok(parse_tests(text, EP))
    run_snippet(GOOD, snippet)


def test_duplicates_are_marked_once_kept():
    text = ("assert add(1, 2) == 3\nassert add(1,2)==3\n"
            "def test_a():\n    assert add(2, 2) == 4\ndef test_b():\n    assert add(2, 2) == 4\n")
    tests = parse_tests(text, EP)
    assert len(ok(tests)) == 2
    dupes = [t for t in tests if t.duplicate]
    assert len(dupes) == 2 and all(t.status == "dropped" for t in dupes)
    assert dupes[0].reason == "duplicate of test #0"


def test_malformed_lines_are_salvaged_and_recorded():
    text = ("```python\nassert add(1, 2) == 3\nassert add(2, 2) == \nassert add(0, 5) == 5\n"
            "def test_x():\n    assert add(1, 1) == 2\n    assert add(\n```")
    tests = parse_tests(text, EP)
    assert ok(tests) == ["assert add(1, 2) == 3", "assert add(0, 5) == 5"]
    dropped = [t for t in tests if t.status == "dropped"]
    assert {t.reason for t in dropped} == {"syntax error"} and len(dropped) == 2


def test_multiline_statements_survive_salvage():
    text = ("assert add(\n1, 2\n) == 3\nthis line is prose, not python\n"
            "assert add(3,\n    4) == 7\n")
    assert len(ok(parse_tests(text, EP))) == 2


@pytest.mark.parametrize("text, reason", [
    ("assert 1 + 1 == 2", "does not call add"),
    ("def test_nothing():\n    assert True", "does not call add"),
    ("def add(a, b):\n    return 0", "redefines add"),
    ("class TestAdd(unittest.TestCase):\n    def setUp(self):\n        self.x = 1\n"
     "    def test_a(self):\n        self.assertEqual(add(self.x, 2), 3)", "uses self beyond"),
    ("class TestAdd:\n    def helper(self):\n        return 1", "has no test methods"),
    ("def test_p(x):\n    assert add(x, 0) == x", "arguments"),
    ("print(add(1, 2))", "not a test"),
])
def test_non_tests_are_dropped_with_reason(text, reason):
    tests = parse_tests(text, EP)
    assert not ok(tests)
    assert any(reason in t.reason for t in tests), tests


def test_redefinition_is_dropped_and_not_used_as_setup():
    tests = parse_tests("def add(a, b):\n    return 0\nassert add(1, 1) == 0", EP)
    assert tests[0].status == "dropped" and "redefines add" in tests[0].reason
    assert ok(tests) == ["assert add(1, 1) == 0"]  # judged against the real code, not the fake


def test_importing_the_entry_point_is_ignored():
    text = "from solution import add\nassert add(1, 2) == 3"
    assert ok(parse_tests(text, EP)) == ["assert add(1, 2) == 3"]


def test_prose_only_gives_no_tests_and_never_raises():
    for text in ["I cannot write tests for this.", "", None, "```", "assert (" * 30]:
        assert ok(parse_tests(text, EP)) == []


def test_fenced_blocks_ignores_other_languages():
    assert fenced_blocks("```bash\nls\n```\n```py\nx = 1\n```") == ["x = 1\n"]


# --- parse_critique --------------------------------------------------------------------------

def test_critique_verdict_and_issues():
    text = "- fails on negative numbers\n- off by one\nVERDICT: incorrect"
    critique = parse_critique(text)
    assert critique.verdict == "incorrect"
    assert critique.issues == ["fails on negative numbers", "off by one"]
    assert parse_critique("Looks fine.\nVerdict: correct").verdict == "correct"
    assert parse_critique("no idea").verdict == "unknown"
