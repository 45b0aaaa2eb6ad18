"""The sandbox judges as real pytest does: every pair of the differential corpus
(``tests/differential``: candidate code and a pytest test module, right and wrong, in every
shape a code model writes) gets the same verdict and the same per-item outcomes from the jail
as from real pytest run unjailed on the same files (``differential/reference.py``).

Both sides run the whole corpus once (a module fixture): the sandbox through one
``execute_many`` call while the reference runs beside it in a subprocess."""

from __future__ import annotations

from collections import Counter

import pytest
from differential import harness
from differential.corpus import all_pairs

MIN_PAIRS = 300
# Neither verdict may be rare: a judge that passed everything, or failed everything, must not
# agree with the reference by accident.
MIN_SHARE = 0.25


@pytest.fixture(scope="module")
def corpus():
    pairs = all_pairs()
    reference = harness.Reference(pairs)  # in the background, while the sandbox runs
    try:
        got = harness.sandbox_side(pairs)
    finally:
        ref = reference.results()
    return pairs, ref, got


def test_the_corpus_is_large_and_mixed(corpus):
    pairs, ref, _ = corpus
    assert len(pairs) >= MIN_PAIRS
    assert len({(p.code, p.test) for p in pairs}) == len(pairs), "every pair is distinct"
    statuses = Counter(r.status for r in ref)
    wrong = statuses["failed"] + statuses["error"]
    assert statuses["passed"] >= MIN_SHARE * len(pairs), statuses
    assert wrong >= MIN_SHARE * len(pairs), statuses
    assert {"skipped", "invalid"} <= set(statuses), statuses
    assert "timeout" not in statuses and "crashed" not in statuses, statuses
    outcomes = Counter(item[1] for r in ref for item in r.items)
    assert set(outcomes) == {"passed", "failed", "error", "skipped", "xfailed", "xpassed"}


def test_the_sandbox_agrees_with_pytest_on_every_pair(corpus):
    pairs, ref, got = corpus
    diffs = harness.compare(pairs, ref, got)
    assert not diffs, f"{len(diffs)} of {len(pairs)} pairs differ:\n\n" + "\n\n".join(diffs)


def test_a_difference_is_shown_readably():
    pair = all_pairs()[0]
    same = harness.Outcome("passed", (("test_a", "passed", False, False),), ("",))
    other = harness.Outcome("failed", (("test_a", "failed", True, False),), ("assert 1 == 2",),
                            "test_a: assert 1 == 2")
    assert harness.compare([pair], [same], [same]) == []
    (diff,) = harness.compare([pair], [same], [other])
    assert diff.startswith(pair.name) and "sandbox:" in diff and "pytest:" in diff
    assert "test_a failed A 'assert 1 == 2'" in diff
