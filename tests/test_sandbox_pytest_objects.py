"""Nothing of the test process's pytest is handed to the candidate: a fixture's value
(``request``, ``capsys``, ``monkeypatch``, ``pytestconfig``), a pytest function or the
``pytest`` module given to a candidate function is a ``TypeError`` in the test naming it, so
a candidate cannot reach the session that judges it (and write its own verdict)."""

from __future__ import annotations

import pytest

from sandbox import execute

PEEK = "def peek(x):\n    return 1\n"


@pytest.mark.parametrize("test", [
    "def test_a(request):\n    assert peek(request) == 1\n",
    "def test_a(pytestconfig):\n    assert peek(pytestconfig) == 1\n",
    "def test_a(capsys):\n    assert peek(capsys) == 1\n",
    "def test_a(monkeypatch):\n    assert peek(monkeypatch) == 1\n",
    "import pytest\n\n\ndef test_a():\n    assert peek(pytest) == 1\n",
    "import pytest\n\n\ndef test_a():\n    assert peek(pytest.skip) == 1\n",
    "def test_a(request):\n    assert peek([request.node]) == 1\n",
])
def test_no_pytest_object_is_handed_to_the_candidate(test):
    outcome = execute(PEEK, [test]).outcomes[0]
    assert outcome.status == "error", outcome
    assert "is not handed to the candidate" in outcome.message


def test_what_tests_do_hand_over_still_crosses():
    tests = ["def test_a(tmp_path):\n    assert peek(tmp_path) == 1\n",
             "from unittest.mock import Mock\n\n\ndef test_a():\n    assert peek(Mock()) == 1\n",
             "def test_a():\n    assert peek(lambda: 0) == 1\n"]
    assert [o.status for o in execute(PEEK, tests).outcomes] == ["passed"] * 3
