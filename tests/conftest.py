"""Shared fixtures: the tiny offline model, the shared problem data, isolated state dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

# Keep every test run off the user's real state: no telemetry, no analytics, local stores only.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


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


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (real problem files written by others); skips where absent, as in a
    user's clone."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present beside this checkout")
    return SHARED_DATA


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect server (SQLite) for every flow test of the session: starting one
    costs ~20 s, and nested harnesses would fight over the same settings."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="module")
def shim():
    """sandbox/pytest_shim.py as the jail loads it, for the ``test_sandbox_pytest_shim*`` files."""
    from shim_support import load_shim

    return load_shim()
