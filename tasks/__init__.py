"""The Prefect layer of a training run: every module here imports Prefect or runs its tasks.

The work items as Prefect tasks (``step``), the run opened inside its flow (``runtime``), the
run's start as the flow runs it (``start``, with the ``warmstart`` and ``heldout`` tasks),
replay and recovery through those tasks (``replay``, ``recover``), and what a step and a run
report (``reporting``, ``progress``: MLflow, Prefect artifacts, the console). Each task reads
its inputs from the run store, calls pure functions of ``pipeline``, writes its outputs there
and returns a small ``Pointer`` or a summary. What the run is and where it stands, without
Prefect, is ``lifecycle``.
"""
