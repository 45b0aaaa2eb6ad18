"""What vetting a problem source found (``problems.vet`` builds it): the valid problems, every
repaired baseline test, every skipped problem with its reasons, counts, a one-line summary and
the JSON form a run stores (``REPORT_FORMAT``).

    report.counts()      # {'total': 720, 'valid': ..., 'repaired_by': {...}, 'skipped_by': {...}}
    report.summary()     # 'SOURCE: 720 problem(s): 313 valid (34 repaired: ...), 407 skipped (...)'
    report.to_dict()     # what ``_run/problems.json`` holds
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from problems.model import Problem, ProblemIssue

REPORT_FORMAT = "problems.vet/1"


def by_count(counts: dict[str, int]) -> str:
    """A count by rule or reason as text: ``{'a': 2, 'b': 1}`` -> ``'a 2, b 1'``."""
    return ", ".join(f"{k} {v}" for k, v in counts.items())


@dataclass(frozen=True)
class RepairRecord:
    """One repaired baseline test: which problem and test, by which rule(s), before and after."""

    index: int
    problem_id: str
    field: str
    repairs: tuple[str, ...]
    before: str
    after: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.problem_id, "field": self.field,
                "repairs": list(self.repairs), "before": self.before, "after": self.after}

    def __str__(self) -> str:
        return (f"#{self.index} ({self.problem_id}): {self.field}: repaired "
                f"({'+'.join(self.repairs)}): {self.before!r:.80} -> {self.after!r:.80}")


@dataclass(frozen=True)
class SkippedProblem:
    index: int
    problem_id: str | None
    issues: tuple[ProblemIssue, ...]

    @property
    def kind(self) -> str:
        """The first reason (what the count by reason counts)."""
        return self.issues[0].kind or "other"

    @property
    def kinds(self) -> list[str]:
        return sorted({i.kind or "other" for i in self.issues})

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.problem_id, "kind": self.kind,
                "kinds": self.kinds,
                "issues": [{"field": i.field, "kind": i.kind, "reason": i.reason}
                           for i in self.issues]}

    def __str__(self) -> str:
        more = f" (+{len(self.issues) - 1} more)" if len(self.issues) > 1 else ""
        first = self.issues[0]
        who = f"#{self.index}" + (f" ({self.problem_id})" if self.problem_id else "")
        return f"{who}: {self.kind}: {first.field}: {first.reason}{more}"


@dataclass
class VetReport:
    """What vetting found: valid problems (repaired ones included), repairs, skipped problems."""

    source: str
    total: int
    problems: list[Problem] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    repairs: list[RepairRecord] = field(default_factory=list)
    skipped: list[SkippedProblem] = field(default_factory=list)
    executed: bool = False
    """Whether the references were run (``False``: structural checks only)."""
    timeout_s: float | None = None
    unchecked: int = 0
    """Structurally sound problems whose references were not run: beyond what a run uses
    (``problems.vet.load_for_run``)."""

    @property
    def issues(self) -> list[ProblemIssue]:
        return [i for s in self.skipped for i in s.issues]

    @property
    def repaired_ids(self) -> list[str]:
        return list(dict.fromkeys(r.problem_id for r in self.repairs))

    def counts(self) -> dict[str, Any]:
        by_rule: Counter[str] = Counter()
        for pid in self.repaired_ids:
            for name in sorted({n for r in self.repairs if r.problem_id == pid
                                for n in r.repairs}):
                by_rule[name] += 1
        return {"total": self.total, "valid": len(self.problems),
                "repaired": len(self.repaired_ids),
                "repaired_by": dict(by_rule.most_common()),
                "repaired_tests": len(self.repairs),
                "skipped": len(self.skipped),
                "skipped_by": dict(Counter(s.kind for s in self.skipped).most_common()),
                "unchecked": self.unchecked}

    def summary(self) -> str:
        """One line: ``SOURCE: 720 problems: 313 valid (34 repaired: ...), 407 skipped (...)``."""
        c = self.counts()
        repaired = f" ({c['repaired']} repaired: {by_count(c['repaired_by'])})" \
            if c["repaired"] else ""
        skipped = f" ({by_count(c['skipped_by'])})" if c["skipped"] else ""
        checked = ("; references not run" if not self.executed else
                   f"; {self.unchecked} not run (not used)" if self.unchecked else "")
        return (f"{self.source}: {c['total']} problem(s): {c['valid']} valid{repaired}, "
                f"{c['skipped']} skipped{skipped}{checked}")

    def to_dict(self) -> dict[str, Any]:
        return {"format": REPORT_FORMAT, "source": self.source, "executed": self.executed,
                "timeout_s": self.timeout_s, "counts": self.counts(),
                "repairs": [r.to_dict() for r in self.repairs],
                "skipped": [s.to_dict() for s in self.skipped],
                "valid_ids": [p.id for p in self.problems]}
