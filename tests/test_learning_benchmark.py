"""``benchmarks/learning.py``'s pure parts: each arm's overrides are a valid config that
differs from the adversarial arm's only where the arm says, and the summary table. (The
benchmark itself is a 40-minute call: ``docs/training.md``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.learning import ARMS, BASELINE_ONLY, CONTROLS, arm_sets, table
from configs import load_config

TINY = str(Path(__file__).resolve().parent.parent / "configs" / "tiny.yaml")


@pytest.mark.parametrize("reward", sorted(BASELINE_ONLY))
@pytest.mark.parametrize("control", CONTROLS)
def test_each_arm_is_a_valid_config_that_differs_only_where_it_should(reward, control):
    cfg = {arm: load_config(TINY, arm_sets(arm, reward, control, seed=4)) for arm in ARMS}
    adv, ctrl, base = (cfg[a] for a in ARMS)
    assert adv.rewards.generator == {reward: 1.0} == ctrl.rewards.generator
    assert base.rewards.generator == {BASELINE_ONLY[reward]: 1.0}
    assert adv.rewards.shuffle_seed is None and base.rewards.shuffle_seed is None
    assert adv.ppo == base.ppo
    if control == "shuffled":  # trained like the adversarial arm, on permuted rewards
        assert ctrl.rewards.shuffle_seed == 4 and ctrl.ppo == adv.ppo
    else:  # frozen: nothing moves
        assert ctrl.rewards.shuffle_seed is None
        assert ctrl.ppo.learning_rate_for("generator") == 0
        assert ctrl.ppo.learning_rate_for("discriminator") == 0
    assert ctrl.sampling == adv.sampling == base.sampling


def test_the_table_shows_each_arms_before_and_after():
    def arm(p0, p1, w0, w1, late=None):
        return [{"metrics": {"pass_at_1": p0, "wrong_caught": w0}},
                {"metrics": {"pass_at_1": p1, "wrong_caught": w1, "stage_new_tests": 0.25,
                             "late_catch": late}}]

    text = table({3: {"adversarial": arm(0.1, 0.3, 0.4, 0.9, 0.75),
                      "control": arm(0.1, 0.0, 0.4, 0.2),
                      "baseline_only": arm(0.1, 0.2, 0.4, 0.5)}})
    header, row = text.splitlines()
    assert header.split("|")[0].split() == ["seed", "pass@1", "before", "adv", "ctrl", "base"]
    assert row.split() == ["3", "0.100", "0.300", "0.000", "0.200", "|", "0.400", "0.900",
                           "0.200", "|", "0.250", "0.750"]
