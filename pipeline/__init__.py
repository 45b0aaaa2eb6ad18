"""The training pipeline's pure core: what a step is, and every function that turns one
step's rows into the next step's rows. No Prefect here.

- ``catalogue``: the step's work items, one type per kind: the parts each reads and writes
  (``parts``: the run store's part names) and the function it runs (``stepwork``);
- ``schedule``: which role trains which stage at which step (N + N + K);
- ``chains``: the sampler seam, prompts' outputs to chains rows, discriminator text to tests
  rows;
- ``solver``: the chain on new problems (inference, evaluation, held-out rows), built from
  the same functions a training step runs;
- ``execution``: accumulated suites to sandbox jobs, and results to executions rows;
- ``scoring``: executions to per-sample outcomes and rewards rows;
- ``update``: a step's chains and rewards to one PPO update of one role;
- ``warmstart``: the supervised start's examples and steps;
- ``metrics``: a step's tables to namespaced metrics and the run summary;
- ``evaluation``: pass@k and test quality of saved adapters, scored as training scores;
- ``compare``: replayed parts against recorded ones.

``tasks/`` runs each work item as a Prefect task (``tasks.step``); ``flows/`` chains them.
Nothing in this package imports ``tasks``, ``flows`` or ``prefect``, so the same functions
serve training, replay, recovery, evaluation, inference and unit tests.
"""
