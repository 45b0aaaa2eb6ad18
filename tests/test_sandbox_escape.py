"""Escape attempts: each candidate tries to reach outside its jail; each test checks that the
attempt had no effect outside and did not earn a pass. Every attack sits in a function the
test calls, so the jailed candidate process really runs it."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from sandbox import execute

REPO = Path(__file__).resolve().parent.parent


def test_cannot_write_or_delete_files_outside_its_tmp(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.chmod(tmp_path, 0o777)
    os.chmod(victim, 0o666)  # even world-writable files on the host must be out of reach
    target = REPO / f"planted-{uuid.uuid4().hex}.py"
    code = f"""
import os
def attack():
    done = []
    for path in ({str(target)!r}, {str(victim)!r}, "/etc/planted", "/usr/lib/planted"):
        try:
            with open(path, "w") as fh:
                fh.write("pwned")
            done.append(path)
        except OSError:
            pass
    for path in ({str(victim)!r}, "/etc/hostname", {str(REPO / "pyproject.toml")!r}):
        try:
            os.remove(path)
            done.append("rm " + path)
        except OSError:
            pass
    return done
"""
    result = execute(code, ["assert attack() == []"])
    assert result.outcomes[0].status == "passed", result.outcomes[0]
    assert victim.read_text() == "keep me"
    assert not target.exists()
    assert (REPO / "pyproject.toml").exists()


def test_private_tmp_is_writable_but_not_the_hosts(tmp_path):
    name = f"sandbox-probe-{uuid.uuid4().hex}"
    code = f"""
def attack():
    with open("/tmp/{name}", "w") as fh:
        fh.write("x")
    return open("/tmp/{name}").read()
"""
    result = execute(code, ["assert attack() == 'x'"])
    assert result.outcomes[0].status == "passed", result.outcomes[0]  # its own tmp works
    assert not Path(f"/tmp/{name}").exists()
    # ... and nothing it left is visible to the next job
    later = execute("import os\ndef look():\n    return os.listdir('/tmp')\n",
                    ["assert look() == []"])
    assert later.outcomes[0].status == "passed", later.outcomes[0]


@pytest.mark.parametrize("attack", [
    "subprocess.run(['/bin/sh', '-c', 'echo > /tmp/spawned'])",
    "subprocess.run([sys.executable, '-c', 'open(\\'/tmp/spawned\\', \\'w\\')'])",
    "os.system('echo > /tmp/spawned')",
    "os.execv(sys.executable, [sys.executable, '-c', 'open(\\'/tmp/spawned\\', \\'w\\')'])",
    "open('/tmp/spawned', 'w') if os.fork() == 0 else os.wait()",
])
def test_cannot_spawn_shells_or_subprocesses(attack):
    # The spawned program would leave /tmp/spawned; the check runs after every attempt.
    code = f"""
import os, subprocess, sys, time
def attack():
    try:
        {attack}
    except OSError:
        pass
    time.sleep(0.05)
    return os.path.exists("/tmp/spawned")
"""
    result = execute(code, ["assert attack() is False"])
    assert result.outcomes[0].status == "passed", result.outcomes[0]
    control = execute(code.replace(attack, "open('/tmp/spawned', 'w')"),
                      ["assert attack() is False"])
    assert control.outcomes[0].status == "failed"  # the probe does see a file when one exists


def test_cannot_kill_its_parent_or_process_group():
    # Every target but itself: its parent, pid 1 and 2, every process (-1), its process group
    # (0, and killpg of whatever group it can name). In its own pid namespace the candidate
    # is pid 1 and its parent is pid 0 (outside), so ``getppid()`` is the group too.
    code = """
import os, signal
def attack():
    hits = []
    for pid in {os.getppid(), 0, 1, 2, -1} - {os.getpid()}:
        try:
            os.kill(pid, signal.SIGKILL)
            hits.append(pid)
        except OSError:
            pass
    for group in {os.getpgid(0), os.getpgid(os.getppid()), 1, 2}:
        try:
            os.killpg(group, signal.SIGKILL)
            hits.append(f"pg {group}")
        except OSError:
            pass
    return hits
"""
    tests = ["assert attack() == []", "assert 1 + 1 == 2"]
    result = execute(code, tests)
    assert [o.status for o in result.outcomes] == ["passed", "passed"], result.outcomes
    assert result.attempts == 1  # its worker was not hurt (a dead one runs the job again)
    # the harness survived: it still runs jobs
    assert execute("def f():\n    return 1\n", ["assert f() == 1"]).passed == 1


def test_leaves_no_daemons_behind():
    marker = f"daemon-{uuid.uuid4().hex}"
    code = f"""
import os, time
def attack():
    try:
        if os.fork() == 0:
            os.setsid()
            time.sleep(30)  # {marker}
            os._exit(0)
    except OSError:
        return "fork denied"
    return "forked"
"""
    result = execute(code, ["assert attack() == 'fork denied'"])
    assert result.outcomes[0].status == "passed", result.outcomes[0]
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert marker not in ps


def test_signals_to_the_harness_do_not_reach_it():
    # kill(0, SIGKILL) would kill the caller's whole process group, the worker's: it is
    # refused (PermissionError, an error of that test), and the next test still runs.
    # SIGKILL to itself kills the candidate as it would outside the jail: crashed.
    code = ("import os, signal\ndef boom():\n    os.kill(0, signal.SIGKILL)\n"
            "def suicide():\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    result = execute(code, ["assert boom() is None", "assert 2 > 1", "assert suicide() is None",
                            "assert 3 > 1"])
    assert [o.status for o in result.outcomes] == ["error", "passed", "crashed", "passed"], \
        result.outcomes
    assert "PermissionError" in result.outcomes[0].message
    assert result.attempts == 1
