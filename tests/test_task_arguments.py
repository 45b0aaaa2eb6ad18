"""The run context reaches each Prefect task as the very object the flow holds, unwalked."""

from __future__ import annotations


def test_a_quoted_context_reaches_its_task_as_the_same_unwalked_object(prefect_harness,
                                                                       context_walks):
    from prefect import flow, task
    from prefect.cache_policies import NO_CACHE
    from prefect.states import Completed

    from lifecycle.context import RunContext

    ctx = RunContext(cfg=None, run_id="r", store=None, problems=[], resume=None)
    # Something Prefect resolves wherever it finds it in a task's arguments: a finished state.
    state = Completed(data="its result")
    ctx.timings.append({"state": state})

    @task(cache_policy=NO_CACHE)
    def look(given: RunContext) -> tuple[bool, object]:
        return given is ctx, given.timings[0]["state"]

    @flow
    def run(quoted: bool) -> tuple[bool, object]:
        return look(ctx.quoted() if quoted else ctx)

    assert run(True) == (True, state)
    assert context_walks == []
    # The control: passed as it is, the context is walked, the state inside it resolved, and
    # the task gets a copy (dataclasses.replace), whose changes the flow would never see.
    assert run(False) == (False, "its result")
    assert context_walks and all(c is ctx for c in context_walks)  # the flow tests' spy sees it
