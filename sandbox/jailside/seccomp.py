"""A seccomp-BPF filter for processes that run untrusted code (candidate or test code).

Built by hand (no libseccomp binding is installed) and loaded with ``prctl`` through ctypes.
It denies, with ``EPERM``:

- new programs and processes: ``execve``/``execveat``, ``fork``/``vfork``, and ``clone``
  without ``CLONE_THREAD`` (threads still work; ``clone3`` answers ``ENOSYS`` so libc falls
  back to ``clone``, whose flags a filter can read);
- acting on any process but itself. Every syscall that takes a target pid is allowed only
  for itself: ``rt_sigqueueinfo``, ``prlimit64``, ``sched_set{param,scheduler,affinity,attr}``,
  ``migrate_pages`` and ``move_pages`` need the target 0 or its own pid; ``kill`` its own pid
  only (to ``kill``, 0 is the caller's whole process group, which is the worker's);
  ``tgkill``/``rt_tgsigqueueinfo`` its own thread group; ``setpriority``/``ioprio_set`` a
  process target (not a group or user) that is 0 or itself. ``tkill``, ``pidfd_open``,
  ``pidfd_send_signal``, ``process_madvise`` and ``process_mrelease`` are denied outright (a
  candidate that SIGSTOPs, renices or lowers the limits of the next job's pre-forked child
  sabotages its group's relative reward);
- signals by proxy: ``fcntl`` ``F_SETOWN``, ``F_SETOWN_EX`` and ``F_SETSIG`` and ``ioctl``
  ``FIOSETOWN``, ``SIOCSPGRP`` and ``TIOCSPGRP`` (a file's owner receives ``SIGIO`` or any chosen
  signal when the file becomes ready: with ``O_ASYNC`` on a pipe it writes to, a candidate
  could otherwise signal any pid it names);
- reaching into other processes: ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``;
- ``SIGKILL`` sent to itself (``kill``, ``tgkill``, ``rt_sigqueueinfo``,
  ``rt_tgsigqueueinfo``) kills the process at once, as it would outside the jail: a child is
  the init of its own pid namespace, and the kernel ignores every signal such a process sends
  itself that it has no handler for (``SIGKILL`` included), so without this rule a candidate
  that kills itself would go on running;
- sockets (no network even where namespaces are unavailable): ``socket``, and ``bind``,
  ``connect``, ``listen``, ``accept``/``accept4``, so no socket can be named, reach a name or
  take a connection. One kind stays: ``socketpair(AF_UNIX, SOCK_STREAM)``, two anonymous
  sockets joined to each other, which is what asyncio's event loop makes for its self-pipe
  (``asyncio.run`` needs it). It reaches no other process (fork is denied, and nothing can
  connect to an unnamed socket), and a connected stream socket refuses ``sendto``/``sendmsg``
  to any other address (``EISCONN``), which a filter could not check inside ``sendmsg``'s
  ``msghdr``; a datagram pair could send to any named socket, so ``SOCK_DGRAM`` (and any
  other family or type) is denied;
- namespaces, mounts, io_uring, bpf, perf, keyrings, module loading.

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
_LD_W_ABS, _JEQ, _JGE, _JSET, _AND, _RET = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
_CLONE_THREAD = 0x00010000

# x86_64 syscall numbers denied outright.
_DENY = {
    59: "execve", 322: "execveat", 57: "fork", 58: "vfork", 101: "ptrace",
    310: "process_vm_readv", 311: "process_vm_writev", 438: "pidfd_getfd",
    424: "pidfd_send_signal", 434: "pidfd_open", 440: "process_madvise",
    448: "process_mrelease", 200: "tkill", 41: "socket", 42: "connect", 43: "accept",
    288: "accept4", 49: "bind", 50: "listen",
    272: "unshare", 308: "setns", 165: "mount", 166: "umount2", 155: "pivot_root",
    161: "chroot", 425: "io_uring_setup", 426: "io_uring_enter", 427: "io_uring_register",
    321: "bpf", 298: "perf_event_open", 323: "userfaultfd", 248: "add_key",
    249: "request_key", 250: "keyctl", 175: "init_module", 313: "finit_module",
    176: "delete_module", 246: "kexec_load", 304: "open_by_handle_at", 312: "kcmp",
    163: "acct", 169: "reboot", 167: "swapon", 168: "swapoff", 135: "personality",
}
_CLONE, _CLONE3 = 56, 435
# socketpair(domain, type, ...): only AF_UNIX with SOCK_STREAM (type's low four bits; the
# SOCK_NONBLOCK and SOCK_CLOEXEC flags above them are free).
_SOCKETPAIR, _AF_UNIX, _SOCK_STREAM, _SOCK_TYPE_MASK = 53, 1, 1, 0xF
_SIGKILL = 9
# Syscalls whose first argument is a target pid: allowed for 0 (the caller) or its own pid.
_SELF_OR_ZERO = {302: "prlimit64", 142: "sched_setparam", 144: "sched_setscheduler",
                 203: "sched_setaffinity", 314: "sched_setattr", 256: "migrate_pages",
                 279: "move_pages"}
# Signal senders: the first argument a pid or thread group id, allowed only for its own (0
# is not "itself" to ``kill``: it is the caller's process group); the value is the index of
# the signal argument (SIGKILL to itself kills the process, see the module docstring).
_SIGNALS = {62: ("kill", 1), 129: ("rt_sigqueueinfo", 1), 234: ("tgkill", 2),
            297: ("rt_tgsigqueueinfo", 2)}
# (which, who, ...): allowed only for which == the "one process" value and who in {0, self}.
_WHICH_WHO = {141: ("setpriority", 0), 251: ("ioprio_set", 1)}  # PRIO_PROCESS, IOPRIO_WHO_PROCESS
# (fd, cmd, ...): commands that make the kernel signal a pid of the caller's choosing.
_DENY_CMDS = {72: ("fcntl", (8, 10, 15)),                   # F_SETOWN, F_SETSIG, F_SETOWN_EX
              16: ("ioctl", (0x8901, 0x8902, 0x5410))}       # FIOSETOWN, SIOCSPGRP, TIOCSPGRP


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
    for nr, (_, sig) in _SIGNALS.items():  # nr(pid, ..., sig, ...): only itself
        prog += [_ins(_JEQ, 0, 7, nr), _ins(_LD_W_ABS, 0, 0, arg0),
                 _ins(_JEQ, 1, 0, self_pid), _ins(_RET, 0, 0, _EPERM),
                 _ins(_LD_W_ABS, 0, 0, arg0 + 8 * sig), _ins(_JEQ, 0, 1, _SIGKILL),
                 _ins(_RET, 0, 0, _RET_KILL), _ins(_RET, 0, 0, _RET_ALLOW)]
    for nr, (_, which) in _WHICH_WHO.items():  # nr(which, who, ...): one process, 0 or itself
        prog += [_ins(_JEQ, 0, 7, nr), _ins(_LD_W_ABS, 0, 0, arg0),
                 _ins(_JEQ, 0, 3, which), _ins(_LD_W_ABS, 0, 0, arg0 + 8),
                 _ins(_JEQ, 2, 0, 0), _ins(_JEQ, 1, 0, self_pid),
                 _ins(_RET, 0, 0, _EPERM), _ins(_RET, 0, 0, _RET_ALLOW)]
    arg1 = arg0 + 8
    for nr, (_, cmds) in _DENY_CMDS.items():  # nr(fd, cmd, ...): never these commands
        prog += [_ins(_JEQ, 0, 2 + 2 * len(cmds), nr), _ins(_LD_W_ABS, 0, 0, arg1)]
        for cmd in cmds:
            prog += [_ins(_JEQ, 0, 1, cmd), _ins(_RET, 0, 0, _EPERM)]
        prog.append(_ins(_RET, 0, 0, _RET_ALLOW))
    prog += [  # socketpair(domain, type, ...): AF_UNIX stream only
        _ins(_JEQ, 0, 7, _SOCKETPAIR), _ins(_LD_W_ABS, 0, 0, arg0),
        _ins(_JEQ, 0, 3, _AF_UNIX), _ins(_LD_W_ABS, 0, 0, arg1),
        _ins(_AND, 0, 0, _SOCK_TYPE_MASK), _ins(_JEQ, 1, 0, _SOCK_STREAM),
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

    # The instructions that compare with the process's own pid (the rules above).
    marker = build_filter(0x7FFFFFFF)
    slots = [i for i in range(0, len(code), 8) if code[i:i + 8] != marker[i:i + 8]]
    prog = SockFprog(len(code) // 8, ctypes.addressof(buf))
    # Resolve prctl and the pointer here: a child that looks them up itself touches (and so
    # copies) dozens more of the fork server's pages.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    _prepared.update(buf=buf, prog=prog, prog_ref=ctypes.byref(prog), slots=slots,
                     prctl=libc.prctl, libc=libc)


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


def drop_capabilities() -> bool:
    """Clear every capability of the calling process (effective, permitted, inheritable; the
    ambient set follows). The jail's fork servers hold ``CAP_SYS_ADMIN`` inside the jail's own
    user namespace only to give each child a pid namespace; a child drops it before it reads
    its role. False if the kernel refused (the caller then must not run untrusted code)."""
    if not supported():
        return True
    header = struct.pack("Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)  # two zeroed {effective, permitted, inheritable} words
    libc = _prepared.get("libc") or ctypes.CDLL(None, use_errno=True)
    return libc.syscall(126, header, data) == 0  # capset


_CLONE_NEWPID, _CLONE_NEWNS, _CLONE_NEWIPC, _SIGCHLD = 0x20000000, 0x00020000, 0x08000000, 17
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18


def fork_in_new_pid_namespace() -> int:
    """``os.fork()``, except that the child is pid 1 of a pid namespace of its own: no pid
    it can name is another process, so no syscall, signal or file owner it sets up can reach
    one. It gets a mount namespace of its own too, where ``own_proc`` mounts the ``/proc`` of
    its pid namespace (in which it sees only itself), and an IPC namespace of its own: the
    System V and POSIX IPC objects it makes (shared memory, semaphores, message queues) are
    seen by no other process and die with it, so nothing of one session reaches a later one
    through them. Returns the child's pid in the caller's
    namespace (0 in the child), or -1 where the kernel refuses (no ``CAP_SYS_ADMIN`` here):
    the caller then forks plainly and says so.

    A raw ``clone`` rather than ``unshare``: after ``unshare(CLONE_NEWPID)`` a process can
    start only one namespace (its first child is that namespace's init, for good). CPython's
    own before/after-fork hooks run around it exactly as ``os.fork`` runs them."""
    if not supported():
        return -1
    libc = _prepared.get("libc") or ctypes.CDLL(None, use_errno=True)
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = libc.syscall(56, _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC | _SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        api.PyOS_AfterFork_Child()
    else:
        api.PyOS_AfterFork_Parent()
    return pid if pid >= 0 else -1


def own_proc() -> bool:
    """In a child of ``fork_in_new_pid_namespace`` (before it drops its capabilities): mount
    the ``/proc`` of its own pid namespace over the jail's, in its private mount namespace, so
    listing ``/proc`` shows only itself (the jail's ``/proc`` lists the worker, the fork
    servers and the other children; none of them can be reached, but none need be seen).
    Made private first, so nothing mounted here propagates to the jail. False where the
    kernel refuses (the child keeps the jail's ``/proc``)."""
    if not supported():
        return False
    libc = _prepared.get("libc") or ctypes.CDLL(None, use_errno=True)
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    return libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                      None) == 0
