"""Run untrusted generated code against (untrusted) tests, fast, and judge it honestly.

    from sandbox import execute, execute_many, validate_tests
    result = execute(code, ["assert add(1, 2) == 3", "def test_x():\\n    assert add(0, 0) == 0"])
    result.passed, result.total, result.outcomes[0].status, result.isolation

    python -m sandbox run --code solution.py --tests tests.py [--json]

How a verdict is reached
------------------------
Every test is planned in the caller's (trusted) process. A test made only of ``assert``s whose
calls into candidate code have literal arguments is *split*: only the calls (name + arguments)
enter the jail; the candidate's return values come back as plain data (exact ``type(x) is``
checks: None, bool, int, float, str, bytes, range and lists/tuples/dicts/sets/frozensets of
them; an iterator is drawn in the jail, bounded, and replayed; anything else, ``int``
subclasses included, fails the test as "non-plain"), and the assert is evaluated here by a
small evaluator with those values substituted. Builtin names in a test are always the real
builtins, even where the candidate defines ``sorted`` or ``len``. Expected values never enter
the jail and no comparison ever runs on a candidate object. Any other test (loops, helpers,
``def test_*``, ``Test*`` classes, ``unittest``) runs *whole* in a jailed test process that
holds no candidate code (``testrun``); its calls to candidate functions go over pipes to a
separate jailed candidate process and come back as plain data (mutated arguments are written
back), and it reports success by writing a per-test random token on a pipe the candidate can
neither see nor reach. The verdict is decided here; exit codes and output are never parsed.

What a human reviewer means is what counts: a candidate that does not load fails every test
(even one that never calls it); a call that crashes, raises a non-``Exception``
(``SystemExit``...), ``StopIteration`` or ``MemoryError``, or returns data that cannot be
judged fails every test that made it, whatever the test catches; what pytest would run is run
(``Test*`` methods, ``TestCase`` methods, ``@pytest.mark.parametrize``, module fixtures;
``import pytest`` gets a vetted shim with ``raises``/``approx``/...), and a test that cannot run
(async, yield, an unknown fixture, nothing to run, ``pytest.skip``) is ``invalid``, never passed.

Protected against (each has a test in ``tests/test_sandbox_*.py``)
------------------------------------------------------------------
- Escape: files outside the private tmpfs are read-only or absent; no shells or subprocesses
  (seccomp denies execve, fork and non-thread clone); no syscall aimed at another process
  (signals, ``rt_sigqueueinfo``, ``prlimit64``, ``setpriority``, ``sched_set*``,
  ``ioprio_set``, ``pidfd_*``, ``migrate_pages``...: only the caller itself is a valid
  target); no daemons; the host's ``/tmp`` is not the jail's.
- The jail's pid 1: the worker itself (bubblewrap ``--as-pid-1``), undumpable, so no process
  a candidate can see holds a host pipe it can open (``/proc/1/fd/0`` would otherwise hold the
  next queued job, reference solutions included) or memory it can write (``/proc/1/mem``);
  bubblewrap's own init, which was same-uid, dumpable and unfiltered, is gone.
- Resources: per-test wall-clock limits with SIGKILL (signal-ignoring loops too), RLIMIT_AS,
  RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE, size-capped tmpfs, capped output, stdin is
  ``/dev/null``; crashes (C-stack overflow, ``os._exit``) are recorded per test.
- The trusted host: every decode of a reply and every evaluation of an assert is bounded in
  size, depth, hash collisions and work; over a bound is an ``error`` outcome for that test,
  never an exception, and nothing a job contains makes ``execute_many`` raise.
- Reward hacking: ``sys.exit``/``os._exit``/``atexit``/excepthooks, ``SystemExit``/
  ``KeyboardInterrupt``/``BaseException``, always-equal objects and int/list subclasses,
  monkeypatched builtins or ``math``, conftest/pytest plugins (the real pytest is not
  involved), forged result frames (a candidate's replies are only data about its own calls).
- Reward integrity: a verdict that comes from the harness (a worker that died, a jail that did
  not start once it had started before, a process starved past its limit by an overloaded
  host: runnable but waiting for a CPU over half the time, measured from ``schedstat``) is
  ``infra``, which rewards leave out; code that sleeps or spins its own threads cannot look
  starved. Every result records the limits it ran under.
- Output spoofing: output is captured for people and never parsed.
- Exfiltration: tests and expected values are never in the candidate's process; candidates and
  tests run in *blank* processes forked from a fork server that started before any job, so
  their memory holds no other job, test or reference; ``/proc`` shows only the jail;
  every process in it is undumpable and ptrace/process_vm_* are denied; no network namespace
  (and sockets denied).

Not protected (known limits)
----------------------------
- Timing side channels, CPU-cache attacks and kernel exploits (bubblewrap + seccomp reduce the
  kernel surface but this is not a VM; use gVisor/Firecracker for hostile multi-tenant use).
  The seccomp filter is a deny-list of closed families (see ``seccomp``), not an allow-list.
- Candidates cannot use ``multiprocessing``/``subprocess`` (denied by design), and classes or
  non-plain values cannot cross into whole tests (calls return plain data only; a candidate's
  exception classes cross as same-named stand-ins). Whole tests see candidate *functions*
  (as proxies), not candidate constants or classes.
- A candidate keeps state between the split tests of one job (like a module would) and sees
  every argument of that job's calls at once; it never sees expected values.
- The uid situation: when the host runs as root and the Python installation is not
  world-readable (pyenv under ``/root``, as on the development machine), jailed processes
  map to host uid 0 without any capabilities: all mounts are read-only or private tmpfs, but
  RLIMIT_NPROC is not enforced for uid 0, so fork prevention rests on seccomp alone, and the
  jail's ``/proc`` files of undumpable processes appear owned by the jail's own uid (their
  contents stay closed: every open of fds, memory, environment or maps needs ptrace access,
  which nothing in the jail has). Elsewhere they map to an unprivileged uid (or bubblewrap
  itself runs as ``nobody``).
- Without bubblewrap (``isolation='process'``: macOS, locked-down hosts) there is no
  file-system, pid or network namespace: code can read the host's files and see its
  processes (seccomp still denies sockets, exec and fork on Linux x86_64). A loud warning is
  given once and every result says ``isolation='process'`` or ``'process+seccomp'``.
- Denial of service of the trusted process by volume (very many or very large jobs) is the
  caller's to bound; per job, return values are capped (8 MB a call, 32 MB a job) and a job
  whose reply still breaks the worker is retried once, then reported as ``infra``.
"""

from sandbox.api import (
                         Sandbox,
                         close_all,
                         execute,
                         execute_many,
                         options_from_config,
                         validate_tests,
)
from sandbox.jail import SandboxError
from sandbox.result import STATUSES, ExecutionResult, TestOutcome

__all__ = ["STATUSES", "ExecutionResult", "Sandbox", "SandboxError", "TestOutcome", "close_all",
           "execute", "execute_many", "options_from_config", "validate_tests"]
