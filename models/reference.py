"""The KL reference adapters of ``ppo.kl_reference: start``: each role's adapter as the run's
training began, kept for the whole run.

The reference is written once, when the run's start point is set (after the warm start or
``--init-from``; ``tasks.start``), into the resume store's ``reference/`` folder with the same
manifest as a resume state (sha256 per file, each role's ``adapter_version``), and loaded from
there wherever the run's recorded steps go on or are redone (a run resumed after a complete
step, a replay, ``--finish-failed``; ``lifecycle.context.RunContext``): so a run's KL term measures
against the same weights however often it is restarted, and a damaged copy is refused, not
used. A run with no complete step writes it again instead: an earlier attempt's copy, damaged
or not, is not what its steps start from.
"""

from __future__ import annotations

from pathlib import Path

from configs.names import ROLES
from models.policy import Policies
from models.resume import ResumeStore, StateIntegrityError, verify_state_files


def save_reference(resume: ResumeStore, policies: Policies) -> Path:
    """Both roles' adapters as they are now, as the run's reference (replacing any)."""
    def write(folder: Path) -> None:
        for role in ROLES:
            policies.save_adapter(role, folder / role)
    versions = {role: policies.adapter_version(role) for role in ROLES}
    return resume.write_folder(resume.reference_folder, 0, write, versions)


def attach_reference(resume: ResumeStore, policies: Policies) -> dict[str, str]:
    """Load the run's saved reference into ``policies`` (``Policies.set_reference``), after
    checking its files against its manifest, and the loaded versions after; returns role ->
    version. ``StateIntegrityError`` names what is missing or differs."""
    folder = resume.reference_folder
    check = verify_state_files(folder, ROLES, gae=False, optimizer=False,
                               require_verified=True)
    loaded = {}
    for role in ROLES:
        loaded[role] = policies.set_reference(role, folder / role)
        if loaded[role] != check.expected[role]:
            raise StateIntegrityError(
                f"{folder / role}: reference adapter_version expected {check.expected[role]} "
                f"(its manifest), loaded {loaded[role]}")
    return loaded
