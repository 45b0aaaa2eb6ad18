"""``benchmarks/learning.py``'s pure parts: each arm's overrides are a valid config that
differs from the adversarial arm's only where the arm says (the oracle arm's from the
baseline-only arm's in its problems' tests alone), and the summary table. (The benchmark
itself is a half-hour call: ``docs/training.md``.)"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.learning import BASELINE_ONLY, CONTROLS, Job, arm_sets, flow_command, oracle_source
from benchmarks.learning_report import ARMS, ORACLE, table
from configs import load_config
from problems.family import hidden_tests
from problems.loaders import load_problems

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


def _sets(cmd: list[str]) -> list[str]:
    return [cmd[i + 1] for i, word in enumerate(cmd) if word == "--set"]


def test_the_oracle_arm_differs_from_baseline_only_in_its_problems_tests_alone(tmp_path):
    args = argparse.Namespace(
        family="guards", stages=[1, 2, 3, 4, 5], disc_steps=1, gen_steps=1, alt_steps=2,
        problems=8, samples=4, lr=1e-4, disc_lr=3e-4, heldout=32, eval_samples=2,
        max_new_tokens=80, warm_limit=1600, set=[], generator_reward="all_pass",
        control="shuffled")
    cmd = {arm: flow_command(tmp_path, Job(0, arm), args, tmp_path / "tiny", "http://x/api")[0]
           for arm in ("baseline_only", ORACLE)}
    base, oracle = (_sets(cmd[a]) for a in ("baseline_only", ORACLE))
    source = oracle_source(tmp_path, "guards")
    named = [s.replace("s0-oracle", "s0-baseline_only") for s in oracle]  # its own run's names
    assert named == base + [f"problems.source={source}"]  # the last word wins
    cfg = {arm: load_config(TINY, sets) for arm, sets in (("base", base), ("oracle", named))}
    assert cfg["oracle"].problems.source == str(source)
    assert replace(cfg["oracle"], problems=cfg["base"].problems) == cfg["base"]
    # every run loads the call's own model folder, and a missing one is an error
    assert cfg["base"].model.generator == str(tmp_path / "tiny") and not cfg["base"].model.tiny

    family, stronger = load_problems("family:guards:train"), load_problems(str(source))
    assert [p.id for p in stronger] == [p.id for p in family]  # the same problems, in order
    for mine, theirs in zip(stronger, family, strict=True):
        assert (mine.reference_solution, mine.description, mine.entry_point) == (
            theirs.reference_solution, theirs.description, theirs.entry_point)
        assert list(mine.baseline_tests) == hidden_tests(theirs.id)
        assert set(theirs.baseline_tests) < set(mine.baseline_tests)  # strictly stronger


@pytest.mark.parametrize("sets, context", [([], 1024), (["model.max_context_tokens=512"], 512)])
def test_the_base_is_fitted_on_the_prompts_the_runs_render(monkeypatch, tmp_path, sets, context):
    """The base fit's token budget is the runs' ``model.max_context_tokens`` (tiny.yaml's, or
    the caller's ``--set``), not a second copy of it."""
    import pipeline.basefit
    from benchmarks.learning import fitted_base

    fits = []
    monkeypatch.setattr(pipeline.basefit, "fit_base_with_progress", lambda model, out, fit: (
        fits.append(fit) or {"problems": 1, "first_loss": 1.0, "last_loss": 0.5, "seconds": 0}))
    args = argparse.Namespace(family="guards", base_steps=7, set=sets)
    assert fitted_base(tmp_path / "tiny", tmp_path / "fitted", args) == tmp_path / "fitted"
    assert [(f.source, f.steps, f.max_context_tokens) for f in fits] == [
        ("family:guards:warmstart", 7, context)]
