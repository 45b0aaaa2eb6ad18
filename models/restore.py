"""Saving both roles into a resume state and loading them back, checked: the logic that sits
between the resume store (``models.resume``: folders, manifests, file checks) and each role's
trainable state (``models.rolestate.RoleState``).

Every load checks the state's files against its manifest before anything is loaded, and the
loaded adapters' versions after. A state written before manifests existed (``legacy``) is
loaded with one warning, and only where the caller can check its versions against the run's
record (:func:`restore_state` requires it; :func:`restore_role`'s caller checks them).
"""

from __future__ import annotations

from pathlib import Path

from configs.names import ROLES
from models.resume import (
    ADAPTER_FILE,
    STATE_MANIFEST,
    ResumeStore,
    StateCheck,
    StateFileMissingError,
    StateIntegrityError,
    optimizer_file,
    verify_state_files,
)
from models.rolestate import RoleState


def save_state(resume: ResumeStore, step: int, roles: dict[str, RoleState]) -> Path:
    """Both roles' state after ``step``, atomically, with a manifest written last."""
    def write(folder: Path) -> None:
        for role in ROLES:
            roles[role].save(folder / role, optimizer_file(folder, role))
    return resume.save(step, write, {r: roles[r].version for r in ROLES})


def restore_role(roles: dict[str, RoleState], role: str, folder: Path,
                 optimizer: bool = True) -> None:
    """Load ``role`` from a resume state folder, after checking its files against the folder's
    manifest, and its loaded ``adapter_version`` after. A state without a manifest is loaded
    with a warning: the caller checks the loaded version against the run's record
    (``lifecycle.recorded.load_start_state`` does)."""
    check = verify_state_files(folder, [role], gae=roles[role].value_head is not None,
                               optimizer=optimizer)
    _load(roles, [role], folder, check, optimizer, legacy_note="'s files are not checked by "
          "hash")


def restore_state(resume: ResumeStore, step: int, roles: dict[str, RoleState], *, gae: bool,
                  recorded: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Load the state saved after ``step``: every file of both roles is checked against the
    state's manifest and the manifest's versions against the run's record (``recorded``: role
    -> (version, where it was recorded)) before anything is loaded; the loaded adapters'
    versions are checked after. Raises ``StateIntegrityError`` naming the file with expected
    and found values. A state without a manifest is accepted only when every role's adapter
    file holds the version the run's tables record (with a warning: its optimizer and value
    head files cannot be checked). Returns role -> version."""
    folder = resume.folder(step)
    if not folder.is_dir():
        raise StateFileMissingError(f"{folder}: no resume state for step {step}")
    check = verify_state_files(folder, ROLES, gae=gae, optimizer=True, recorded=recorded,
                               require_verified=True)
    note = (" hold the versions the run recorded (" + ", ".join(
        f"{r} {v} from the {recorded[r][1]}" for r, v in check.expected.items())
        + "), its optimizer and value head files cannot be checked")
    _load(roles, list(ROLES), folder, check, optimizer=True, legacy_note=note)
    return {role: roles[role].version for role in ROLES}


def _load(roles: dict[str, RoleState], names: list[str], folder: Path, check: StateCheck,
          optimizer: bool, legacy_note: str) -> None:
    """Load ``names`` from a checked folder; then the loaded versions must be the expected."""
    if check.legacy:
        who = names[0] if len(names) == 1 else "its adapters"
        print(f"warning: {folder}: no {STATE_MANIFEST} (written before resume states had "
              f"one): {who}{legacy_note}")
    try:
        for role in names:
            roles[role].load(folder / role, optimizer_file(folder, role) if optimizer else None)
    except StateIntegrityError as exc:  # part of the state may be loaded already
        raise StateIntegrityError(str(exc), loaded=True) from None
    for role, version in check.expected.items():
        found = roles[role].version
        if version is not None and found != version:
            raise StateIntegrityError(
                f"{folder / role / ADAPTER_FILE}: {role} adapter_version after loading is "
                f"{found}, expected {version}", loaded=True)
