"""Resource attacks: each one must cost only its own test (recorded as timeout/crash/error)
and leave the next test of the same job, and the next job, unaffected."""

from __future__ import annotations

import pytest

from sandbox import Limits, Sandbox, execute

GOOD = "def ok():\n    return 42\n"
AFTER = "assert ok() == 42"  # a test after the attack, which must still pass


def run_attack(attack_body: str, timeout_s: float = 1.0):
    """The attack inside ``attack()``, then an honest test, in one job; asserts what every
    attack must leave intact: the honest test passed, and the job ran once (a worker that
    died or hung would have had it run again, alone: ``attempts == 2``). The attack's own
    outcome, ``result.outcomes[0]``, is the caller's to judge. No wall-clock bound is
    asserted: the machine is shared, and the budgets that decide are CPU and idle seconds."""
    code = GOOD + "def attack():\n" + "\n".join("    " + line for line in
                                               attack_body.strip().splitlines()) + "\n"
    result = execute(code, ["assert attack() == 1", AFTER], timeout_s=timeout_s)
    assert [o.status for o in result.outcomes[1:]] == ["passed"], result.outcomes
    assert result.attempts == 1, result
    return result


@pytest.mark.parametrize("body", [
    "while True:\n    pass",
    "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGXCPU):\n"
    "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    try:\n        pass\n"
    "    except BaseException:\n        pass",
    "import time\ntime.sleep(3600)",
])
def test_infinite_loops_time_out_without_costing_other_tests(body):
    result = run_attack(body, timeout_s=0.5)
    assert result.outcomes[0].status == "timeout", result.outcomes


def test_memory_bomb_is_capped():
    result = run_attack("x = bytearray(8 << 30)\nreturn 1")
    assert result.outcomes[0].status in ("error", "crashed"), result.outcomes
    assert "MemoryError" in result.outcomes[0].message or result.outcomes[0].status == "crashed"


def test_growing_memory_bomb_is_capped():
    result = run_attack("chunks = []\nwhile True:\n    chunks.append(bytearray(64 << 20))",
                        timeout_s=3.0)
    assert result.outcomes[0].status in ("error", "crashed"), result.outcomes


def test_fork_bomb_is_stopped():
    result = run_attack("import os\nwhile True:\n    os.fork()")
    assert result.outcomes[0].status == "error", result.outcomes  # PermissionError


def test_threads_bomb_is_bounded():
    body = ("import threading, time\nts = []\nfor _ in range(10000):\n"
            "    t = threading.Thread(target=time.sleep, args=(60,))\n    t.start()\n"
            "    ts.append(t)\nreturn 1")
    result = run_attack(body, timeout_s=2.0)
    assert result.outcomes[0].status != "passed"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_gigabytes_of_output_are_capped(stream):
    body = (f"import sys\nfor _ in range(1 << 15):\n    sys.{stream}.write('x' * (1 << 15))\n"
            "return 1")
    result = run_attack(body, timeout_s=1.0)
    # 1 GiB cannot be written in the time limit; whatever was, at most the cap comes back
    assert result.outcomes[0].status in ("timeout", "passed"), result.outcomes
    assert len(result.output) <= 65536


def test_filling_the_disk_is_bounded():
    body = ("i = 0\ntry:\n    while True:\n        with open(f'/tmp/f{i}', 'wb') as fh:\n"
            "            fh.write(b'x' * (8 << 20))\n        i += 1\nexcept OSError:\n"
            "    return 1\nreturn 0")
    result = run_attack(body, timeout_s=3.0)
    assert result.outcomes[0].status == "passed", result.outcomes


def test_one_huge_file_hits_the_file_size_limit():
    body = ("with open('/tmp/big', 'wb') as fh:\n    for _ in range(1024):\n"
            "        fh.write(b'x' * (1 << 20))\n        fh.flush()\nreturn 0")
    result = run_attack(body, timeout_s=3.0)
    assert result.outcomes[0].status == "error", result.outcomes
    assert "File too large" in result.outcomes[0].message  # RLIMIT_FSIZE, before tmpfs fills


def test_c_stack_overflow_crashes_only_its_test():
    body = ("import sys\nsys.setrecursionlimit(10 ** 8)\n"
            "def g(n):\n    return list(map(g, [n]))\nreturn g(0)")
    result = run_attack(body, timeout_s=3.0)
    assert result.outcomes[0].status in ("crashed", "error"), result.outcomes


def test_blocking_on_stdin_does_not_hang():
    result = run_attack("import sys\nreturn len(sys.stdin.read()) + input()")
    assert result.outcomes[0].status == "error"  # EOF at once: stdin is /dev/null


def test_children_holding_pipes_do_not_hang_the_harness():
    # The classic: a child keeps stdout open after its parent is gone. Forking is denied
    # here, and threads die with the process; the test ends on time either way.
    body = ("import os, threading, time\ntry:\n    if os.fork() == 0:\n        time.sleep(60)\n"
            "except OSError:\n    pass\nthreading.Thread(target=time.sleep, args=(60,),"
            " daemon=False).start()\nreturn 1")
    result = run_attack(body, timeout_s=1.0)
    assert result.outcomes[0].status == "passed", result.outcomes


def test_module_level_hang_times_out_all_tests_at_once():
    # The candidate's import is one step for the whole job: its timeout is every test's,
    # and it is not tried again once per test.
    result = execute("while True:\n    pass\n", ["assert 1", "assert 2", "assert 3"],
                     timeout_s=0.5)
    assert [o.status for o in result.outcomes] == ["timeout"] * 3
    assert all("did not finish importing" in o.message for o in result.outcomes)
    assert result.attempts == 1


def test_huge_return_values_are_refused_not_fatal():
    code = GOOD + "def big(n):\n    return 'x' * n\n"
    tests = ["assert big(20 << 20) == ''", "assert big(5 << 20) == ''", AFTER]
    result = execute(code, tests, Limits(timeout_s=3.0, memory_mb=1024))
    assert [o.status for o in result.outcomes] == ["error", "failed", "passed"], result.outcomes
    assert "more than 16 MB" in result.outcomes[0].message  # a frame's bound, not a crash


def test_a_flood_of_files_does_not_reach_the_next_job():
    flood = ("import os\ndef flood():\n    for i in range(20000):\n"
             "        open(f'/tmp/f{i}', 'w').close()\n    return len(os.listdir('/tmp'))\n")
    look = "import os\ndef look():\n    return os.listdir('/tmp')\n"
    with Sandbox(workers=1) as box:  # one worker: the next job surely lands where files were
        result = box.execute(flood, ["assert flood() == 1"], timeout_s=5.0)
        assert "assert 20000 == 1" in result.outcomes[0].message  # the files were made
        later = box.execute(look, ["assert look() == []"])
        assert later.outcomes[0].status == "passed", later.outcomes
