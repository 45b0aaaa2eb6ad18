"""The jail's pid 1 and every other process a candidate can see: none holds a host pipe or
another job's data where the candidate can reach it, and none can be signalled, reniced,
re-limited or re-pinned by it. Each attack sits in a function a test calls, so the jailed
candidate process really runs it."""

from __future__ import annotations

import secrets

import pytest

from sandbox import Sandbox, execute

SYSCALL = """
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
# a valid siginfo_t for SIGSTOP sent with SI_QUEUE (what an unprivileged sender may queue)
INFO = ctypes.create_string_buffer(struct.pack("iii", 19, 0, -1) + bytes(116))
info = ctypes.addressof(INFO)
def sys_(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
"""

PROBE = """
import os
def reachable(paths, read=0):
    # the paths that open (and, with read, read that many bytes) without an OSError
    reached = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                if read:
                    fh.read(read)
            reached.append(path)
        except OSError:
            pass
    return reached
"""


def passes_in_the_jail(code: str, test: str) -> None:
    """``test`` passes against ``code`` in the sandbox (the attacks' host-side verdict)."""
    result = execute(code, [test])
    assert result.outcomes[0].status == "passed", result.outcomes[0]


def test_pid_1_is_the_undumpable_worker_not_an_unfiltered_init():
    # Where the candidate's /proc is the jail's, its pid 1 is the worker, whose files must
    # not open. Where the candidate mounted the /proc of its own pid namespace (see
    # test_sandbox_redteam_neighbours), pid 1 there is the candidate itself and the worker
    # is not listed at all.
    passes_in_the_jail(PROBE + """
def probe():
    if os.readlink("/proc/self") == "1":
        return "pid 1 is itself"
    return reachable([f"/proc/1/{what}" for what in ("fd/0", "fd/1", "fd/2", "mem", "environ",
                                                     "maps", "stack", "syscall")], read=64)
""", "assert probe() in ([], 'pid 1 is itself')")


def test_no_visible_process_exposes_a_pipe_or_memory_to_the_candidate():
    passes_in_the_jail(PROBE + """
def probe():
    # (its own pid as /proc names it: the candidate is pid 1 of a pid namespace of its own,
    # and /proc may be the jail's, where it has another number)
    me = os.readlink("/proc/self")
    others = [p for p in os.listdir("/proc") if p.isdigit() and p != me]
    return reachable([f"/proc/{pid}/{what}" for pid in others
                      for what in ("fd/0", "fd/1", "fd/3", "mem", "environ")])
""", "assert probe() == []")


def test_a_candidate_cannot_read_the_next_queued_job():
    # One worker, so the victim job is queued behind the attacker on the same jail: a slow
    # first job lets both reach the queue, so the pool sends the victim to the worker's
    # pipe while the attacker runs. The attacker greps everything it can open for the
    # victim's secret; the victim holds it in its code, its test and its expected value.
    secret = secrets.token_hex(12)
    attacker = """
import os
def steal(secret_len):
    found = []
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        for what in ("fd/0", "fd/1", "cmdline", "environ", "mem"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as fh:
                    os.set_blocking(fh.fileno(), False)
                    data = fh.read(1 << 20) or b""
            except (OSError, TypeError):
                continue
            found.append(data)
    return [d.hex() for d in found if b"SECRET-" in d]
"""
    victim = f"def answer():\n    return 'SECRET-{secret}'\n"
    with Sandbox(workers=1) as box:
        results = box.execute_many([
            ("import time\ndef slow():\n    time.sleep(0.5)\n    return 1\n",
             ["assert slow() == 1"]),
            (attacker, ["assert steal(24) == []"]),
            (victim, [f"assert answer() == 'SECRET-{secret}'"]),
        ])
    assert results[1].outcomes[0].status == "passed", results[1].outcomes[0]
    assert results[2].outcomes[0].status == "passed", results[2].outcomes[0]


@pytest.mark.parametrize("call", [
    "sys_(129, target, 19, info)",        # rt_sigqueueinfo(pid, SIGSTOP, info)
    "sys_(297, target, target, 19, info)",  # rt_tgsigqueueinfo
    "sys_(62, target, 19)",               # kill
    "sys_(62, -1, 19)",                   # kill every process it may signal
    "sys_(62, 0, 19)",                    # kill its process group (the worker's, but for setsid)
    "sys_(200, target, 19)",              # tkill
    "sys_(234, target, target, 19)",      # tgkill
    "sys_(302, target, 7, 0, 0)",         # prlimit64(pid, RLIMIT_NOFILE, NULL, NULL): reads too
    "sys_(141, 0, target, 19)",           # setpriority(PRIO_PROCESS, pid, 19)
    "sys_(141, 1, 0, 19)",                # setpriority(PRIO_PGRP, 0, 19)
    "sys_(141, 2, 0, 19)",                # setpriority(PRIO_USER, 0, 19)
    "sys_(203, target, 8, ctypes.addressof(ctypes.c_ulong(1)))",  # sched_setaffinity
    "sys_(144, target, 0, ctypes.addressof(ctypes.c_int(0)))",    # sched_setscheduler
    "sys_(142, target, ctypes.addressof(ctypes.c_int(0)))",       # sched_setparam
    "sys_(251, 1, target, 0)",            # ioprio_set(IOPRIO_WHO_PROCESS, pid, 0)
    "sys_(434, target, 0)",               # pidfd_open
    "sys_(256, target, 8, 0, 0)",         # migrate_pages
])
def test_syscalls_aimed_at_other_processes_are_denied(call):
    # The targets are every other pid /proc lists (the worker, the fork servers, the pair
    # forked for the next session, where /proc is the jail's) and every small pid, listed or
    # not (in its own pid namespace, pid 1 is the candidate itself and no other pid names a
    # process): EPERM (1) for each one, whether or not a process has that number.
    code = SYSCALL + f"""
def attack():
    errors = set()
    listed = {{int(p) for p in os.listdir("/proc") if p.isdigit()}}
    for target in sorted((listed | set(range(1, 64))) - {{os.getpid()}}):
        errors.add({call})
    return sorted(errors)
"""
    passes_in_the_jail(code, "assert attack() == [1]")


def test_the_same_calls_on_itself_still_work():
    code = SYSCALL + """
import resource
def own():
    me = os.getpid()
    # only ever raised: lowering one's nice below where it started needs a privilege, so a
    # suite run under `nice` would see EACCES for a reason that has nothing to do with the jail
    nicer = min(os.getpriority(os.PRIO_PROCESS, 0) + 1, 19)
    os.setpriority(os.PRIO_PROCESS, 0, nicer)
    os.sched_setaffinity(0, os.sched_getaffinity(0))
    resource.prlimit(me, resource.RLIMIT_NOFILE)
    return [sys_(141, 0, me, min(nicer + 1, 19)), sys_(302, 0, 7, 0, 0)]
"""
    passes_in_the_jail(code, "assert own() == [0, 0]")


def test_a_candidate_cannot_stall_the_next_job():
    # The attacker tries every signal path at every pid with SIGSTOP; the next job on the same
    # worker must run normally and not time out.
    attacker = SYSCALL + """
def sabotage():
    for target in range(1, 400):
        if target != os.getpid():
            sys_(129, target, 19, info); sys_(62, target, 19); sys_(200, target, 19)
            sys_(297, target, target, 19, info); sys_(141, 0, target, 19)
    return True
"""
    with Sandbox(workers=1) as box:
        results = box.execute_many(
            [(attacker, ["assert sabotage()"])]
            + [("def f():\n    return 1\n", ["assert f() == 1", "def test_x():\n"
                                              "    assert f() == 1\n"])] * 3,
            timeout_s=2.0)
    assert results[0].outcomes[0].status == "passed", results[0].outcomes[0]
    for r in results[1:]:
        assert [o.status for o in r.outcomes] == ["passed", "passed"], r.outcomes
