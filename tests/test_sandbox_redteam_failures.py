"""Red team, side four: a failure the candidate causes is charged to it, never to the harness.
Whatever a candidate does to its own process, its pipes, its reply or the CPU, its test gets
``crashed``, ``timeout``, ``failed`` or ``error`` (``infra`` is for a harness that cannot
start a worker at all and is left out of rewards, so a candidate must never be able to buy
it); a correct neighbour in the same batch still passes, and nothing a job holds makes the
trusted side raise, hang or re-run the batch.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from sandbox import execute, execute_many

NEIGHBOUR = ("def f(x):\n    return x + 1\n",
             ["assert f(1) == 2", "def test_b():\n    assert f(2) == 3\n"])
FIND_CODEC = """
import sys
codecs = [m for n, m in list(sys.modules.items()) if n.endswith("codec") and hasattr(m, "Codec")]
writers = [m for m in list(sys.modules.values()) if hasattr(m, "write_frame")]
"""
# name: (candidate, the verdict of both of its tests). The candidate defines f, which both
# tests call; each attack is in f, or at import where it says so.
ATTACKS = {
    "kills-every-pid-then-itself": ("""
import os, signal
def f(x):
    for pid in range(-1, 4000):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    os.kill(os.getpid(), signal.SIGKILL)
""", "crashed"),
    "exits": ("import os\ndef f(x):\n    os._exit(0)\n", "crashed"),
    "closes-its-pipes": ("import os\ndef f(x):\n    os.closerange(3, 1 << 16)\n    return x + 1\n",
                         "crashed"),
    "garbage-on-every-descriptor": ("""
import os
def f(x):
    for fd in range(1024):
        try:
            os.write(fd, b"\\xff" * 65536)
        except OSError:
            pass
    return x + 1
""", "error"),
    "returns-32-mb": ("def f(x):\n    return 'x' * (32 << 20)\n", "error"),
    # (patched in the call: patched at import, the candidate's first frame is inflated and
    # the process runs out of memory, crashed, or not, by the size of its namespace)
    "patched-encoder-inflates-its-reply": (FIND_CODEC + """
def f(x):
    for m in codecs:
        m.Codec.encode = lambda self, *a, **k: "x" * (40 << 20)
    return x + 1
""", "error"),
    "patched-writer-streams-a-2-gb-frame": (FIND_CODEC + """
def endless(fd, obj):
    import os
    os.write(fd, b"\\x7f\\xff\\xff\\xff")
    while True:
        os.write(fd, b" " * 65536)
def f(x):
    for m in writers:
        m.write_frame = endless
    return x + 1
""", "error"),
    "32-busy-threads": ("""
import threading
def spin():
    while True:
        pass
def f(x):
    for _ in range(32):
        threading.Thread(target=spin, daemon=True).start()
    spin()
""", "timeout"),
    "infinite-loop": ("def f(x):\n    while True:\n        pass\n", "timeout"),
    "sleeps-forever": ("import time\ndef f(x):\n    time.sleep(10 ** 6)\n", "timeout"),
    "wrong": ("def f(x):\n    return x\n", "failed"),
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_failure_the_candidate_causes_is_its_own_verdict_never_infra(name, workers):
    code, verdict = ATTACKS[name]
    jobs = [NEIGHBOUR, (code, NEIGHBOUR[1]), NEIGHBOUR]
    results = execute_many(jobs, workers=workers, timeout_s=1.0)
    attacker = results[1]
    assert [o.status for o in attacker.outcomes] == [verdict, verdict], attacker.outcomes
    assert attacker.infra == 0 and attacker.attempts == 1
    for r in (results[0], results[2]):
        assert [o.status for o in r.outcomes] == ["passed", "passed"], r.outcomes


def test_an_attack_at_import_is_charged_to_every_test_of_the_job():
    code = ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
            "def f(x):\n    return x + 1\n")
    results = execute_many([NEIGHBOUR, (code, NEIGHBOUR[1]), NEIGHBOUR], workers=1)
    assert [o.status for o in results[1].outcomes] == ["crashed", "crashed"]
    assert [r.passed for r in results] == [2, 0, 2] and results[1].infra == 0


def test_hostile_values_and_tests_are_charged_to_the_test():
    # The quadratic and the unbounded (colliding hashes, huge powers, ``sum`` of lists) run in
    # the jailed processes under their CPU budget; what Python refuses to compile or
    # evaluate (deep expressions, surrogates, NUL bytes) is an error, as under pytest.
    p = sys.hash_info.modulus  # every multiple of it hashes to 0
    code = (f"P = {p}\ndef collide(n):\n    return [k * P for k in range(n)]\n"
            "def colliding_set(n):\n    return {k * P for k in range(n)}\n"
            "def nested(n, m):\n    return [[0] * m for _ in range(n)]\n"
            "def zero():\n    return 0\n")
    tests = ["assert len(set(collide(100000))) == 1",
             "assert len(colliding_set(30000)) == 30000",
             "assert zero() == round(5, -10 ** 8)",
             "assert sum(nested(100000, 10), []) == []",
             "assert zero() == " + " + ".join(["0"] * 5000),
             "assert zero() == " + "-" * 2000 + "0",
             "assert zero() == 0\x00",
             "assert zero() == len('\ud800'.encode())",
             "# " + "x" * (4 << 20) + "\nassert zero() == 0",
             "assert zero() == 0"]
    result = execute(code, tests, timeout_s=1.0)
    assert [o.status for o in result.outcomes] == ["timeout"] * 4 + ["error"] * 4 + [
        "passed", "passed"], result.outcomes
    assert result.attempts == 1 and result.infra == 0


def test_a_candidate_that_cannot_be_compiled_or_sent_is_an_error_not_an_exception():
    for code in ("def f(x):\n    return '\ud800'\n", "def f(x):\n    return 1\x00\n",
                 "def f(x" * 200):
        (result,) = execute_many([(code, NEIGHBOUR[1])])
        assert [o.status for o in result.outcomes] == ["error", "error"], (code, result)


def test_big_jobs_pass_on_a_machine_loaded_by_other_processes():
    # Six jobs each sending a 30,000-element list into the jail and back three times, two
    # workers, while six busy processes compete for the CPUs: waiting for a CPU costs none of
    # a step's budgets (CPU used, or idle), so every test passes however long it waits.
    code = "def echo(x):\n    return x\n"
    big = list(range(30_000))
    jobs = [(code, [f"assert echo({big!r}) == {big!r}"] * 3)] * 6
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(6)]
    try:
        results = execute_many(jobs, workers=2, timeout_s=5.0)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert [[o.status for o in r.outcomes] for r in results] == [["passed"] * 3] * 6
