"""Prefect flows: ``train`` (the full pipeline); run them from the repository root."""

import os

# Before Prefect reads its settings. The machines this runs on are offline, and the temporary
# server's telemetry service does two useless things there: a POST that cannot connect, and a
# session row written to the run's SQLite database while the flow is starting. On a loaded
# 2-core machine that write has failed with "database is locked" and taken the run with it.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
