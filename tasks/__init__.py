"""Prefect tasks of the training pipeline, each a thin wrapper over pure functions.

Every task reads its inputs from the run store, writes its output there, and returns a small
``Pointer`` (path, rows, content hash) or a summary dict.
"""

from tasks.execution import execute
from tasks.reporting import checkpoint_stage, log_step
from tasks.rollout import generate_tests, rollout
from tasks.scoring import score
from tasks.update import ppo_update_task
from tasks.warmstart import warm_start

__all__ = ["checkpoint_stage", "execute", "generate_tests", "log_step", "ppo_update_task",
           "rollout", "score", "warm_start"]
