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
checks: None, bool, int, float, str, bytes and lists/tuples/dicts/sets/frozensets of them;
anything else, ``int`` subclasses included, fails the test as "non-plain"), and the assert is
evaluated here by a small safe evaluator with those values substituted. Expected values never
enter the jail and no comparison ever runs on a candidate object. Any other test (loops,
helpers, ``def test_*``) runs *whole* in a jailed test process that holds no candidate code;
its calls to candidate functions go over pipes to a separate jailed candidate process and come
back as plain data, and it reports success by writing a per-test random token on a pipe the
candidate can neither see nor reach. The verdict is decided here; exit codes and output are
never parsed.

Protected against (each has a test in ``tests/test_sandbox_*.py``)
------------------------------------------------------------------
- Escape: files outside the private tmpfs are read-only or absent; no shells or subprocesses
  (seccomp denies execve, fork and non-thread clone); no signals to other processes (its
  parent, its group); no daemons; the host's ``/tmp`` is not the jail's.
- Resources: per-test wall-clock limits with SIGKILL (signal-ignoring loops too), RLIMIT_AS,
  RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE, size-capped tmpfs, capped output, stdin is
  ``/dev/null``; crashes (C-stack overflow, ``os._exit``) are recorded per test.
- Reward hacking: ``sys.exit``/``os._exit``/``atexit``/excepthooks, ``SystemExit``/
  ``KeyboardInterrupt``/``BaseException``, always-equal objects and int/list subclasses,
  monkeypatched builtins or ``math``, conftest/pytest plugins (no pytest is involved), forged
  result frames (a candidate's replies are only data about its own calls).
- Output spoofing: output is captured for people and never parsed.
- Exfiltration: tests and expected values are never in the candidate's process; candidates and
  tests run in *blank* processes forked from a fork server that started before any job, so
  their memory holds no other job, test or reference; ``/proc`` shows only the jail;
  sibling processes are undumpable and ptrace/process_vm_* are denied; no network namespace
  (and sockets denied).

Not protected (known limits)
----------------------------
- Timing side channels, CPU-cache attacks and kernel exploits (bubblewrap + seccomp reduce the
  kernel surface but this is not a VM; use gVisor/Firecracker for hostile multi-tenant use).
- Candidates cannot use ``multiprocessing``/``subprocess`` (denied by design), and classes or
  non-plain values cannot cross into whole tests (calls return plain data only). Whole tests
  see candidate *functions* (as proxies), not candidate constants or classes.
- A candidate keeps state between the split tests of one job (like a module would) and sees
  every argument of that job's calls at once; it never sees expected values.
- When the host runs as root and the Python installation is not world-readable (pyenv under
  ``/root``, as on the development machine), jailed processes map to host uid 0 without any
  capabilities: all mounts are read-only or private tmpfs, but RLIMIT_NPROC is not enforced
  for uid 0, so fork prevention rests on seccomp alone. Elsewhere they map to an
  unprivileged uid (or bubblewrap itself runs as ``nobody``).
- Without bubblewrap (``isolation='process'``: macOS, locked-down hosts) there is no
  file-system, pid or network namespace: code can read the host's files and see its
  processes (seccomp still denies sockets, exec and fork on Linux x86_64). A loud warning is
  given once and every result says ``isolation='process'`` or ``'process+seccomp'``.
- Denial of service of the trusted process by volume (very many or very large jobs) is the
  caller's to bound; per job, return values are capped (8 MB a call, 32 MB a job) and a job
  whose reply still breaks the worker is retried once, then reported as errors.
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
