"""Policies: LoRA training touches only adapters, adapters round-trip, shared-layout switching,
the reference policy, and the CUDA-only 4-bit path."""

from __future__ import annotations

import pytest
import torch

from configs.errors import ConfigError
from configs.schema import LoraConfig, ModelConfig
from models.policy import Policies, load_tokenizer


def cfg(tiny_model_dir, **overrides) -> ModelConfig:
    return ModelConfig(generator=str(tiny_model_dir), **overrides)



pytestmark = pytest.mark.usefixtures("one_thread")

@pytest.fixture
def policies(tiny_model_dir) -> Policies:
    """Fresh per test: training tests mutate the adapters."""
    return Policies.load(cfg(tiny_model_dir), LoraConfig(r=4, alpha=8))


def logits(model, batch) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=batch).logits


def train_step(policies: Policies, role: str, batch: torch.Tensor, lr: float = 0.05) -> None:
    """One AdamW step on the next-token loss (any differentiable loss will do here)."""
    model = policies.model_for(role)
    optimizer = torch.optim.AdamW(policies.trainable_parameters(role), lr=lr)
    loss = model(input_ids=batch, labels=batch).loss
    assert torch.isfinite(loss)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def test_tiny_model_uses_the_fast_tokenizer_class(tiny_model_dir):
    from transformers import PreTrainedTokenizerFast

    tokenizer = load_tokenizer(str(tiny_model_dir))
    assert isinstance(tokenizer, PreTrainedTokenizerFast)
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id is not None


def test_one_step_changes_lora_weights_and_not_base_weights(policies, batch):
    model = policies.model_for("generator")
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    version = policies.adapter_version("generator")
    train_step(policies, "generator", batch)
    after = dict(model.named_parameters())
    changed = {n for n, p in lora_before.items() if not torch.equal(p, after[n])}
    assert changed and all(".generator." in n for n in changed)
    assert all(".lora_B.generator." in n or ".lora_A.generator." in n for n in changed)
    assert not any(".discriminator." in n for n in changed)
    assert all(torch.equal(p, after[n]) for n, p in base_before.items())
    assert policies.adapter_version("generator") != version


def test_only_the_role_adapters_are_trainable(policies):
    model = policies.model_for("discriminator")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {n for n, _ in model.named_parameters() if ".discriminator." in n}
    assert {id(p) for p in policies.trainable_parameters("generator")}.isdisjoint(
        {id(p) for p in policies.trainable_parameters("discriminator")})


def test_adapter_save_and_load_round_trip(policies, batch, tmp_path):
    train_step(policies, "generator", batch)
    trained = logits(policies.model_for("generator"), batch)
    path = policies.save_adapter("generator", tmp_path / "gen")
    assert {p.name for p in path.iterdir()} == {"adapter_config.json",
                                                 "adapter_model.safetensors"}
    version = policies.adapter_version("generator")
    train_step(policies, "generator", batch)  # move away from the saved weights
    assert not torch.allclose(logits(policies.model_for("generator"), batch), trained)
    policies.load_adapter("generator", path)
    assert torch.equal(logits(policies.model_for("generator"), batch), trained)
    assert policies.adapter_version("generator") == version


def test_loading_an_adapter_of_another_shape_is_refused(policies, tiny_model_dir, tmp_path):
    other = Policies.load(cfg(tiny_model_dir), LoraConfig(r=2, alpha=8))
    path = other.save_adapter("generator", tmp_path / "r2")
    with pytest.raises(ConfigError, match="r=2"):
        policies.load_adapter("generator", path)


def test_shared_layout_switches_adapters_and_reference_is_the_base(policies, batch):
    gen_model = policies.model_for("generator")
    assert gen_model is policies.model_for("discriminator")  # one base model
    with policies.reference("generator") as ref:
        reference_before = logits(ref, batch)
    train_step(policies, "generator", batch)
    train_step(policies, "discriminator", batch, lr=0.02)
    gen = logits(policies.model_for("generator"), batch)
    disc = logits(policies.model_for("discriminator"), batch)
    assert not torch.allclose(gen, disc)
    assert torch.equal(logits(policies.model_for("generator"), batch), gen)  # switch back
    with policies.reference("discriminator") as ref:
        assert torch.equal(logits(ref, batch), reference_before)  # training left it alone
        assert not torch.is_grad_enabled()
    assert torch.equal(logits(policies.model_for("generator"), batch), gen)  # re-enabled


def test_separate_layout_has_two_base_models(tiny_model_dir, batch):
    policies = Policies.load(cfg(tiny_model_dir, layout="separate"), LoraConfig(r=4, alpha=8))
    assert policies.model_for("generator") is not policies.model_for("discriminator")
    train_step(policies, "generator", batch)
    with policies.reference("generator") as ref:
        base_gen = logits(ref, batch)
    assert torch.equal(base_gen, logits(policies.model_for("discriminator"), batch))


# The sampling twin computes (W + BA)x where the peft model computes Wx + B(Ax): the same
# maths, rounded differently. float32 keeps ~7 significant digits (eps 1.2e-7); the tiny
# model's logits are O(1-10) after two layers of 64-wide sums, so their rounding differences
# are O(1e-6) (7e-6 measured after five steps); 1e-4 leaves a 14x margin and still fails at
# once for a stale or wrong adapter (one training step at these learning rates moves the
# logits by > 1e-2, asserted below).
TWIN_ATOL = 1e-4


@pytest.mark.parametrize("layout", ["shared", "separate"])
def test_the_sampling_twin_is_each_roles_current_adapter_merged(tiny_model_dir, batch, layout):
    policies = Policies.load(cfg(tiny_model_dir, layout=layout), LoraConfig(r=4, alpha=8))
    for lr, role in ((0.05, "generator"), (0.02, "discriminator")):
        before = logits(policies.sampling_model(role), batch)
        train_step(policies, role, batch, lr=lr)
        after = logits(policies.sampling_model(role), batch)  # follows the update
        assert (after - before).abs().max() > 1e-2
    for role in ("generator", "discriminator", "generator"):  # switching back and forth
        twin = logits(policies.sampling_model(role), batch)
        peft = logits(policies.model_for(role), batch)
        assert (twin - peft).abs().max() < TWIN_ATOL, role
        assert policies.sampling_model(role) is not policies.model_for(role)
        assert not any(p.requires_grad for p in policies.sampling_model(role).parameters())
    base = policies.model_for("generator").get_base_model()
    assert not any("lora_" in n for n, _ in policies.sampling_model("generator").named_modules())
    assert any("lora_" in n for n, _ in base.named_modules())  # the trainer keeps its adapters


def test_default_target_modules_cover_attention_and_mlp(policies):
    config = policies.model_for("generator").peft_config["generator"]
    assert set(config.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                          "up_proj", "down_proj"}


def test_unknown_role_is_rejected(policies):
    with pytest.raises(ValueError, match="role='critic'"):
        policies.model_for("critic")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_4bit_is_refused_on_cpu_before_loading(tmp_path):
    # A folder that does not exist: the refusal must come before any loading is tried.
    model_cfg = ModelConfig(generator=str(tmp_path / "absent"), load_in_4bit=True)
    with pytest.raises(ConfigError, match="load_in_4bit=True.*CUDA only"):
        Policies.load(model_cfg, LoraConfig())
    with pytest.raises(ConfigError, match="no CUDA device"):
        Policies.load(ModelConfig(generator=str(tmp_path / "absent"), device="cuda"),
                      LoraConfig())


def test_gradient_checkpointing_gives_the_same_gradients(tiny_model_dir, batch):
    grads = []
    for checkpointing in (False, True):
        policies = Policies.load(cfg(tiny_model_dir, gradient_checkpointing=checkpointing),
                                 LoraConfig(r=4, alpha=8))
        model = policies.model_for("generator")
        assert model.get_base_model().is_activation_checkpointing == checkpointing
        model.train()  # transformers only checkpoints in training mode
        with torch.no_grad():  # non-zero lora_B so lora_A gets a gradient too
            for p in policies.trainable_parameters("generator"):
                p.add_(0.01)
        model(input_ids=batch, labels=batch).loss.backward()
        grads.append(torch.cat([p.grad.flatten()
                                for p in policies.trainable_parameters("generator")]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


@pytest.mark.gpu
def test_4bit_loads_and_trains_on_cuda(tiny_model_dir, batch):
    policies = Policies.load(cfg(tiny_model_dir, device="cuda", load_in_4bit=True,
                                 dtype="bfloat16"), LoraConfig(r=4, alpha=8))
    train_step(policies, "generator", batch.cuda())


def test_a_missing_model_folder_is_named_not_rebuilt_at_random(tmp_path, tiny_model_dir):
    """A local folder that holds no model is a ConfigError naming the key and the path (not
    transformers' word on repo ids), and nothing is written there; ``tiny`` true builds only
    the project's own folder for the tiny model (``tests/test_preflight.py``), not this one."""
    gone, empty = tmp_path / "fitted-base", tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match=rf"model\.generator={gone}: .* does not exist"):
        Policies.load(ModelConfig(generator=str(gone)), LoraConfig(r=4, alpha=8))
    assert not gone.exists()
    with pytest.raises(ConfigError, match="holds no config.json"):
        ModelConfig(generator=str(empty)).check_folders()
    with pytest.raises(ConfigError, match=r"model\.discriminator=.*does not exist"):
        ModelConfig(generator=str(tiny_model_dir), discriminator=str(gone),
                    layout="separate").check_folders()
    ModelConfig(generator="Qwen/Qwen2.5-0.5B").check_folders()  # a hub id: check_hub_ids'
    ModelConfig(generator=str(tiny_model_dir)).check_folders()
    with pytest.raises(ConfigError, match=rf"model\.generator={gone}: .*only at"):
        ModelConfig(generator=str(gone), tiny=True).check_folders()
