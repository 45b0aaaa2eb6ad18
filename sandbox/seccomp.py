"""A seccomp-BPF filter for processes that run untrusted code (candidate or test code).

Built by hand (no libseccomp binding is installed) and loaded with ``prctl`` through ctypes.
It denies, with ``EPERM``:

- new programs and processes: ``execve``/``execveat``, ``fork``/``vfork``, and ``clone``
  without ``CLONE_THREAD`` (threads still work; ``clone3`` answers ``ENOSYS`` so libc falls
  back to ``clone``, whose flags a filter can read);
- acting on any process but itself. Every syscall that takes a target pid is allowed only
  for itself: ``kill``, ``rt_sigqueueinfo``, ``prlimit64``, ``sched_set{param,scheduler,
  affinity,attr}``, ``migrate_pages`` and ``move_pages`` need the target 0 or its own pid;
  ``tgkill``/``rt_tgsigqueueinfo`` its own thread group; ``setpriority``/``ioprio_set`` a
  process target (not a group or user) that is 0 or itself. ``tkill``, ``pidfd_open``,
  ``pidfd_send_signal``, ``process_madvise`` and ``process_mrelease`` are denied outright (a
  candidate that SIGSTOPs, renices or lowers the limits of the next job's pre-forked child
  sabotages its group's relative reward);
- reaching into other processes: ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``;
- sockets (no network even where namespaces are unavailable), namespaces, mounts, io_uring,
  bpf, perf, keyrings, module loading.

Why a deny-list: an allow-list for CPython depends on the glibc, the kernel and the
interpreter's own version (each release adds syscalls such as ``rseq`` or ``clone3``), and an
allowed set that misses one turns correct candidate code into ``EPERM`` failures, i.e. wrong
verdicts. The families that matter are closed instead: no new processes or programs, no
process but itself as a target, no namespace, mount, key, BPF or perf interfaces.

x86_64 only; elsewhere ``install`` returns False and the caller records the weaker isolation.
This file is stdlib-only and self-contained: the jail worker runs it from source.
"""

from __future__ import annotations

import ctypes
import platform
import struct

_ARCH_X86_64 = 0xC000003E
_RET_ALLOW = 0x7FFF0000
_RET_KILL = 0x80000000
_EPERM = 0x00050000 | 1
_ENOSYS = 0x00050000 | 38
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_CLONE_THREAD = 0x00010000

# x86_64 syscall numbers denied outright.
_DENY = {
    59: "execve", 322: "execveat", 57: "fork", 58: "vfork", 101: "ptrace",
    310: "process_vm_readv", 311: "process_vm_writev", 438: "pidfd_getfd",
    424: "pidfd_send_signal", 434: "pidfd_open", 440: "process_madvise",
    448: "process_mrelease", 200: "tkill", 41: "socket", 53: "socketpair",
    272: "unshare", 308: "setns", 165: "mount", 166: "umount2", 155: "pivot_root",
    161: "chroot", 425: "io_uring_setup", 426: "io_uring_enter", 427: "io_uring_register",
    321: "bpf", 298: "perf_event_open", 323: "userfaultfd", 248: "add_key",
    249: "request_key", 250: "keyctl", 175: "init_module", 313: "finit_module",
    176: "delete_module", 246: "kexec_load", 304: "open_by_handle_at", 312: "kcmp",
    163: "acct", 169: "reboot", 167: "swapon", 168: "swapoff", 135: "personality",
}
_CLONE, _CLONE3 = 56, 435
# Syscalls whose first argument is a target pid: allowed for 0 (the caller) or its own pid.
_SELF_OR_ZERO = {62: "kill", 129: "rt_sigqueueinfo", 302: "prlimit64", 142: "sched_setparam",
                 144: "sched_setscheduler", 203: "sched_setaffinity", 314: "sched_setattr",
                 256: "migrate_pages", 279: "move_pages"}
# First argument a thread group id: allowed only for its own.
_SELF_ONLY = {234: "tgkill", 297: "rt_tgsigqueueinfo"}
# (which, who, ...): allowed only for which == the "one process" value and who in {0, self}.
_WHICH_WHO = {141: ("setpriority", 0), 251: ("ioprio_set", 1)}  # PRIO_PROCESS, IOPRIO_WHO_PROCESS


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build_filter(self_pid: int) -> bytes:
    """The BPF program (struct sock_filter array) for a process whose pid is ``self_pid``."""
    arg0 = 16  # offsetof(struct seccomp_data, args[0]); low 32 bits on little-endian
    prog = [
        _ins(_LD_W_ABS, 0, 0, 4),                 # A = arch
        _ins(_JEQ, 1, 0, _ARCH_X86_64),
        _ins(_RET, 0, 0, _RET_KILL),              # foreign ABI: kill
        _ins(_LD_W_ABS, 0, 0, 0),                 # A = syscall number
        _ins(_JGE, 0, 1, 0x40000000),             # x32 ABI numbers
        _ins(_RET, 0, 0, _EPERM),
    ]
    for nr in _DENY:
        prog += [_ins(_JEQ, 0, 1, nr), _ins(_RET, 0, 0, _EPERM)]
    prog += [_ins(_JEQ, 0, 1, _CLONE3), _ins(_RET, 0, 0, _ENOSYS)]
    for nr in _SELF_OR_ZERO:  # nr(pid, ...): only 0 or itself
        prog += [_ins(_JEQ, 0, 5, nr), _ins(_LD_W_ABS, 0, 0, arg0),
                 _ins(_JEQ, 2, 0, 0), _ins(_JEQ, 1, 0, self_pid),
                 _ins(_RET, 0, 0, _EPERM), _ins(_RET, 0, 0, _RET_ALLOW)]
    for nr in _SELF_ONLY:  # nr(tgid, tid, ...): only its own threads
        prog += [_ins(_JEQ, 0, 4, nr), _ins(_LD_W_ABS, 0, 0, arg0),
                 _ins(_JEQ, 1, 0, self_pid), _ins(_RET, 0, 0, _EPERM),
                 _ins(_RET, 0, 0, _RET_ALLOW)]
    for nr, (_, which) in _WHICH_WHO.items():  # nr(which, who, ...): one process, 0 or itself
        prog += [_ins(_JEQ, 0, 7, nr), _ins(_LD_W_ABS, 0, 0, arg0),
                 _ins(_JEQ, 0, 3, which), _ins(_LD_W_ABS, 0, 0, arg0 + 8),
                 _ins(_JEQ, 2, 0, 0), _ins(_JEQ, 1, 0, self_pid),
                 _ins(_RET, 0, 0, _EPERM), _ins(_RET, 0, 0, _RET_ALLOW)]
    prog += [  # clone(flags, ...): threads only
        _ins(_JEQ, 0, 4, _CLONE), _ins(_LD_W_ABS, 0, 0, arg0),
        _ins(_JSET, 0, 1, _CLONE_THREAD), _ins(_RET, 0, 0, _RET_ALLOW),
        _ins(_RET, 0, 0, _EPERM)]
    prog.append(_ins(_RET, 0, 0, _RET_ALLOW))
    return b"".join(prog)


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() == "x86_64"


_prepared: dict = {}


def prepare() -> None:
    """Build the ctypes objects once (in the fork server), so each child only patches its pid
    into the program and calls prctl: cheaper, and fewer pages touched after fork."""
    if _prepared or not supported():
        return
    code = build_filter(0)
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    # The two instructions that compare with the process's own pid (kill and tgkill rules).
    marker = build_filter(0x7FFFFFFF)
    slots = [i for i in range(0, len(code), 8) if code[i:i + 8] != marker[i:i + 8]]
    prog = SockFprog(len(code) // 8, ctypes.addressof(buf))
    # Resolve prctl and the pointer here: a child that looks them up itself touches (and so
    # copies) dozens more of the fork server's pages.
    _prepared.update(buf=buf, prog=prog, prog_ref=ctypes.byref(prog), slots=slots,
                     prctl=ctypes.CDLL(None, use_errno=True).prctl)


def install(self_pid: int) -> bool:
    """Load the filter into the calling process (irrevocably). False where unsupported."""
    if not supported():
        return False
    prepare()
    buf = _prepared["buf"]
    for offset in _prepared["slots"]:
        struct.pack_into("I", buf, offset + 4, self_pid)  # the k field of sock_filter
    prctl = _prepared["prctl"]
    if prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        return False
    return prctl(22, 2, _prepared["prog_ref"], 0, 0) == 0  # SECCOMP_MODE_FILTER


def set_undumpable() -> bool:
    """PR_SET_DUMPABLE 0: same-uid processes can no longer open our /proc/<pid>/{mem,fd}."""
    try:
        return ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl (macOS)
        return False
