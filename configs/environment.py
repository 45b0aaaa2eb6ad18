"""The process environment every command of this project runs under, whether it comes through
``make`` or is typed as the README and docs show it: :func:`apply` sets each variable the user
has not set. The Makefile exports the same values (``tests/test_environment.py`` holds the two
to each other), so ``make run`` and ``python -m flows.train`` behave alike.

Each entry point calls :func:`apply` before it imports Prefect, MLflow or transformers, which
read these variables when they are imported.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: where ``.prefect``, ``runs/``, ``mlflow.db`` and ``.cache`` live."""

DEFAULTS: dict[str, str] = {
    # The machines this runs on are offline: no weights from a hub at run time, and no
    # telemetry (a POST that cannot connect, and files written under ~/.config).
    "HF_HUB_OFFLINE": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "1",
    # The tokenizers' own thread pool, forked into sandbox and engine processes, warns and
    # can deadlock; the runs tokenise on one thread anyway.
    "TOKENIZERS_PARALLELISM": "false",
}
"""Variables whose value does not depend on where the checkout is."""

# Read by Prefect's temporary server: its telemetry service POSTs (which fails offline) and
# writes a session row while the flow starts, which has failed with "database is locked" on a
# loaded machine; and its default start-up wait is shorter than a fresh PREFECT_HOME takes to
# migrate its database on two busy cores.
PREFECT_SERVER = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "600",
}

# transformers and huggingface_hub draw a bar for every weight load and shard write, on the
# console where a run's step lines are.
QUIET = {"HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def prefect_home() -> str:
    """The checkout's own Prefect home, so every command of one run writes one history."""
    return str(ROOT / ".prefect")


def defaults() -> dict[str, str]:
    """Every variable :func:`apply` sets, with its value."""
    return {**DEFAULTS, "PREFECT_HOME": prefect_home(), **PREFECT_SERVER, **QUIET}


def apply() -> None:
    """Set each of :func:`defaults` that the environment does not already set."""
    for name, value in defaults().items():
        os.environ.setdefault(name, value)
