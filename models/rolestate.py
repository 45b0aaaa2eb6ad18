"""What PPO trains for one role, and its one save/load.

A role's state is its LoRA adapter (inside the shared ``Policies``), its value head under
``ppo.advantage=gae`` and its optimizer. ``RoleState.save``/``load`` write and read it as

    <adapter_dir>/adapter_model.safetensors, adapter_config.json[, value_head.safetensors]
    <optimizer_file>

which is what a resume state holds per role (``models.resume``), what an MLflow stage
checkpoint copies (its ``adapter/`` folder and ``optimizer.pt``, ``artifacts.checkpoints``)
and what a registry version serves (the adapter folder). A file that cannot be read raises
``StateIntegrityError`` naming it, never a bare safetensors or torch error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from configs.errors import ConfigError
from configs.names import ROLES
from configs.schema import PPOConfig
from models.policy import Policies
from models.ppo import ValueHead, make_optimizer
from models.resume import ADAPTER_FILE, VALUE_HEAD_FILE, StateFileMissingError, StateIntegrityError


@dataclass
class RoleState:
    """One role's trainable state: adapter (in ``policies``), value head (GAE) and optimizer."""

    role: str
    policies: Policies
    optimizer: torch.optim.Optimizer
    value_head: ValueHead | None = None

    @classmethod
    def build(cls, policies: Policies, role: str, ppo: PPOConfig) -> RoleState:
        """A fresh state: a value head on the role's final hidden states under GAE, and an
        optimizer over everything PPO trains."""
        head = None
        if ppo.advantage == "gae":
            model = policies.model_for(role)
            device = next(model.parameters()).device
            head = ValueHead(model.config.hidden_size).to(device)
        params = policies.trainable_parameters(role) + (
            list(head.parameters()) if head is not None else [])
        return cls(role, policies, make_optimizer(params, ppo, role), head)

    def parameters(self) -> list[torch.nn.Parameter]:
        """What PPO trains: the LoRA adapter, plus the value head under GAE."""
        head = [] if self.value_head is None else list(self.value_head.parameters())
        return self.policies.trainable_parameters(self.role) + head

    @property
    def version(self) -> str:
        """Content hash of the adapter's weights (``Policies.adapter_version``)."""
        return self.policies.adapter_version(self.role)

    @property
    def learning_rate(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def save(self, adapter_dir: Path, optimizer_file: Path | None) -> None:
        """Adapter (with the value head inside its folder) and, when given, optimizer."""
        self.policies.save_adapter(self.role, adapter_dir)
        if self.value_head is not None:
            save_file({k: v.detach().cpu().contiguous()
                       for k, v in self.value_head.state_dict().items()},
                      adapter_dir / VALUE_HEAD_FILE)
        if optimizer_file is not None:
            torch.save(self.optimizer.state_dict(), optimizer_file)

    def load(self, adapter_dir: Path, optimizer_file: Path | None) -> None:
        """Inverse of :meth:`save` (the optimizer only when ``optimizer_file`` is given). The
        caller checks the files' hashes first (``models.resume.verify_state_files``)."""
        role = self.role
        try:
            self.policies.load_adapter(role, adapter_dir)
        except (ConfigError, StateIntegrityError):
            raise
        except Exception as exc:  # SafetensorError, JSON, shape errors: a damaged adapter
            raise StateIntegrityError(f"{adapter_dir / ADAPTER_FILE}: cannot load {role}'s "
                                      f"adapter ({type(exc).__name__}: {exc})") from None
        if self.value_head is not None:
            path = adapter_dir / VALUE_HEAD_FILE
            if not path.is_file():
                raise StateFileMissingError(f"{path}: ppo.advantage='gae' but this state has no "
                                            f"value head for {role}")
            head = self.value_head
            try:
                head.load_state_dict(load_file(path, device=str(head.proj.weight.device)))
            except Exception as exc:
                raise StateIntegrityError(f"{path}: cannot load {role}'s value head "
                                          f"({type(exc).__name__}: {exc})") from None
        if optimizer_file is not None:
            try:
                self.optimizer.load_state_dict(torch.load(optimizer_file, weights_only=True))
            except Exception as exc:
                raise StateIntegrityError(f"{optimizer_file}: cannot load {role}'s optimizer "
                                          f"state ({type(exc).__name__}: {exc})") from None


def build_role_states(policies: Policies, ppo: PPOConfig) -> dict[str, RoleState]:
    return {role: RoleState.build(policies, role, ppo) for role in ROLES}
