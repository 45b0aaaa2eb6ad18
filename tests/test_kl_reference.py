"""``ppo.kl_reference: start``: the KL reference is each role's adapter as training began, saved
once beside the resume states, loaded into every model the run builds, and refused when
damaged; under ``base`` it stays the base model with adapters off."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_models_policy import cfg, logits, train_step

from configs import load_config
from configs.errors import ConfigError
from configs.names import ROLES
from configs.schema import LoraConfig
from models.policy import Policies, reference_name
from models.reference import attach_reference, save_reference
from models.resume import ResumeStore, StateIntegrityError

pytestmark = pytest.mark.usefixtures("one_thread")
MINIMAL = str(Path(__file__).resolve().parent.parent / "configs/minimal.yaml")
LORA = LoraConfig(r=4, alpha=8)


@pytest.fixture
def policies(tiny_model_dir) -> Policies:
    """Fresh per test, both adapters moved off the base (as a warm start leaves them)."""
    policies = Policies.load(cfg(tiny_model_dir), LORA)
    tokens = torch.tensor([[5, 9, 13, 21, 34, 55, 8]])
    for role in ROLES:
        train_step(policies, role, tokens)
    return policies


def reference_logits(policies: Policies, role: str, batch: torch.Tensor) -> torch.Tensor:
    with policies.reference(role) as ref:
        return logits(ref, batch)


def test_the_reference_is_the_saved_adapter_not_the_current_one_nor_the_base(
        policies, batch, tmp_path):
    start = logits(policies.model_for("generator"), batch)
    base = reference_logits(policies, "generator", batch)  # no reference yet: adapters off
    assert not torch.equal(start, base)
    path = policies.save_adapter("generator", tmp_path / "generator")
    version = policies.set_reference("generator", path)
    assert version == policies.adapter_version("generator")
    train_step(policies, "generator", batch)                # the policy moves on
    moved = logits(policies.model_for("generator"), batch)
    assert not torch.equal(moved, start)
    assert torch.equal(reference_logits(policies, "generator", batch), start)
    # the role's own adapter is active again after, and it alone is trained
    assert torch.equal(logits(policies.model_for("generator"), batch), moved)
    assert policies.has_reference("generator") and not policies.has_reference("discriminator")
    assert torch.equal(reference_logits(policies, "discriminator", batch), base)


def test_the_reference_adapter_is_never_trained(policies, batch, tmp_path):
    path = policies.save_adapter("generator", tmp_path / "generator")
    policies.set_reference("generator", path)
    marker = f".{reference_name('generator')}."
    trainable = policies.trainable_parameters("generator")
    model = policies.model_for("generator")
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if marker in n}
    assert frozen and not any(p.requires_grad for n, p in model.named_parameters()
                              if marker in n)
    assert not any(p is q for p in trainable for n, q in model.named_parameters() if marker in n)
    with policies.reference("generator"):
        pass
    train_step(policies, "generator", batch)
    train_step(policies, "discriminator", batch)
    after = dict(policies.model_for("generator").named_parameters())
    assert all(torch.equal(after[n], v) for n, v in frozen.items())
    assert not any(after[n].requires_grad for n in frozen)


def test_saved_reference_loads_into_new_models_and_damage_is_refused(
        policies, batch, tiny_model_dir, tmp_path):
    resume = ResumeStore(tmp_path / "state", "run")
    save_reference(resume, policies)
    expected = {role: policies.adapter_version(role) for role in ROLES}
    start = logits(policies.model_for("discriminator"), batch)

    fresh = Policies.load(cfg(tiny_model_dir), LORA)  # a resumed run's new models
    assert attach_reference(resume, fresh) == expected
    assert torch.equal(reference_logits(fresh, "discriminator", batch), start)

    weights = resume.reference_folder / "generator" / "adapter_model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-8:] = bytes(8)
    weights.write_bytes(bytes(data))
    with pytest.raises(StateIntegrityError, match="generator/adapter_model.safetensors"):
        attach_reference(resume, Policies.load(cfg(tiny_model_dir), LORA))


def context(tiny_model_dir, tmp_path, policies, reference: str):
    """A run context around ``policies`` (what ``RunContext.fix_reference`` reads)."""
    from lifecycle.context import RunContext

    train = load_config(MINIMAL, [f"model.generator={tiny_model_dir}",
                                  f"ppo.kl_reference={reference}"])
    return RunContext(cfg=train, run_id="run", store=None, problems=[],
                      resume=ResumeStore(tmp_path / "state", "run"), policies=policies)


def test_a_new_run_fixes_its_start_and_a_continued_run_keeps_it(
        policies, batch, tiny_model_dir, tmp_path):
    ctx = context(tiny_model_dir, tmp_path, policies, "start")
    start = logits(policies.model_for("generator"), batch)
    ctx.fix_reference(0)
    assert ctx.resume.reference_folder.is_dir()
    train_step(policies, "generator", batch)  # training, then the process stops
    moved = Policies.load(cfg(tiny_model_dir), LORA)
    train_step(moved, "generator", batch)     # the continued run's models: other weights
    ctx = context(tiny_model_dir, tmp_path, moved, "start")
    ctx.fix_reference(3)
    assert torch.equal(reference_logits(moved, "generator", batch), start)


def test_a_run_with_no_complete_step_fixes_its_start_again(
        policies, batch, tiny_model_dir, tmp_path):
    """An earlier attempt's reference (killed before step 1 completed, then started with
    other adapters) is replaced: the reference is what the steps start from."""
    context(tiny_model_dir, tmp_path, policies, "start").fix_reference(0)
    other = Policies.load(cfg(tiny_model_dir), LORA)
    train_step(other, "generator", batch)
    start = logits(other.model_for("generator"), batch)
    ctx = context(tiny_model_dir, tmp_path, other, "start")
    ctx.fix_reference(0)
    assert torch.equal(reference_logits(other, "generator", batch), start)
    assert attach_reference(ctx.resume, Policies.load(cfg(tiny_model_dir), LORA))[
        "generator"] == other.adapter_version("generator")


def test_a_damaged_reference_of_an_attempt_with_no_complete_step_is_replaced(
        policies, batch, tiny_model_dir, tmp_path):
    """A run's models load before its start point is known, so loading them leaves the
    reference alone: an earlier attempt's damaged copy (killed before step 1 completed) is
    written over by ``fix_reference(0)``, not refused before it can be."""
    ctx = context(tiny_model_dir, tmp_path, policies, "start")
    ctx.fix_reference(0)
    weights = ctx.resume.reference_folder / "generator" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8] + bytes(8))
    ctx.load_policies()  # the next attempt's models
    assert not ctx.policies.has_reference("generator")
    train_step(ctx.policies, "generator", batch)
    started = ctx.policies.adapter_version("generator")
    ctx.fix_reference(0)
    ctx.load_policies()
    assert attach_reference(ctx.resume, ctx.policies)["generator"] == started


def test_continuing_without_a_saved_reference_is_refused(policies, tiny_model_dir, tmp_path):
    ctx = context(tiny_model_dir, tmp_path, policies, "start")
    with pytest.raises(ConfigError, match="continues after step 2 but saved no reference"):
        ctx.fix_reference(2)
    assert not ctx.resume.reference_folder.exists()


def test_base_keeps_no_reference(policies, tiny_model_dir, tmp_path):
    ctx = context(tiny_model_dir, tmp_path, policies, "base")
    ctx.fix_reference(0)
    assert not ctx.resume.reference_folder.exists()
    assert not any(policies.has_reference(role) for role in ROLES)


def test_an_update_without_its_reference_is_refused(policies):
    from models.rolestate import build_role_states
    from pipeline.update import _update

    train = load_config(MINIMAL, ["ppo.kl_reference=start"])
    state = build_role_states(policies, train.ppo)["generator"]
    with pytest.raises(RuntimeError, match="generator has no reference adapter"):
        _update(state, None, train.sampling, train.ppo)


def test_kl_reference_is_checked():
    with pytest.raises(ConfigError, match="ppo.kl_reference='initial': must be 'base' or"):
        load_config(MINIMAL, ["ppo.kl_reference=initial"])
