"""The trusted side of a job: the message for the jail, and the verdicts read from its reply.

``build`` checks what it is given and makes the worker's message; ``judge`` turns the reply
into one ``TestOutcome`` per test: pytest's items through the one table
(``jailside.verdicts``), or the status the worker decided itself (timeout, crashed, ...).
Nothing the candidate printed is looked at, and no part of a test is evaluated here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sandbox.jail import MAX_TESTS
from sandbox.jailside.verdicts import ItemResult, short, verdict
from sandbox.result import ExecutionResult, Limits, TestOutcome, Trusted

WORKER_STATUSES = ("timeout", "crashed", "error", "failed", "infra")


@dataclass
class Prepared:
    msg: dict
    limits: Limits
    invalid: dict[int, str]     # test index -> why it was not sent (not a str)
    wire: list[int]             # indices of the tests sent, in order
    code_error: str | None = None

    @property
    def backstop_s(self) -> float:
        return self.msg["backstop"]


def backstop(limits: Limits) -> float:
    """Wall seconds one step may take, starved by the host, before the job is run again."""
    return max(30.0, 20 * limits.timeout_s)


def build(code: object, tests: Sequence[object], limits: Limits) -> Prepared:
    invalid = {i: "the test is not a str" for i, t in enumerate(tests) if not isinstance(t, str)}
    wire = [i for i in range(len(tests)) if i not in invalid]
    code_error = None
    if not isinstance(code, str):
        code_error = f"the candidate code is not a str but {type(code).__name__}"
    if len(wire) > MAX_TESTS:
        raise ValueError(f"a job may hold at most {MAX_TESTS} tests, got {len(wire)}")
    msg = {"code": code if isinstance(code, str) else "", "tests": [str(tests[i]) for i in wire],
           "shared": [j for j, i in enumerate(wire) if isinstance(tests[i], Trusted)],
           "timeout": float(limits.timeout_s), "out_cap": int(limits.max_output_bytes),
           "backstop": backstop(limits),
           "limits": {"mem": limits.memory_mb << 20, "fsize": limits.fsize_mb << 20,
                      "nofile": limits.nofile, "core": 0, "nproc": None}}
    return Prepared(msg, limits, invalid, wire, code_error)


def _module_outcome(res: object) -> TestOutcome:
    if not isinstance(res, dict):
        return TestOutcome("error", "malformed reply from the jail")
    dur = float(res["dur"]) if type(res.get("dur")) in (int, float) else 0.0
    status = res.get("status")
    message = res.get("msg") if isinstance(res.get("msg"), str) else ""
    if status is not None:
        status = status if status in WORKER_STATUSES else "error"
        return TestOutcome(status, short(message), dur)
    raw = res.get("items")
    if not isinstance(raw, list):
        return TestOutcome("error", "malformed reply from the jail", dur)
    try:
        items = tuple(ItemResult.from_list(i) for i in raw)
    except ValueError:
        return TestOutcome("error", "malformed reply from the jail", dur)
    status, message = verdict(items, res.get("body") is True)
    return TestOutcome(status, message, dur, items)


def judge(prepared: Prepared, reply: dict, isolation: str, duration_s: float) -> ExecutionResult:
    n = len(prepared.invalid) + len(prepared.wire)
    outcomes: list[TestOutcome | None] = [None] * n
    for i, why in prepared.invalid.items():
        outcomes[i] = TestOutcome("invalid", why)
    charged = reply.get("charged")
    failure = reply.get("worker_error")
    results = reply.get("tests") if isinstance(reply.get("tests"), list) else []
    for j, i in enumerate(prepared.wire):
        if prepared.code_error is not None:
            outcomes[i] = TestOutcome("error", prepared.code_error)
        elif isinstance(charged, list) and len(charged) == 2:  # twice in a fresh jail
            outcomes[i] = TestOutcome(str(charged[0]), short(charged[1]))
        elif j < len(results):
            outcomes[i] = _module_outcome(results[j])
        else:  # the harness failed and a run alone could not be had: no verdict
            outcomes[i] = TestOutcome("infra", short(f"sandbox worker failed: {failure}"))
    output = reply.get("output") if isinstance(reply.get("output"), str) else ""
    if reply.get("pidns") is True:
        isolation += "+pidns"
    return ExecutionResult(list(outcomes), isolation, output, duration_s,
                           prepared.limits.to_dict(), attempts=int(reply.get("attempts", 1)),
                           cost=_cost(reply),
                           cpu_s=float(reply["cpu_s"]) if type(reply.get("cpu_s")) in (int, float)
                           else 0.0)


def _cost(reply: dict) -> dict:
    """``ExecutionResult.cost`` from the worker's reply (numbers only; absent ones left out)."""
    cpu = reply.get("cpu") if isinstance(reply.get("cpu"), dict) else {}
    found = {"candidate_cpu_s": cpu.get("candidate"), "tests_cpu_s": cpu.get("tests"),
             "worker_s": reply.get("busy_s"), "sessions": reply.get("sessions")}
    return {k: v for k, v in found.items() if type(v) in (int, float)}
