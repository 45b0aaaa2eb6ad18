"""Deployment helpers used with ``prefect.yaml``: work-pool set-up, deploy and serve.

    python -m deployments {setup,deploy,serve} [--name NAME ...]
"""

from deployments.pool import (
    PREFECT_YAML,
    deploy,
    ensure_pool,
    load_prefect_yaml,
    pool_names,
    setup,
    to_runner_deployments,
)

__all__ = ["PREFECT_YAML", "deploy", "ensure_pool", "load_prefect_yaml", "pool_names", "setup",
           "to_runner_deployments"]
