"""The worker's reading of a test process's reports (``sandbox.jailside.reports``): every frame
is checked for shape, types and the modules it may speak for, and what is kept of a module is
bounded while keeping every item its verdict depends on."""

from __future__ import annotations

import pytest

from sandbox.jailside.reports import MAX_TRIPS, Malformed, Module, Session, module_budget, parse
from sandbox.jailside.verdicts import MODULE_ITEM, ItemResult, verdict

ITEM = ["test_x", "passed", False, False, ""]
ALLOWED = frozenset({2})


@pytest.mark.parametrize("frame, parsed", [
    (["done"], ("done",)),
    (["phase", -1, "load"], ("phase", -1, "load")),
    (["phase", 2, "run"], ("phase", 2, "run")),
    (["body", 2, True], ("body", 2, True)),
    (["item", 2, ITEM], ("item", 2, ItemResult.from_list(ITEM))),
    (["poison", 2, "crashed", "it died"], ("stop", "crashed", "it died")),
    (["poison", 2, "passed", "it died"], ("stop", "error", "it died")),
    (["internal", 2, "pytest broke"], ("stop", "error", "pytest broke")),
])
def test_the_frames_a_test_process_sends_are_read(frame, parsed):
    assert parse(frame, ALLOWED) == parsed


@pytest.mark.parametrize("frame", [
    None, [], {"done": 1}, [1, 2, 3], ["done", 1],
    ["item", 3, ITEM],                 # a module this session does not run
    ["item", -1, ITEM], ["body", -1, True],
    ["item", 2.0, ITEM], ["item", True, ITEM], ["phase", "2", "run"],
    ["item", 2, ITEM[:4]], ["item", 2, ["x", "won", False, False, ""]],
    ["item", 2, ["x", "passed", 0, False, ""]], ["item", 2, {"name": "x"}],
    ["body", 2, 1], ["phase", 2, "finish"], ["phase", 2, "run", "extra"],
    ["poison", 2, "crashed"], ["poison", 2, "crashed", 7], ["internal", 2, None],
    ["unknown", 2, 0],
])
def test_any_other_frame_is_refused_by_name(frame):
    with pytest.raises(Malformed):
        parse(frame, ALLOWED)


def _item(name: str, outcome: str, message: str = "") -> ItemResult:
    return ItemResult(name, outcome, outcome == "failed", False, message)


@pytest.mark.parametrize("late", ["failed", "error", "passed"])
def test_a_module_past_its_budget_keeps_what_decides_its_verdict(late):
    bounded, full = Module(budget=2000), []
    first = "skipped" if late == "passed" else "passed"
    for i in range(5000):
        item = _item(f"test_many[{i}]", first, "x" * 40)
        bounded.add(item)
        full.append(item)
    last = _item("test_many[5000]", late, "the one that decides")
    bounded.add(last)
    full.append(last)
    kept = [ItemResult.from_list(i) for i in bounded.items]
    assert len(kept) < 100
    assert verdict(kept, False) == verdict(full, False)
    assert last in kept


def test_a_failed_collection_is_always_kept():
    module = Module(budget=0)
    module.add(_item(MODULE_ITEM, "error", "boom"))
    assert module.items == [[MODULE_ITEM, "error", False, False, "boom"]]


def test_a_restarted_module_forgets_what_it_was_told():
    module = Module(budget=100)
    module.add(_item("test_a", "passed"))
    module.body = True
    module.restart()
    assert (module.items, module.body, module.size) == ([], False, 0)


def test_the_budget_is_shared_out_by_module_count_with_a_floor():
    assert module_budget(1) > module_budget(100) > module_budget(4096) == 8 << 10


def test_a_session_refuses_a_phase_reported_again_which_would_restart_its_budgets():
    session = Session([0, 1])
    for frame in (["phase", -1, "load"], ["phase", 0, "collect"], ["phase", 1, "collect"],
                  ["phase", 0, "run"], ["phase", 1, "run"], ["phase", 0, "run"]):
        session.take(frame)  # a module's run may come back after another module's
    for again in (["phase", 0, "run"], ["phase", 1, "collect"], ["phase", -1, "load"]):
        with pytest.raises(Malformed, match="a second"):
            session.take(again)


def test_a_session_refuses_more_frames_than_its_bound(monkeypatch):
    monkeypatch.setattr("sandbox.jailside.reports.MAX_FRAMES", 3)
    session = Session([0])
    for _ in range(3):
        session.take(["body", 0, True])
    with pytest.raises(Malformed, match="more than 3"):
        session.take(["body", 0, True])


@pytest.mark.parametrize("count", [0, 256, MAX_TRIPS])
def test_a_count_of_round_trips_is_read(count):
    assert parse(["trips", count], ALLOWED) == ("trips", count)


@pytest.mark.parametrize("frame", [
    ["trips"], ["trips", 1, 2], ["trips", True], ["trips", -1], ["trips", MAX_TRIPS + 1],
    ["trips", 1.0], ["trips", "256"], ["trips", None], ["trips", [256]],
])
def test_a_count_of_round_trips_of_any_other_shape_is_refused(frame):
    with pytest.raises(Malformed, match="'trips'"):
        parse(frame, ALLOWED)


def test_a_session_refuses_a_count_of_round_trips_that_goes_down():
    session = Session([0])
    for frame in (["trips", 0], ["trips", 256], ["phase", -1, "load"], ["trips", 256],
                  ["trips", 512]):
        session.take(frame)  # the session's total so far: the same again is no news
    assert session.trips == 512
    with pytest.raises(Malformed, match="went down"):
        session.take(["trips", 511])


class _Pair:
    """What ``worker._Step`` reads of a pair: CPU set by the test, no run-queue wait."""

    def __init__(self):
        self.cpu = 0.0

    def used_cpu(self) -> float:
        return self.cpu

    def waited(self) -> float:
        return 0.0


def test_a_step_is_not_billed_for_its_round_trips_up_to_a_bounded_allowance():
    from sandbox.jailside import worker

    pair = _Pair()
    step = worker._Step(0, pair, True, trips=1000)  # the session's trips before the step
    pair.cpu = 1.0 + worker.TRIP_CPU_S * 10_000  # 10,000 round trips and 1 s of its own
    assert step.over(2.0, 1e9, trips=11_000) is None
    assert "beyond the" in step.over(0.5, 1e9, trips=11_000)
    assert step.over(2.0, 1e9, trips=1000).startswith("used ")  # none in this step
    assert step.over(2.0, 1e9, trips=0).startswith("used ")  # never negative
    pair.cpu = 2.0 * worker.TRIP_CREDIT + 1.9  # a forged count gets the bounded allowance
    assert step.over(2.0, 1e9, trips=10 ** 12) is None
    pair.cpu = 2.0 * worker.TRIP_CREDIT + 2.1
    assert "beyond the" in step.over(2.0, 1e9, trips=10 ** 12)


def test_a_step_is_not_billed_for_its_round_trips_wake_ups_either(monkeypatch):
    from sandbox.jailside import worker

    now = [100.0]
    monkeypatch.setattr(worker.time, "monotonic", lambda: now[0])
    step = worker._Step(0, _Pair(), True)
    now[0] += 1.0
    assert step.over(2.0, 1e9, trips=0) is None  # the first look: the baseline
    now[0] += 2.5  # 2.5 s neither running nor waiting for a CPU
    assert "neither running" in step.over(2.0, 1e9, trips=0)
    trips = int(1.0 / worker.TRIP_IDLE_S)  # whose wake-ups account for 1 s of it
    assert step.over(2.0, 1e9, trips=trips) is None
