"""System V IPC objects removed between sessions, where the children share the worker's IPC
namespace (no pid namespaces here: ``seccomp.fork_in_new_pid_namespace`` gives each child an
IPC namespace of its own otherwise, and its objects die with it).

Every shared memory segment, semaphore set and message queue listed in ``/proc/sysvipc`` is
removed (``IPC_RMID``): the worker runs as the same user as its children, who own them. A
segment still attached goes once its last user detaches, and the session's processes are
already killed. POSIX message queues cannot be listed without the ``mqueue`` file system;
POSIX shared memory lives in ``/dev/shm``, a scratch folder emptied with the others.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

import ctypes

_IPC_RMID = 0
_MAX_OBJECTS = 4096  # more than a session can make under its limits; bounds the walk
_libc: list = []


def _lib():
    if not _libc:
        _libc.append(ctypes.CDLL(None, use_errno=True))
    return _libc[0]


def ids(kind: str) -> list[int]:
    """Identifiers of the ``kind`` (``shm``, ``sem``, ``msg``) objects this namespace holds."""
    try:
        with open(f"/proc/sysvipc/{kind}", "rb") as fh:
            lines = fh.read().splitlines()[1: 1 + _MAX_OBJECTS]
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) > 1 and fields[1].isdigit():
            found.append(int(fields[1]))
    return found


def remove_all() -> int:
    """Remove every System V IPC object in sight; how many went."""
    libc = _lib()
    removed = 0
    for ident in ids("shm"):
        removed += libc.shmctl(ident, _IPC_RMID, None) == 0
    for ident in ids("sem"):
        removed += libc.semctl(ident, 0, _IPC_RMID) == 0
    for ident in ids("msg"):
        removed += libc.msgctl(ident, _IPC_RMID, None) == 0
    return removed
