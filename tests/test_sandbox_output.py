"""The candidate's printed output, kept for people in ``ExecutionResult.output`` (never parsed,
never part of a verdict): what it prints while it is imported reaches the output as it is
printed, stdout and stderr in the order written, up to ``Limits.max_output_bytes``; the
verdicts are those of the same code printing nothing."""

from __future__ import annotations

from sandbox import Limits, execute

BODY = "def f(x):\n    print('called')\n    return x + 1\n"
TESTS = ["assert f(1) == 2",
         "def test_capsys(capsys):\n    f(1)\n    assert capsys.readouterr().out == 'called\\n'\n",
         "assert f(1) == 3"]
PRINTS = ("import sys\nprint('out-1')\nprint('err-1', file=sys.stderr)\n"
          "sys.stdout.write('out-2\\n')\n")


def statuses(result) -> list[str]:
    return [o.status for o in result.outcomes]


def test_what_the_candidate_prints_at_import_is_in_the_output():
    quiet = execute(BODY, TESTS, timeout_s=5.0)
    loud = execute(PRINTS + BODY, TESTS, timeout_s=5.0)
    assert statuses(quiet) == statuses(loud) == ["passed", "passed", "failed"]
    assert "out-1" not in quiet.output
    # in the order written; ``called`` (printed in calls) goes to the test's capture
    assert "out-1\nerr-1\nout-2\n" in loud.output, loud.output
    assert "called" not in loud.output


def test_output_printed_before_a_failing_import_is_kept():
    broken = "raise ValueError('no')\n"
    quiet = execute(broken + BODY, TESTS[:1], timeout_s=5.0)
    loud = execute(PRINTS + broken + BODY, TESTS[:1], timeout_s=5.0)
    assert statuses(quiet) == statuses(loud) == ["error"]
    assert "out-1\nerr-1\nout-2\n" in loud.output, loud.output


def test_import_output_is_capped():
    cap = 1000
    code = f"print('x' * {3 * cap})\n" + BODY
    result = execute(code, TESTS[:1], Limits(timeout_s=5.0, max_output_bytes=cap))
    assert statuses(result) == ["passed"]
    assert result.output == "x" * cap
