"""The run's lifecycle, Prefect-free: what a run is and where it stands, read and written
without Prefect.

``context`` (the run context: config, problems, run store, models, resume states, MLflow run;
the run's problems vetted and recorded), ``resume`` (where a run continues, and the stopped runs
it could continue), ``recorded`` (a recorded step read back for a replay or a recovery),
``initfrom`` (a new run started from trained adapters), ``beforecache`` and ``digests`` (the keys
of the caches of the held-out evaluation before training and of the warm start).

Nothing here imports Prefect at import time (``RunContext.quoted`` imports Prefect's ``quote``
when called) and nothing imports ``tasks``: ``tasks`` runs the lifecycle under Prefect.
"""
