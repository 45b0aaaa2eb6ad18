"""The ``random`` generator across the boundary: the test's seeding reaches the candidate's
draws, as in one process, but nothing the candidate draws or sets reaches the test's own
generator, so a candidate can never choose the random inputs a test draws after calling it
(one process would let it: ``random.seed`` in the candidate's code steers every later draw)."""

from __future__ import annotations

import textwrap

from sandbox import execute_many

STEER = "import random\n\n\ndef steer():\n    random.seed(1234)\n    return 0\n"
SOLVE = textwrap.dedent('''
    import random

    def steer():
        random.random()
        return 0


    def square(x):
        return x * x
''')
PROPERTY = textwrap.dedent('''
    import random

    random.seed(0)
    mine = random.Random(0)
    for _ in range(20):
        assert random.random() == mine.random()
        steer()
''')
SEEDED = textwrap.dedent('''
    import random

    random.seed(7)
    got = [square(random.randint(1, 9)) for _ in range(5)]
    random.seed(7)
    assert got == [x * x for x in (random.randint(1, 9) for _ in range(5))]
''')
DRAWS = textwrap.dedent('''
    import random


    def draw():
        return random.random()
''')
SEED_REACHES = textwrap.dedent('''
    import random

    random.seed(3)
    first = draw()
    random.seed(3)
    assert first == random.random()
''')


def test_a_candidate_cannot_steer_the_tests_draws_but_the_tests_seed_reaches_it():
    steered, solving, seeded = execute_many([(STEER, [PROPERTY]), (SOLVE, [PROPERTY, SEEDED]),
                                             (DRAWS, [SEED_REACHES])])
    assert [o.status for o in steered.outcomes] == ["passed"], steered.outcomes
    assert [o.status for o in solving.outcomes] == ["passed", "passed"], solving.outcomes
    assert [o.status for o in seeded.outcomes] == ["passed"], seeded.outcomes
