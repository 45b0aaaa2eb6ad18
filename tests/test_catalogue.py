"""The step catalogue declares each work item's parts once: the runner reads exactly the declared
inputs, the item's function sees nothing else of the run store, and exactly the declared outputs
are written; a function that disagrees with its declarations is refused by name."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from artifacts import RunStore
from configs import ChainConfig
from pipeline.catalogue import (
    DeclarationError,
    MissingInputError,
    WorkItem,
    step_parts,
    work_items,
)
from pipeline.parts import Inputs, Part, UndeclaredPartError, chain_part, rewards_part, suite_part
from pipeline.schedule import PlannedStep

REPO = Path(__file__).resolve().parent.parent
PLANNED = PlannedStep(step=1, stage=5, role="generator", phase="generator")


class RecordingStore:
    """A run store that notes every part read and written, in order."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.reads: list[Part] = []
        self.writes: list[Part] = []

    def read_table(self, table: str, step: int | None = None, part: str | None = None,
                   **kwargs: Any) -> pa.Table:
        assert part is not None, f"{table}: a whole table read, not a declared part"
        self.reads.append((table, part))
        return self.store.read_table(table, step=step, part=part, **kwargs)

    def write(self, table: str, step: int, part: str, data: Any) -> Any:
        self.writes.append((table, part))
        return self.store.write(table, step, part, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@dataclass(frozen=True)
class Toy(WorkItem):
    """A work item whose function the test gives."""

    kind: ClassVar[str] = "toy"
    task: ClassVar[str] = "toy"
    function: Any = None
    reads: tuple[Part, ...] = (suite_part(None),)

    def outputs(self, role: str) -> list[Part]:
        return [rewards_part()]

    def inputs(self, role: str, trained_stage: int) -> list[Part]:
        return list(self.reads)

    def work(self, ctx: Any, planned: PlannedStep, inputs: Inputs) -> dict[Part, Any]:
        return self.function(ctx, inputs)


def _store(tmp_path: Path) -> RecordingStore:
    store = RunStore(str(tmp_path), "toy")
    store.write("tests", 1, "baseline", [])
    return RecordingStore(store)


def test_the_runner_writes_what_the_function_returns_for_the_declared_outputs(tmp_path):
    store = _store(tmp_path)
    item = Toy(function=lambda ctx, inputs: {rewards_part(): inputs.rows(suite_part(None))})
    (pointer,) = item.run(SimpleNamespace(store=store), PLANNED)
    assert (pointer.table, pointer.part, pointer.rows) == ("rewards", "all", 0)
    assert store.reads == [suite_part(None)] and store.writes == [rewards_part()]


@pytest.mark.parametrize("function, message", [
    (lambda ctx, inputs: {rewards_part(): inputs.rows(suite_part(None)), suite_part(1): []},
     r"returned rewards/all, tests/stage-1 where the item declares the outputs rewards/all"),
    (lambda ctx, inputs: {}, r"returned none where the item declares the outputs rewards/all"),
    (lambda ctx, inputs: {rewards_part(): []},
     r"never read its declared input\(s\) tests/baseline"),
])
def test_a_function_that_disagrees_with_its_declarations_is_refused_and_nothing_written(
        tmp_path, function, message):
    store = _store(tmp_path)
    with pytest.raises(DeclarationError, match=f"work item toy of step 1: its function {message}"):
        Toy(function=function).run(SimpleNamespace(store=store), PLANNED)
    assert store.writes == []


def test_a_function_sees_only_its_declared_inputs(tmp_path):
    store = _store(tmp_path)
    undeclared = Toy(function=lambda ctx, inputs: inputs.rows(suite_part(1)))
    with pytest.raises(UndeclaredPartError, match="tests/stage-1 is not a declared input "
                       r"\(declared: tests/baseline\)"):
        undeclared.run(SimpleNamespace(store=store), PLANNED)
    by_hand = Toy(function=lambda ctx, inputs: ctx.store.read_table("tests", step=1))
    with pytest.raises(AttributeError, match="reads its declared inputs, not the run store"):
        by_hand.run(SimpleNamespace(store=store), PLANNED)
    assert store.writes == []
    store.reads.clear()
    missing = Toy(function=lambda ctx, inputs: {}, reads=(suite_part(None), chain_part(
        "generator", 2)))
    with pytest.raises(MissingInputError, match=r"toy of step 1 reads .*table=chains/"
                       r"step=000001/part-generator-2.parquet, which is not there"):
        missing.run(SimpleNamespace(store=store), PLANNED)
    assert store.reads == [] and store.writes == []  # refused before anything is read


@pytest.mark.slow
@pytest.mark.parametrize("chain", [ChainConfig(), ChainConfig(stages=(5,), discriminator=False)],
                         ids=["full-chain", "code-only"])
def test_each_item_of_a_tiny_step_reads_and_writes_exactly_what_it_declares(
        tiny_model_dir, tmp_path, monkeypatch, chain):
    from configs import load_config
    from lifecycle.context import RunContext
    from pipeline.schedule import plan

    monkeypatch.chdir(tmp_path)
    cfg = load_config(str(REPO / "configs/minimal.yaml"), [
        f"model.generator={tiny_model_dir}", f"artifacts.root={tmp_path / 'runs'}",
        f"chain.stages={list(chain.stages)}", f"chain.discriminator={chain.discriminator}",
        "schedule.stages=[5]", "schedule.n_discriminator_steps=0", "schedule.k_alternating=0",
        "sampling.max_new_tokens=12", "rewards.mutants_per_problem=1"])
    planned = plan(cfg.schedule)[0]
    ctx = RunContext.open(cfg, "declared")
    store = RecordingStore(ctx.store)
    ctx = dataclasses.replace(ctx, store=store)
    for item in work_items(chain):
        store.reads.clear()
        store.writes.clear()
        item.run(ctx, planned)
        assert store.reads == item.inputs(planned.role, planned.stage), item.name
        assert store.writes == item.outputs(planned.role), item.name
    on_disk = {(t, p) for t in ("chains", "tests", "executions", "rewards", "updates")
               for p in store.list_parts(t, 1)}
    assert on_disk == set(step_parts(planned.role, chain))
