"""Exfiltration: a candidate that could read the expected answer (from disk, /proc, memory,
the caller's frames or a local server) would pass. Each test plants a fresh secret answer
where a harness might leak it and checks the candidate cannot find it, with a control that
shows the same search does find a secret where one is reachable."""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

from sandbox import execute

REPO = Path(__file__).resolve().parent.parent

# Searches every readable file, every process's memory (/proc/<pid>/mem), every live object
# and every frame for a digit string that follows ``key``; returns it as an int or -1.
SEARCH = r'''
import gc, os, re, sys
def _scan(text, key):
    at = text.find(key)
    while at >= 0:
        m = re.match(rb"\D{0,8}(\d{6,9})", text[at + len(key): at + len(key) + 24])
        if m:
            return int(m.group(1))
        at = text.find(key, at + 1)
    return None
def _files(key):
    # Everything but the read-only system folders the jail shares with the host.
    skip = ("/proc", "/sys", "/dev", "/usr", "/lib", sys.base_prefix)
    for root in ("/", ):
        for dirpath, dirnames, filenames in os.walk(root):
            if dirpath.startswith(skip) and dirpath != "/" and dirpath != "/dev/shm":
                dirnames[:] = []
                continue
            for name in filenames:
                try:
                    with open(os.path.join(dirpath, name), "rb") as fh:
                        hit = _scan(fh.read(1 << 20), key)
                    if hit is not None:
                        return hit
                except OSError:
                    pass
def _memory(key, pids):
    for pid in pids:
        try:
            maps = open(f"/proc/{pid}/maps").read().splitlines()
            with open(f"/proc/{pid}/mem", "rb", 0) as mem:
                for line in maps:
                    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                    if "r" not in line.split()[1] or hi - lo > 64 << 20:
                        continue
                    try:
                        mem.seek(lo)
                        hit = _scan(mem.read(hi - lo), key)
                    except (OSError, ValueError, OverflowError):
                        continue
                    if hit is not None:
                        return hit
        except OSError:
            pass
def _objects(key):
    k = key.decode()
    for obj in gc.get_objects():
        for text in ([obj] if isinstance(obj, str) else
                     [v for v in obj.values() if isinstance(v, str)] if isinstance(obj, dict)
                     else []):
            if k in text:
                hit = _scan(text.encode(), key)
                if hit is not None:
                    return hit
    frame = sys._getframe()
    while frame is not None:
        for v in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            if isinstance(v, str) and k in v:
                hit = _scan(v.encode(), key)
                if hit is not None:
                    return hit
        frame = frame.f_back
def search(key, own=False):
    key = key.encode()
    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    for found in (_objects(key), _memory(key, ["self"] if own else others), _files(key)):
        if found is not None:
            return found
    return -1
'''


def secret() -> int:
    return random.randint(100_000_000, 999_999_999)


def test_search_finds_a_secret_in_its_own_memory():
    # Control: the search really works where the secret is reachable (its own memory).
    value = secret()
    code = SEARCH + (f"MARK = 'own-mark = {value}'\n"
                     "def answer():\n    return search('own-mark', own=True)\n")
    result = execute(code, [f"assert answer() == {value}"], timeout_s=10)
    assert result.passed == 1, result.outcomes


def test_expected_values_of_module_level_asserts_are_unreachable():
    # The test modules live in the test process only; the candidate searches everything else.
    # The second module passes only if the search found nothing at all.
    value = secret()
    code = SEARCH + "def answer():\n    return search('== ')\n"
    result = execute(code, [f"assert answer() == {value}", "assert answer() == -1"],
                     timeout_s=10)
    assert [o.status for o in result.outcomes] == ["failed", "passed"], result.outcomes


def test_test_sources_are_unreachable_from_candidate_memory_and_proc():
    # A test function carries its expected value into the jail (in the test process only).
    value = secret()
    code = SEARCH + "def answer(x):\n    return search('expected_marker = ')\n"
    test = (f"expected_marker = {value}\n\ndef test_search():\n    for x in range(2):\n"
            "        assert answer(x) == expected_marker\n")
    nothing = "def test_nothing_found():\n    assert answer(0) == -1\n"
    result = execute(code, [test, nothing], timeout_s=10)
    assert [o.status for o in result.outcomes] == ["failed", "passed"], result.outcomes


def test_reference_solution_of_an_earlier_job_is_unreachable():
    value = secret()
    reference = f"def answer():\n    reference_marker = 'refmark = {value}'\n    return {value}\n"
    assert execute(reference, [f"assert answer() == {value}"]).passed == 1  # a validation job
    code = SEARCH + "def answer():\n    return search('refmark = ')\n"
    for _ in range(3):  # whichever warm worker it lands on
        result = execute(code, [f"assert answer() == {value}"], timeout_s=10)
        assert result.outcomes[0].status == "failed", result.outcomes


def test_project_and_data_files_are_not_visible():
    demo, shared = REPO / "problems" / "demo_problems.json", REPO.parent / "shared"
    code = f"""
import os
def look():
    seen = []
    for path in ({str(demo)!r}, {str(shared)!r}, "/work", "/home", "/root/.ssh", "/etc/passwd",
                 os.path.expanduser("~")):
        if os.path.exists(path) and path != "/tmp":
            seen.append(path)
    return seen
"""
    result = execute(code, ["assert look() == []"])
    assert result.outcomes[0].status == "passed", result.outcomes


def test_proc_shows_only_the_jail():
    # At most seven: the worker, two fork servers, this session's candidate and test
    # processes and the pair forked ahead for the next session (see
    # test_sandbox_redteam_neighbours for what a candidate's own pid namespace shows).
    code = ("import os\ndef count():\n"
            "    return len([p for p in os.listdir('/proc') if p.isdigit()])\n")
    result = execute(code, ["assert count() <= 7"])
    assert result.outcomes[0].status == "passed", result.outcomes


def test_local_server_with_the_answers_is_unreachable():
    value = secret()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(str(value).encode())
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as probe:  # control
            assert probe.recv(64) == str(value).encode()
        code = f"""
import socket
def answer():
    try:
        with socket.create_connection(("127.0.0.1", {port}), timeout=1) as s:
            return int(s.recv(64))
    except OSError:
        return -1
"""
        result = execute(code, [f"assert answer() == {value}"], timeout_s=3)
        assert result.outcomes[0].status == "failed", result.outcomes
    finally:
        server.close()
