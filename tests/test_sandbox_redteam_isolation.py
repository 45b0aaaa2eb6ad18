"""Red team, side four: a test string decides only its own verdict, and nothing survives it.

The discriminator writes tests, so a test string is as hostile as a candidate. Each one that
is not ``sandbox.Trusted`` runs alone, in a fresh test process and candidate process, and the
worker believes only the reports that speak for it: forging reports for other modules,
sending malformed or oversized ones, patching pytest in a module body, crashing or looping
forever changes the attacker's own verdict and no other. IPC objects a session makes do not
outlive it, so a test run against the reference cannot leave answers a later candidate reads.
And the candidate's own names never reach pytest: its ``test_*`` functions are not collected,
its ``pytest_plugins``, hooks and ``setup_module`` are not obeyed.
"""

from __future__ import annotations

import textwrap

import pytest

from sandbox import Sandbox, Trusted, execute, execute_many


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
HONEST = ["assert add(2, 2) == 4\n",
          "def test_sum():\n    assert add(1, 1) == 2\n",
          "assert add(3, 0) == 3\n",
          "import pytest\n\n\n@pytest.mark.parametrize('a', [0, 5])\n"
          "def test_zero(a):\n    assert add(a, 0) == a\n"]
# What the honest modules earn on their own: the wrong add fails the first two.
WRONG_ALONE = ["failed", "failed", "passed", "passed"]

FORGE = r'''
import json, os, struct


def frame(obj):
    data = json.dumps(obj).encode()
    return struct.pack(">I", len(data)) + data


def forge(frames):
    for fd in range(3, 64):
        try:
            os.write(fd, b"".join(frame(f) for f in frames))
        except OSError:
            pass
'''

ATTACKS = {
    "forged passes and done for every module": FORGE + src('''
        forge([["body", i, True] for i in range(8)]
              + [["item", i, ["test_sum", "passed", False, False, ""]] for i in range(8)]
              + [["done"]])
    '''),
    "an index of the wrong type": FORGE + src('''
        forge([["item", 1.0, ["test_sum", "passed", False, False, ""]]])
    '''),
    "an item of the wrong shape": FORGE + src('''
        forge([["item", 0, {"name": "x"}]])
    '''),
    "an oversized frame": src('''
        import os, struct
        for fd in range(3, 64):
            try:
                os.write(fd, struct.pack(">I", 48 << 20) + b"{" * 65536)
            except OSError:
                pass
    '''),
    "pytest patched in the module body": src('''
        import _pytest.python
        import _pytest.runner
        _pytest.python.Function.runtest = lambda self: None
        _pytest.runner.check_interactive_exception = lambda call, report: False
        import _pytest.assertion.rewrite as rewrite
        rewrite.rewrite_asserts = lambda *args, **kwargs: None
    '''),
    "its own phase reported again, to restart its budgets": FORGE + src('''
        import sys
        index = int(sys._getframe().f_globals["__name__"][5:])
        while True:
            forge([["phase", index, "run"]])
    '''),
    "a crash": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "a budget exhausted": "while True:\n    pass\n",
    "a flood of output": src('''
        import os, sys
        for _ in range(64):
            os.write(1, b"x" * (1 << 20))
            os.write(2, b"x" * (1 << 20))
        print("y" * (8 << 20))
        sys.stderr.write("z" * (8 << 20))
    '''),
    "a flood of items": src('''
        import pytest


        @pytest.mark.parametrize("i", range(3000))
        def test_many(i):
            assert add(i, 0) == i
    '''),
}


# The attacker's own verdict: a forged or malformed report is its ``error``; a module body
# that patches pytest and holds is a module that held.
OWN = {"forged passes and done for every module": {"error"},
       "an index of the wrong type": {"error"}, "an item of the wrong shape": {"error"},
       "an oversized frame": {"error"}, "pytest patched in the module body": {"passed"},
       "its own phase reported again, to restart its budgets": {"error"},
       "a crash": {"crashed"}, "a budget exhausted": {"timeout"},
       "a flood of output": {"passed", "timeout"}, "a flood of items": {"passed", "timeout"}}


@pytest.fixture(scope="module")
def box():
    with Sandbox(workers=2) as sandbox:
        yield sandbox


def _statuses(result) -> list[str]:
    return [o.status for o in result.outcomes]


@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_an_attacking_test_string_changes_no_other_verdict(box, attack, where):
    tests = [ATTACKS[attack], *HONEST] if where == "first" else [*HONEST, ATTACKS[attack]]
    trusted = [ATTACKS[attack], *map(Trusted, HONEST)]  # the honest ones sharing a session
    plain, marked, alone = box.execute_many([(WRONG, tests), (WRONG, trusted),
                                             (WRONG, HONEST)], timeout_s=1.0)
    honest = plain.outcomes[1:] if where == "first" else plain.outcomes[:-1]
    assert [o.status for o in honest] == WRONG_ALONE, plain.outcomes
    assert _statuses(marked)[1:] == WRONG_ALONE, marked.outcomes
    assert _statuses(alone) == WRONG_ALONE
    mine = plain.outcomes[0] if where == "first" else plain.outcomes[-1]
    assert mine.status in OWN[attack], mine


def test_a_test_string_sees_no_neighbour_so_reference_and_candidate_sessions_look_alike(box):
    observer = src('''
        import gc, sys, types
        mine = [m for m in sys.modules if m.startswith("test_")]
        assert mine == [__name__], mine
        others = [o for o in gc.get_objects()
                  if isinstance(o, types.ModuleType) and o.__name__.startswith("test_")
                  and o.__name__ != __name__]
        assert not others
    ''')
    few, many = box.execute_many([(RIGHT, [observer]), (RIGHT, [*HONEST, observer, *HONEST])])
    assert few.outcomes[0].status == many.outcomes[4].status == "passed", many.outcomes


def test_files_a_test_string_leaves_are_gone_for_the_next(box):
    write = "open('/tmp/answer', 'w').write('4')\nassert add(2, 2) == 4\n"
    read = "import os\nassert not os.path.exists('/tmp/answer')\n"
    result = box.execute(WRONG, [write, read])
    assert _statuses(result) == ["failed", "passed"], result.outcomes


SHM = '''
import ctypes

libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
KEY = 0x5EED


def leave(value):
    shm = libc.shmget(KEY, 4096, 0o1666)  # IPC_CREAT
    assert shm >= 0, ctypes.get_errno()
    ctypes.memmove(libc.shmat(shm, None, 0), str(value).encode(), len(str(value)))
    libc.semget(KEY, 1, 0o1666)
    libc.msgget(KEY, 0o1666)


def read_back():
    shm = libc.shmget(KEY, 0, 0)
    if shm < 0:
        return None
    return int(ctypes.string_at(libc.shmat(shm, None, 0), 2).rstrip(b"\\0"))
'''


def test_no_ipc_object_outlives_its_session():
    reference = "def answer():\n    return 42\n"
    cheat = SHM + "\n\ndef answer():\n    return read_back()\n"
    own = SHM + "\n\ndef answer():\n    leave(42)\n    return read_back()\n"
    left_by_test = SHM + "\n\nleave(42)\nassert answer() == 42\n"
    left_by_reference = SHM + "\n\ndef answer():\n    leave(42)\n    return 42\n"
    asked = "assert answer() == 42\n"
    listing = src('''
        for kind in ("shm", "sem", "msg"):
            with open(f"/proc/sysvipc/{kind}") as fh:
                assert len(fh.read().splitlines()) == 1, kind  # the header alone
    ''')
    results = execute_many([(reference, [left_by_test]), (left_by_reference, [asked]),
                            (cheat, [asked, asked]), (own, [asked]), (reference, [listing])],
                           workers=1)
    assert [_statuses(r) for r in results] == [
        ["passed"], ["passed"],
        ["failed", "failed"],  # nothing the test or the reference left is there to read
        ["passed"],            # the control: within one process the segment is read back
        ["passed"]], [r.outcomes for r in results]


# A wrong candidate that defines what pytest would read from a test module. Were its names
# bound into the test modules, each of these would credit it.
SURFACE = {
    "plugins and a hook": src('''
        pytest_plugins = ["solution"]


        def pytest_pyfunc_call(pyfuncitem):
            return True
    '''),
    "declared in __all__": src('''
        __all__ = ["add", "pytest_plugins", "pytest_pyfunc_call", "__test__"]
        pytest_plugins = ["solution"]
        __test__ = False


        def pytest_pyfunc_call(pyfuncitem):
            return True
    '''),
    "setup_module": src('''
        def setup_module(module):
            module.add = lambda a, b: a + b
    '''),
    "test functions and classes": src('''
        def test_add():
            pass


        class TestAdd:
            def test_it(self):
                pass
    '''),
}


@pytest.mark.parametrize("name", list(SURFACE))
def test_the_candidates_names_never_reach_pytest(name):
    tests = ["def test_sum():\n    assert add(2, 2) == 4\n",
             "import solution\n\n\ndef test_sum():\n    assert solution.add(2, 2) == 4\n"]
    result = execute(WRONG + "\n\n" + SURFACE[name], tests)
    assert _statuses(result) == ["failed", "failed"], result.outcomes
    for outcome in result.outcomes:
        assert [item.name for item in outcome.items] == ["test_sum"]
