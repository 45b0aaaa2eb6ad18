"""The worker's reading of a test process's reports, frame by frame, trusting none of them.

A test process (T) runs test code, so everything it writes on its report pipe may be forged:
a test module's body can write any bytes there. A session's reports therefore speak only for
the modules that session runs (a test string that is not trusted runs alone, so its reports
can speak for itself only), and each frame is checked for its shape, its types and its size
before anything of it is kept (``parse``). A frame that fails the check is charged to the
module the session was at, as ``error``, with what was wrong.

What is kept of a module is bounded (``Module``): its first items up to a byte budget, and
after that only the items that decide its verdict (``verdicts.verdict``: the first item, the
first failed or errored one, a passed one), so a module that reports a million items gets the
verdict those items give and the reply to the host stays small.

Stdlib-only: the jail runs it.
"""

from __future__ import annotations

from .verdicts import MODULE_ITEM, ItemResult, short

MAX_FRAME = 64 << 10       # one report frame: an item's name and message are cut far below
MAX_FRAMES = 200_000       # report frames one session may send
MAX_TRIPS = 10 ** 12       # round trips a session's ``trips`` report may claim
MAX_JOB_ITEM_BYTES = 24 << 20  # item reports kept per job, shared out evenly by module
MIN_MODULE_BYTES = 8 << 10
STOPS = ("poison", "interrupted", "internal")
PHASES = ("load", "collect", "run")
CHARGEABLE = ("crashed", "error", "failed")


class Malformed(ValueError):
    """A report frame that no test process of this judge sends."""


def parse(frame: object, allowed: frozenset[int]) -> tuple:
    """One report frame, checked: ``("done",)``, ``("trips", count)``, ``("phase", index,
    what)``, ``("item", index, ItemResult)``, ``("body", index, bool)`` or ``("stop", status,
    message)``. ``allowed`` are the module indices this session runs; a frame about any other
    module, or of any other shape, raises ``Malformed``. ``count`` is the round trips to the
    candidate that T has started in this session (the worker's allowance for the boundary's
    own work, ``worker._Step``)."""
    if type(frame) is not list or not frame or type(frame[0]) is not str:
        raise Malformed("a report that is not a list headed by its kind")
    kind = frame[0]
    if kind == "done" and len(frame) == 1:
        return ("done",)
    if kind == "trips":
        if len(frame) == 2 and type(frame[1]) is int and 0 <= frame[1] <= MAX_TRIPS:
            return ("trips", frame[1])
        raise Malformed("a 'trips' report that is not one count of round trips")
    if kind in STOPS:
        return _stop(frame)
    if len(frame) != 3:
        raise Malformed(f"a {short(kind, 40)!r} report of {len(frame)} fields")
    index = frame[1]
    if type(index) is not int or not (index in allowed or (kind == "phase" and index == -1)):
        raise Malformed(f"a {short(kind, 40)!r} report about module {short(index, 40)}, "
                        "which this session does not run")
    value = frame[2]
    if kind == "phase" and value in PHASES:
        return ("phase", index, value)
    if kind == "body" and type(value) is bool:
        return ("body", index, value)
    if kind == "item":
        try:
            return ("item", index, ItemResult.from_list(value))
        except ValueError:
            raise Malformed("an item report of the wrong shape") from None
    raise Malformed(f"a {short(kind, 40)!r} report with a value of the wrong kind")


def _stop(frame: list) -> tuple:
    """``poison`` (``[kind, index, status, message]``) or ``interrupted``/``internal``
    (``[kind, index, message]``): the session ends with the module at hand charged."""
    if frame[0] == "poison" and len(frame) == 4 and type(frame[3]) is str:
        status = frame[2] if frame[2] in CHARGEABLE else "error"
        return ("stop", status, short(frame[3]))
    if frame[0] != "poison" and len(frame) == 3 and type(frame[2]) is str:
        return ("stop", "error", short(frame[2]))
    raise Malformed(f"a {frame[0]!r} report of the wrong shape")


class Session:
    """The reports of one session, in order: each frame ``parse``d, at most ``MAX_FRAMES`` of
    them, no phase reported twice running and no count of round trips lower than the one
    before (the count is the session's total so far). A phase starts a step's budgets, so a
    test that reported its own phase again and again would never run out of them: the load
    and a module's collection come once a session, a module's run again only after another
    module's (pytest may interleave modules' items when it groups them by fixture)."""

    def __init__(self, modules: list[int]):
        self.allowed = frozenset(modules)
        self.frames = 0
        self.trips = 0
        self.phases: set[tuple[int, str]] = set()
        self.last: tuple[int, str] | None = None

    def take(self, frame: object) -> tuple:
        self.frames += 1
        if self.frames > MAX_FRAMES:
            raise Malformed(f"more than {MAX_FRAMES} reports")
        report = parse(frame, self.allowed)
        if report[0] == "trips":
            if report[1] < self.trips:
                raise Malformed(f"a count of round trips that went down ({report[1]} after "
                                f"{self.trips})")
            self.trips = report[1]
        elif report[0] == "phase":
            phase = report[1:]
            if phase == self.last or (phase[1] != "run" and phase in self.phases):
                raise Malformed(f"a second {phase[1]!r} report for module {phase[0]}")
            self.phases.add(phase)
            self.last = phase
        return report


class Module:
    """What the worker learned of one test module."""

    def __init__(self, budget: int):
        self.budget = budget  # bytes of item reports kept beyond the deciding ones
        self.items: list[list] = []
        self.size = 0
        self.decided: set[str] = set()  # which deciding roles a kept item already plays
        self.body = False
        self.status: str | None = None
        self.message = ""
        self.duration = 0.0
        self.done = False

    def restart(self) -> None:
        """A fresh session collects the module again: what an earlier one reported goes."""
        self.items, self.size, self.decided, self.body = [], 0, set(), False

    def add(self, item: ItemResult) -> None:
        roles = self._roles(item)
        data = item.to_list()
        size = len(data[0]) + len(data[4]) + 32
        if self.size + size <= self.budget or roles - self.decided:
            self.items.append(data)
            self.size += size
            self.decided |= roles

    def _roles(self, item: ItemResult) -> set[str]:
        """The parts an item can play in ``verdicts.verdict``: the module's first item (the
        message of an all-skipped module), its failed collection, its first failing item, or
        one that passed."""
        roles = set() if self.items else {"first"}
        if item.name == MODULE_ITEM and item.outcome == "error":
            roles.add("collection")
        if item.outcome in ("failed", "error"):
            roles.add("failing")
        elif item.outcome == "passed":
            roles.add("passed")
        return roles

    def reply(self) -> dict:
        return {"items": self.items, "body": self.body, "status": self.status,
                "msg": self.message[:400], "dur": round(self.duration, 6)}


def module_budget(modules: int) -> int:
    """Bytes of item reports kept per module of a job of ``modules`` test modules."""
    return max(MIN_MODULE_BYTES, MAX_JOB_ITEM_BYTES // max(modules, 1))
