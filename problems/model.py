"""The ``Problem`` record and the issue type that validation and loading report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

DIFFICULTIES = ("easy", "medium", "hard")
DIFFICULTY_RANK = {name: rank for rank, name in enumerate(DIFFICULTIES)}


@dataclass(frozen=True)
class Problem:
    """One coding problem with ground truth.

    ``baseline_tests`` are runnable snippets (statements, usually one ``assert``) that call
    ``entry_point``. ``preamble`` is code the problem's environment provides to every program
    (imports, helper functions, LeetCode's implicit imports); :meth:`program` prepends it, so a
    candidate is judged in the same environment as the reference.
    """

    id: str
    description: str
    function_signature: str
    entry_point: str
    baseline_tests: tuple[str, ...]
    reference_solution: str
    difficulty: str = "unknown"
    tags: tuple[str, ...] = ()
    preamble: str = ""
    source: str = ""

    def program(self, code: str) -> str:
        """``code`` as it runs: the preamble, then the code."""
        return f"{self.preamble}\n{code}" if self.preamble else code

    @property
    def reference_program(self) -> str:
        return self.program(self.reference_solution)

    def to_row(self) -> dict:
        """Plain dict (lists, not tuples) for JSON, JSONL and Parquet."""
        row = asdict(self)
        row["baseline_tests"] = list(self.baseline_tests)
        row["tags"] = list(self.tags)
        return row


@dataclass(frozen=True)
class ProblemIssue:
    """What is wrong with one problem: where it came from, which field, and why."""

    source: str
    index: int
    problem_id: str | None
    field: str
    reason: str
    kind: str = ""
    """A short code for counting (``missing_field``, ``no_baseline_tests``, ``wrong_answer``...)."""

    def __str__(self) -> str:
        who = f"#{self.index}" + (f" ({self.problem_id})" if self.problem_id else "")
        return f"{self.source}: {who}: {self.field}: {self.reason}"


class ProblemLoadError(ValueError):
    """Loading found bad problems; ``issues`` lists every one of them."""

    def __init__(self, source: str, issues: list[ProblemIssue] = (), message: str = ""):
        self.source = source
        self.issues = list(issues)
        if not message:
            shown = "\n  ".join(str(i) for i in self.issues[:50])
            more = f"\n  ... and {len(self.issues) - 50} more" if len(self.issues) > 50 else ""
            message = (f"{source}: {len(self.issues)} problem issue(s)"
                       f" (python -m problems validate {source} lists them all):\n  {shown}{more}")
        super().__init__(message)


@dataclass
class ProblemSet:
    """Problems that loaded cleanly plus the issues of those that did not."""

    source: str
    problems: list[Problem] = field(default_factory=list)
    issues: list[ProblemIssue] = field(default_factory=list)
    indices: list[int] = field(default_factory=list)
    """Each problem's index in the source (parallel to ``problems``)."""
    records: list = field(default_factory=list)
    """Each problem's raw record (parallel to ``problems``): what repairs work from."""
    total: int = 0
    """Records in the source, good and bad."""
