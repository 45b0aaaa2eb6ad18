"""``python -m sandbox serve``: the judge for a process in another environment (TRL's, in
``benchmarks/peers/trl_grpo.py``). One reply line per request line, results in job order, a bad line
answered with an error naming what is wrong and the server still serving."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.__main__ import InputError, parse_request

REPO = Path(__file__).resolve().parent.parent


def test_requests_are_answered_in_order_and_a_bad_line_does_not_stop_the_server():
    good = {"jobs": [["def f(x):\n    return x\n", ["assert f(1) == 1", "assert f(2) == 3"]],
                     ["def f(x):\n    raise SystemExit(0)\n", ["assert f(1) == 1"]]]}
    lines = [json.dumps(good), "not json", json.dumps({"jobs": [["code", "not a list"]]}),
             json.dumps({"jobs": []}), json.dumps(good)]
    done = subprocess.run([sys.executable, "-m", "sandbox", "serve", "--timeout", "2"],
                          cwd=REPO, input="\n".join(lines) + "\n", capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(replies) == 5
    first = replies[0]["results"]
    assert [(r["passed"], r["total"]) for r in first] == [(1, 2), (0, 1)]
    assert first[0]["statuses"] == ["passed", "failed"]
    assert "not JSON" in replies[1]["error"] and "expected" in replies[2]["error"]
    assert replies[3] == {"results": []} and replies[4] == replies[0]


@pytest.mark.parametrize("line", ['{"jobs": {"a": 1}}', '[1, 2]', '{"jobs": [["c", [1]]]}',
                                  '{"jobs": [["c"]]}'])
def test_a_request_of_the_wrong_shape_is_refused(line):
    with pytest.raises(InputError, match="expected"):
        parse_request(line)
