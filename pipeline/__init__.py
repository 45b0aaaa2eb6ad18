"""The training pipeline's pure core: what a step is, and every function that turns one
step's rows into the next step's rows. No Prefect here.

- ``catalogue``: the step's work items, the parts each reads and writes, and part names;
- ``schedule``: which role trains which stage at which step (N + N + K);
- ``chains``: prompts' outputs to chains rows, discriminator text to tests rows;
- ``execution``: accumulated suites to sandbox jobs, and results to executions rows;
- ``scoring``: executions to per-sample outcomes and rewards rows;
- ``update``: a step's chains and rewards to one PPO update of one role;
- ``warmstart``: the supervised start's examples and steps;
- ``metrics``: a step's tables to namespaced metrics and the run summary;
- ``evaluation``: pass@k and test quality of saved adapters, scored as training scores;
- ``compare``: replayed parts against recorded ones.

``tasks/`` wraps these in Prefect tasks that read their inputs from the run store, call one
function, and write the result back; ``flows/`` chains those tasks. Nothing in this package
imports ``tasks``, ``flows`` or ``prefect``, so the same functions serve training, replay,
recovery, evaluation and unit tests.
"""
