"""Red team, side three: a candidate against its neighbours. Jobs of the same batch share a
worker (one after another, ``workers=1``) or the machine (``workers=2``); a candidate that
tries to signal, trace or find other processes must reach none of them: the neighbours keep
their verdicts, the worker survives (no job runs twice), and the attacker gets exactly the
verdict its own code earns.

Each candidate is the init of a pid namespace of its own (``jailside.forkserver``), so no pid
it can name is another process; seccomp refuses the syscalls that take a target anyway
(``jailside.seccomp``), and the file-owner signals (``F_SETOWN``...) outright.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sandbox import execute, execute_many, jail

GOOD = ("def f(x):\n    return x + 1\n",
        ["assert f(1) == 2", "def test_b():\n    assert f(2) == 3\n"])

FCNTL = r'''
import fcntl, os, signal, struct

F_SETSIG, F_SETOWN_EX = 10, 15
F_OWNER_TID, F_OWNER_PID = 0, 1
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902


def attempts(targets):
    """Every way to have the kernel signal a pid through the owner of a pipe (O_ASYNC:
    SIGIO, or with F_SETSIG any signal, SIGKILL here, when the pipe becomes readable); the
    ways that were accepted. Each accepted owner is triggered at once."""
    r, w = os.pipe()
    fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC | os.O_NONBLOCK)
    accepted = []

    def attempt(what, fn):
        try:
            fn()
            accepted.append(what)
        except OSError:
            pass
        os.write(w, b"x")
        os.read(r, 1)

    attempt("F_SETSIG", lambda: fcntl.fcntl(r, F_SETSIG, signal.SIGKILL))
    for pid in targets:
        attempt(f"F_SETOWN {pid}", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, pid))
        attempt(f"F_SETOWN -{pid}", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, -pid))
        for kind in (F_OWNER_TID, F_OWNER_PID):
            attempt(f"F_SETOWN_EX {kind} {pid}",
                    lambda: fcntl.fcntl(r, F_SETOWN_EX, struct.pack("ii", kind, pid)))
        for req in (FIOSETOWN, SIOCSPGRP):
            attempt(f"ioctl {req:#x} {pid}", lambda: fcntl.ioctl(r, req, struct.pack("i", pid)))
    return accepted


def attack():
    me = os.getpid()
    return attempts([p for p in range(0, 200) if p != me])
'''

KILL_ALL = """
import os, signal
def attack():
    try:
        os.kill(-1, signal.SIGKILL)  # every process it may signal
    except OSError as exc:
        return type(exc).__name__
    return "sent"
"""
KILL_1 = """
import os, signal
def attack():
    os.kill(1, signal.SIGKILL)  # pid 1 of its own namespace is itself
    return "survived"
"""
PTRACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
PTRACE_ATTACH, PTRACE_SEIZE, PTRACE_TRACEME = 16, 0x4206, 0
def attack():
    attached = []
    if libc.ptrace(PTRACE_TRACEME, 0, None, None) == 0:
        attached.append("traceme")
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()] + list(range(1, 50))
    for pid in sorted(set(pids) - {os.getpid()}):
        for request in (PTRACE_ATTACH, PTRACE_SEIZE):
            if libc.ptrace(request, pid, None, None) == 0:
                attached.append((request, pid))
    return attached
"""
PROC = """
import os, signal
def attack():
    # every pid /proc lists, but itself: none is a process it can signal (signal 0 only
    # asks whether one exists and may be signalled). Itself has two numbers where /proc is
    # the jail's: the jail's (/proc/self) and its own namespace's (1, which in the jail's
    # numbering is the worker, a process it cannot name at all).
    me = {os.readlink("/proc/self"), str(os.getpid())}
    reached = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and pid not in me:
            try:
                os.kill(int(pid), 0)
                reached.append(pid)
            except OSError:
                pass
    return reached
"""
ATTACKS = {  # name: (code, test, the attacker's own verdict)
    "fcntl-owner-signals": (FCNTL, "assert attack() == []", "passed"),
    "kill-minus-1": (KILL_ALL, "assert attack() == 'PermissionError'", "passed"),
    "kill-1-is-itself": (KILL_1, "assert attack() == 'survived'", "crashed"),
    "ptrace": (PTRACE, "assert attack() == []", "passed"),
    "proc-pids": (PROC, "assert attack() == []", "passed"),
}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_attack_on_other_processes_reaches_no_neighbour(name, workers):
    code, test, own = ATTACKS[name]
    jobs = [GOOD, (code, [test, "assert 2 + 2 == 4"]), GOOD, GOOD, GOOD]
    results = execute_many(jobs, workers=workers, timeout_s=5.0)
    attacker = results[1]
    assert [o.status for o in attacker.outcomes] == [own, "passed"], attacker.outcomes
    for r in results[:1] + results[2:]:
        assert [o.status for o in r.outcomes] == ["passed", "passed"], r.outcomes
    assert [r.attempts for r in results] == [1] * len(jobs)  # no worker died on the way
    assert execute_many([GOOD], workers=workers)[0].passed == 2


def test_the_file_owner_attack_does_kill_a_process_outside_the_jail():
    # Control: the very attack above, run as a plain process against a victim it can name,
    # kills it; in the jail every way of it is refused (the test above).
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        code = FCNTL + f"\nprint(attempts([{victim.pid}]))\n"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=30)
        assert f"'F_SETOWN {victim.pid}'" in out.stdout, out.stderr
        assert victim.wait(timeout=10) == -9  # SIGKILL, through F_SETSIG + F_SETOWN
    finally:
        victim.kill()
        victim.wait()


def _bwrap_unprivileged() -> bool:
    """bubblewrap runs as an unprivileged user: then the jail's mount namespace belongs to
    its own user namespace, and a child may mount the /proc of its pid namespace. (A root
    caller whose Python is not world-readable runs bubblewrap as root, whose mount namespace
    is set up before its user namespace: the kernel then refuses a new /proc, see
    ``seccomp.own_proc``, and the candidate lists the jail's processes, none of which it
    can reach: test_an_attack_on_other_processes_reaches_no_neighbour[proc-pids].)"""
    return jail._bwrap_problem() is None and (os.geteuid() != 0
                                              or jail.bwrap_launch().user is not None)


def test_a_candidate_lists_only_itself_in_proc_where_the_kernel_allows():
    code = ("import os\ndef listed():\n"
            "    return sorted(p for p in os.listdir('/proc') if p.isdigit())\n"
            "def me():\n    return os.getpid(), os.getppid()\n")
    result = execute(code, ["assert me() == (1, 0)", "assert listed() == ['1']"])
    assert "+pidns" in result.isolation, result.isolation
    assert result.outcomes[0].status == "passed", result.outcomes  # pid 1, parent outside
    want = "passed" if _bwrap_unprivileged() else "failed"
    assert result.outcomes[1].status == want, result.outcomes


def test_stopping_every_pid_does_not_stall_the_next_job():
    # SIGSTOP at every pid it can name, by every syscall that takes one: the next job on the
    # same worker runs normally and is not re-run.
    attacker = """
import os, signal
def sabotage():
    for pid in range(-1, 400):
        if pid != os.getpid():
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
    return True
"""
    results = execute_many([(attacker, ["assert sabotage()"]), GOOD, GOOD], workers=1)
    assert [[o.status for o in r.outcomes] for r in results] == [["passed"]] + [
        ["passed", "passed"]] * 2
    assert [r.attempts for r in results] == [1, 1, 1]
