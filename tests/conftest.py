"""Shared fixtures: the tiny offline model, the shared problem data, isolated state dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from configs import environment

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

# Keep every test run off the user's real state: the entry points' environment (no telemetry,
# no hub, the checkout's own stores), and transformers offline too.
environment.apply()
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random Qwen2 model and a locally trained tokenizer, built once per session."""
    from models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread: on a shared 2-core machine a hidden-64 model runs ~10x faster
    than with two threads fighting other processes (measured: 0.35 s vs 4.1 s for 8 x 32
    tokens)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def batch(tiny_model_dir):
    """One tokenised line of code for the tiny model, ``(1, T)`` ids (logits, train steps)."""
    import torch

    from models.policy import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model_dir))
    return torch.tensor([tokenizer("def add(a, b):\n    return a + b")["input_ids"]])


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (real problem files written by others); skips where absent, as in a
    user's clone."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present beside this checkout")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _prefect_console_on_a_live_stream():
    """Prefect (re)binds its console log handlers to the ``sys.stderr`` of the moment whenever
    it sets up logging, which its server app does too. Set up inside a test that uses
    ``capsys``, that is the test's own stream, closed when the test ends, and every later
    Prefect log line fails ("I/O operation on closed file", then a RecursionError). After each
    test, such handlers go back to the live ``sys.stderr``."""
    import logging
    import sys

    yield
    if "prefect.logging.handlers" not in sys.modules:
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    loggers = [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values()
                                      if isinstance(x, logging.Logger))]
    for handler in {h for lg in loggers for h in lg.handlers}:
        if isinstance(handler, PrefectConsoleHandler) and getattr(handler.stream, "closed",
                                                                  False):
            handler.stream = sys.stderr  # not setStream: it flushes the closed one
            handler.console.file = sys.stderr


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect server (SQLite) for every flow test of the session: starting one
    costs ~20 s, and nested harnesses would fight over the same settings."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture
def context_walks(monkeypatch):
    """Every ``lifecycle.context.RunContext`` Prefect walks into while the test runs: a task given
    the context unquoted (``RunContext.quoted``), which costs a walk of the run's problems,
    config and timings at every call. A flow test asserts the list stays empty."""
    import prefect.utilities.collections as collections

    from lifecycle.context import RunContext

    walked: list = []
    is_dataclass = collections.is_dataclass  # what visit_collection asks of each object

    def spy(obj):
        if isinstance(obj, RunContext):
            walked.append(obj)
        return is_dataclass(obj)

    monkeypatch.setattr(collections, "is_dataclass", spy)
    return walked


def cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


# `make test` runs the suite on pytest-xdist workers with ``--dist loadfile
# --no-loadscope-reorder``: each test file on one worker, handed out in collection order as
# workers free up (without the flag xdist re-sorts the files by their number of tests, and the
# five longest, with one to four tests each, started after most others). The suite cannot end
# before its longest file does, so the longest start first, in this order: their summed
# durations in the CI of 2026-11-28 on 2 cores (docs commands 438 s, Ray stack 323, vLLM
# engine 298, determinism 247, vLLM flow 228, then 150 s and less each). Serially the order
# changes nothing but when each file runs.
LONGEST_FIRST = ("test_readme_commands.py", "test_stack.py", "test_vllm_engine.py",
                 "test_determinism.py", "test_vllm_flow.py", "test_train_flow.py",
                 "test_run_lifecycle.py", "test_deployments.py", "test_problems_messy.py",
                 "test_sandbox_fanout.py", "test_manifest_integrity.py",
                 "test_sandbox_validate.py", "test_resume_integrity.py", "test_differential.py",
                 "test_stage_count.py")


def _longest_first(item: pytest.Item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_longest_first)  # stable: each file's tests keep their order
    if cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
