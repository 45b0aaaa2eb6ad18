"""The trusted side of a job: what goes into the jail, and the verdict on what comes back.

``build`` plans each test (split or whole) and produces the message for the worker: candidate
code, the calls of split tests (no expected values) and the source of whole tests with a fresh
random token each. ``judge`` decodes the reply strictly and decides every verdict here, in the
caller's process; nothing the candidate printed is looked at.
"""

from __future__ import annotations

import ast
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from sandbox.cost import Budget, EvalLimit, EvalTimeout
from sandbox.evaluate import SLOT_PREFIX, Evaluator, SlotRaised
from sandbox.plain import decode, encode
from sandbox.result import ExecutionResult, TestOutcome
from sandbox.split import (
    TEST_PRELUDE,
    BadTest,
    SplitTest,
    WholeTest,
    defined_names,
    plan_test,
    proxy_names,
)

RETRY_SECONDS = 10.0  # the wall-clock backstop of an assert's second evaluation
FSIZE_BYTES = 16 << 20
MAX_MESSAGE = 300


@dataclass
class Prepared:
    msg: dict
    plans: list[SplitTest | WholeTest | BadTest]
    tokens: dict[int, str]      # plan index -> token of a whole test
    wire_index: dict[int, int]  # plan index -> index in msg["tests"]


def build(code: str, tests: Sequence[str], *, timeout_s: float, memory_mb: int,
          max_output_bytes: int) -> Prepared:
    if not isinstance(code, str):  # a job's content never raises: every test records why
        code, why = "", f"candidate code is not a str but {type(code).__name__}"
        tests = [BadTest(repr(t)[:100], why) for t in tests]
    names = defined_names(code)
    # Candidate names a test may call: never a builtin or a prelude name, so an expected value
    # such as ``sorted([3, 1])`` uses the real ``sorted`` even where the candidate defines one.
    proxies = proxy_names(names)
    callable_names = set(proxies)
    plans = [t if isinstance(t, BadTest) else _plan_safely(t, callable_names) for t in tests]
    wire: list[dict] = []
    tokens: dict[int, str] = {}
    index: dict[int, int] = {}
    for i, plan in enumerate(plans):
        if isinstance(plan, SplitTest):
            calls = [[c.name, encode(list(c.args)), encode(c.kwargs)] for c in plan.calls]
            wire.append({"kind": "calls", "calls": calls})
        elif isinstance(plan, WholeTest):
            tokens[i] = secrets.token_hex(16)
            wire.append({"kind": "whole", "src": plan.source, "names": proxies,
                         "token": tokens[i]})
        else:
            continue
        index[i] = len(wire) - 1
    msg = {"code": code, "tests": wire, "timeout": float(timeout_s), "prelude": TEST_PRELUDE,
           "out_cap": int(max_output_bytes),
           "limits": {"mem": int(memory_mb) << 20, "fsize": FSIZE_BYTES, "nofile": 64,
                      "core": 0, "nproc": None}}
    return Prepared(msg, plans, tokens, index)


def _plan_safely(test: object, names: set[str]) -> SplitTest | WholeTest | BadTest:
    if not isinstance(test, str):
        return BadTest(repr(test)[:100], "test is not a str")
    try:
        return plan_test(test, names)
    except Exception as exc:  # planning is bounded; should anything slip, it is this test's
        return BadTest(test, _short(f"test could not be planned: {type(exc).__name__}: {exc}"))


def limits_of(prepared: Prepared) -> dict:
    """The limits every verdict of this job ran under (recorded with the result)."""
    msg = prepared.msg
    return {"timeout_s": msg["timeout"], "memory_mb": msg["limits"]["mem"] >> 20,
            "fsize_mb": msg["limits"]["fsize"] >> 20, "nofile": msg["limits"]["nofile"],
            "max_output_bytes": msg["out_cap"]}


def budget_s(prepared: Prepared) -> float:
    """Host-side ceiling for a whole job (the worker enforces the per-test limits)."""
    timeout = prepared.msg["timeout"]
    return (len(prepared.msg["tests"]) + 1) * (timeout + 0.5) + 10.0


def _short(text: object) -> str:
    text = str(text)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _shown(plan: SplitTest, expr: ast.expr) -> str:
    text = ast.unparse(expr)
    for i in range(len(plan.calls) - 1, -1, -1):  # slot10 before slot1
        text = text.replace(f"{SLOT_PREFIX}{i}", str(plan.calls[i]))
    return text


def _unfinished(res: dict, finished: str) -> tuple[float, TestOutcome | None]:
    """The reply's duration, and its outcome when the jail did not report ``finished``
    (anything but timeout/crashed/error from the jail counts as an error)."""
    dur = float(res.get("dur") or 0.0) if type(res.get("dur")) in (int, float) else 0.0
    status = res.get("status")
    poison = res.get("poison")
    if isinstance(poison, list) and len(poison) == 2:  # the candidate failed the test for good
        status = poison[0] if poison[0] in ("failed", "error", "crashed") else "error"
        return dur, TestOutcome(status, _short(poison[1]), dur)
    if status == finished:
        return dur, None
    status = status if status in ("timeout", "crashed", "error", "infra") else "error"
    return dur, TestOutcome(status, _short(res.get("msg", "")), dur)


def judge_split(plan: SplitTest, res: dict) -> TestOutcome:
    dur, failed = _unfinished(res, "ok")
    if failed:
        return failed
    values = res.get("values")
    if not isinstance(values, list) or len(values) != len(plan.calls):
        return TestOutcome("error", "malformed reply from the jail", dur)
    slots: dict[str, tuple[str, object]] = {}
    returned: list[str] = []
    for i, (call, v) in enumerate(zip(plan.calls, values, strict=True)):
        name = f"{SLOT_PREFIX}{i}"
        kind = v[0] if isinstance(v, list) and v else None
        if kind == "ok" and len(v) == 2:
            try:
                value = decode(v[1])
            except (ValueError, RecursionError) as exc:
                # A value that cannot be judged fails the test whether or not it is looked at.
                return TestOutcome("failed", _short(f"{call} returned undecodable data: {exc}"),
                                   dur)
            slots[name] = ("ok", value)
            returned.append(f"{call} returned {_short(repr_safe(value))}")
        elif kind == "raise" and len(v) == 5:
            what = _short(f"{call} raised {v[1]}: {_args_text(v[2])}")
            if v[4] is not False:  # SystemExit, StopIteration, ...: the call failed for good
                return TestOutcome("error", what, dur)
            slots[name] = ("error", what)
        elif kind == "bad" and len(v) == 2:
            return TestOutcome("failed", _short(f"{call}: {v[1]}"), dur)
        else:
            return TestOutcome("error", f"{call}: malformed reply from the jail", dur)
    evaluator = Evaluator(slots)
    for expr in plan.asserts:
        try:
            try:
                ok = bool(evaluator.eval(expr))
            except EvalTimeout:
                # Only the wall clock ran out, not the work budget: once more on a fresh budget
                # with RETRY_SECONDS, so a loaded host does not turn a right answer into an
                # error; an expression that is slow on its own is slow twice.
                evaluator = Evaluator(slots, Budget(seconds=RETRY_SECONDS))
                ok = bool(evaluator.eval(expr))
        except SlotRaised as exc:
            return TestOutcome(exc.status, exc.message, dur)
        except EvalLimit as exc:
            return TestOutcome("error", f"assert too costly to evaluate: {exc}", dur)
        except Exception as exc:  # TypeError, IndexError, ... as the assert would raise
            return TestOutcome("error", _short(f"assert raised {type(exc).__name__}: {exc}; "
                                               + "; ".join(returned)), dur)
        if not ok:
            return TestOutcome("failed", _short(f"assert {_shown(plan, expr)} is false; "
                                                + "; ".join(returned)), dur)
    return TestOutcome("passed", "", dur)


def _args_text(args: object) -> str:
    if isinstance(args, list) and len(args) == 1:
        return str(args[0])
    return str(args)


def repr_safe(value: object) -> str:
    try:
        return repr(value)
    except ValueError:  # int over the str-conversion limit
        return f"<{type(value).__name__}>"


def judge_whole(token: str, res: dict) -> TestOutcome:
    dur, failed = _unfinished(res, "done")
    if failed:
        return failed
    frame = res.get("frame")
    if frame == ["done", token]:
        return TestOutcome("passed", "", dur)
    if isinstance(frame, list) and len(frame) == 3 and frame[0] == "fail":
        return TestOutcome("failed" if frame[2] == "failed" else "error", _short(frame[1]), dur)
    if isinstance(frame, list) and len(frame) == 2 and frame[0] == "invalid":
        return TestOutcome("invalid", _short(f"test cannot run: {frame[1]}"), dur)
    return TestOutcome("error", "test process did not report completion", dur)


def judge(prepared: Prepared, reply: dict, isolation: str, duration_s: float) -> ExecutionResult:
    outcomes: list[TestOutcome] = []
    results = reply.get("tests") if isinstance(reply.get("tests"), list) else []
    failure = reply.get("worker_error")
    for i, plan in enumerate(prepared.plans):
        if isinstance(plan, BadTest):
            outcomes.append(TestOutcome("invalid", _short(plan.message)))
            continue
        j = prepared.wire_index[i]
        res = results[j] if j < len(results) and isinstance(results[j], dict) else None
        if res is None:  # the harness failed, not the code: never the candidate's verdict
            outcomes.append(TestOutcome("infra", _short(f"sandbox worker failed: {failure}")))
            continue
        try:
            if isinstance(plan, SplitTest):
                outcomes.append(judge_split(plan, res))
            else:
                outcomes.append(judge_whole(prepared.tokens[i], res))
        except Exception as exc:  # bounded by design; should anything slip, it is this test's
            outcomes.append(TestOutcome("error", _short(
                f"verdict could not be reached: {type(exc).__name__}: {exc}")))
    output = reply.get("output") if isinstance(reply.get("output"), str) else ""
    return ExecutionResult(outcomes, isolation, output, duration_s,
                           [isinstance(p, SplitTest) for p in prepared.plans],
                           limits_of(prepared))
