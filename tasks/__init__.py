"""Prefect tasks of the training pipeline, each a thin wrapper over ``pipeline``.

Every task reads its inputs from the run store, calls one pure function, writes its output
there, and returns a small ``Pointer`` (path, rows, content hash) or a summary dict. Besides the
tasks: ``runtime`` (the run context), ``step`` (a catalogue item run as its task), ``resume``
(where a run continues), ``recorded``/``replay``/``recover`` (a recorded step read back,
replayed, or finished), ``reporting`` and ``progress`` (what a step and a run report).
"""
