"""Resume states: one folder per step holding both roles' state, the manifest that proves it,
and the checks run on it.

    <state root>/step=000012/
        generator/adapter_model.safetensors, adapter_config.json[, value_head.safetensors]
        generator-optimizer.pt
        discriminator/...
        manifest.json          # written last: sha256 and size of every file, adapter versions

``ResumeStore`` writes a state atomically (a temp folder renamed), keeps the last few, and
lists and sets them aside; each role's files are written and read by ``RoleState``
(``models.rolestate``), the one save/load of a role that resume states, MLflow stage
checkpoints and registry versions share. The checks read files only, no model and no Prefect:
the CLI runs them before Prefect starts, and the run context runs them again before it loads
anything from a state.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from safetensors.torch import load_file

from artifacts.checkpoints import sha256_file
from artifacts.convert import ArtifactError
from artifacts.store import RunStore
from configs.names import ROLES
from models.policy import tensors_version

VALUE_HEAD_FILE = "value_head.safetensors"  # inside a role's adapter folder (GAE runs only)
ADAPTER_FILE = "adapter_model.safetensors"  # a role's weights in its adapter folder
ADAPTER_CONFIG_FILE = "adapter_config.json"
STATE_MANIFEST = "manifest.json"  # in a resume state folder: sha256 per file, adapter versions
STATE_FORMAT = "runtime.state/1"
DAMAGED_PREFIX = "damaged-"  # a state folder that failed its check, kept aside for inspection


class StateIntegrityError(ArtifactError):
    """A resume state is damaged, incomplete or cannot be verified. The message names the file
    and what was expected and found; ``loaded`` says whether weights were already loaded from
    it (only a version that differs after loading)."""

    def __init__(self, message: str, *, loaded: bool = False) -> None:
        super().__init__(message)
        self.loaded = loaded


class StateFileMissingError(StateIntegrityError, FileNotFoundError):
    """A resume state, or a file it needs, is not there."""


def optimizer_file(folder: Path, role: str) -> Path:
    """Where a resume state folder keeps ``role``'s optimizer state."""
    return folder / f"{role}-optimizer.pt"


# -- resume state checks (files only, no model: the CLI runs them before Prefect starts) ------

def state_files(folder: Path) -> list[str]:
    """Every file of a state folder but its manifest, as relative posix paths."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() and p.relative_to(folder).as_posix() != STATE_MANIFEST)


def state_steps(state_dir: Path) -> list[int]:
    return sorted(int(p.name.split("=")[1]) for p in state_dir.glob("step=*"))


def adapter_file_version(path: Path) -> str:
    """``adapter_version`` of the weights in an ``adapter_model.safetensors`` (what
    ``Policies.adapter_version`` gives once they are loaded); ``StateIntegrityError`` when the
    file cannot be read."""
    try:
        return tensors_version(load_file(path))
    except Exception as exc:  # SafetensorError on a truncated or scrambled file, OSError
        raise StateIntegrityError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None


def _version_or_reason(path: Path) -> str:
    try:
        return adapter_file_version(path)
    except StateIntegrityError as exc:
        return str(exc).split(": ", 1)[1]


def recorded_state_versions(store: RunStore, step: int) -> dict[str, tuple[str, str]]:
    """What the run's tables say each role's adapter was after ``step``: the
    ``adapter_version_after`` of the role's last update at or before ``step`` (the updates
    table, read back from ``step``), or, for a role not updated by then, the
    ``adapter_version`` its step-1 chains were sampled with. Role -> (version, where it was
    read); a role whose record is missing or unreadable is left out."""
    out: dict[str, tuple[str, str]] = {}
    for at in range(step, 0, -1):
        try:
            rows = store.read_table("updates", step=at,
                                    columns=["role", "adapter_version_after"]).to_pylist()
        except (ArtifactError, OSError):
            rows = []
        if not rows:  # which role this step updated is unknown: older records may be stale
            return out
        for row in rows:
            if row["role"] in ROLES and row["adapter_version_after"]:
                out.setdefault(row["role"], (row["adapter_version_after"],
                                             f"updates table, step {at}"))
        if len(out) == len(ROLES):
            return out
    for role in ROLES:  # every step read back to step 1: these roles were never updated
        if role in out:
            continue
        try:
            rows = store.read_table("chains", step=1, part=f"{role}-1",
                                    columns=["adapter_version"]).to_pylist()
        except (ArtifactError, OSError):
            continue
        if rows and rows[0]["adapter_version"]:
            out[role] = (rows[0]["adapter_version"],
                         "chains table, step 1 (sampled before any update)")
    return out


@dataclass(frozen=True)
class StateCheck:
    """What :func:`verify_state_files` found: the version each role's adapter must have once
    loaded (None: not known), and whether the state predates manifests."""

    expected: dict[str, str | None]
    legacy: bool


def _read_state_manifest(folder: Path) -> dict | None:
    path = folder / STATE_MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise StateIntegrityError(f"{path}: unreadable ({exc})") from None
    ok = (isinstance(data, dict) and data.get("format") == STATE_FORMAT
          and isinstance(data.get("files"), dict)
          and isinstance(data.get("adapter_versions"), dict))
    if not ok:
        raise StateIntegrityError(f"{path}: not a {STATE_FORMAT} manifest")
    return data


def verify_state_files(folder: Path, roles: list[str] | tuple[str, ...], *, gae: bool,
                       optimizer: bool = True,
                       recorded: dict[str, tuple[str, str]] | None = None,
                       require_verified: bool = False) -> StateCheck:
    """Check ``roles``' files in a resume state folder before anything is loaded from it.

    With a manifest: every file of those roles (adapter weights and config, value head,
    optimizer) must be there with the recorded sha256, and the manifest's ``adapter_version``
    must equal ``recorded`` where the run recorded one. Without (a state written before
    manifests): each adapter file's version must equal ``recorded``; with
    ``require_verified`` a role the run recorded no version for is refused, else it is
    left to the caller. Raises ``StateIntegrityError`` naming the first bad file with the
    expected and found sha256 / ``adapter_version``."""
    recorded = recorded or {}
    manifest = _read_state_manifest(folder)
    needed = []
    for role in roles:
        needed += [f"{role}/{ADAPTER_FILE}", f"{role}/{ADAPTER_CONFIG_FILE}"]
        if gae:
            needed.append(f"{role}/{VALUE_HEAD_FILE}")
        if optimizer:
            needed.append(optimizer_file(Path(), role).as_posix())
    for rel in needed:
        if not (folder / rel).is_file():
            role = rel.split("/")[0].split("-")[0]
            what = (f"ppo.advantage='gae' but this state has no value head for {role}"
                    if rel.endswith(VALUE_HEAD_FILE) else "missing from this resume state")
            raise StateFileMissingError(f"{folder / rel}: {what}")
    if manifest is None:
        expected: dict[str, str | None] = {}
        for role in roles:
            path = folder / role / ADAPTER_FILE
            found = adapter_file_version(path)
            if role not in recorded:
                if require_verified:
                    raise StateIntegrityError(
                        f"{folder}: no {STATE_MANIFEST} (written before resume states had "
                        f"one) and the run records no adapter_version for {role} at this step; "
                        f"{path} (adapter_version {found}) cannot be verified")
                expected[role] = None
                continue
            version, source = recorded[role]
            if found != version:
                raise StateIntegrityError(
                    f"{path}: {role} adapter_version expected {version} (the {source}), "
                    f"found {found}")
            expected[role] = version
        return StateCheck(expected, legacy=True)

    listed = manifest["files"]
    mine = [rel for rel in listed
            if rel.split("/")[0] in roles
            or (optimizer and rel in {optimizer_file(Path(), r).as_posix() for r in roles})]
    for rel in needed:
        if rel not in listed:
            raise StateIntegrityError(f"{folder / rel}: not listed in {folder / STATE_MANIFEST} "
                                      "(cannot be verified)")
    for rel in sorted(mine):
        path, entry = folder / rel, listed[rel]
        if not path.is_file():
            raise StateFileMissingError(f"{path}: missing (listed in {STATE_MANIFEST})")
        digest, size = sha256_file(path), path.stat().st_size
        if digest == entry.get("sha256"):
            continue
        detail = (f"sha256 expected {str(entry.get('sha256'))[:16]}, found {digest[:16]}; "
                  f"{entry.get('bytes')} bytes expected, {size} found")
        role = rel.split("/")[0]
        if rel.endswith(f"/{ADAPTER_FILE}"):
            detail = (f"{role} adapter_version expected {manifest['adapter_versions'].get(role)}, "
                      f"found {_version_or_reason(path)}; {detail}")
        raise StateIntegrityError(f"{path}: content differs from {STATE_MANIFEST} ({detail})")
    expected = {}
    for role in roles:
        version = manifest["adapter_versions"].get(role)
        if not version:
            raise StateIntegrityError(f"{folder / STATE_MANIFEST}: records no adapter_version "
                                      f"for {role}")
        if role in recorded and recorded[role][0] != version:
            raise StateIntegrityError(
                f"{folder / role / ADAPTER_FILE}: {role} adapter_version expected "
                f"{recorded[role][0]} (the {recorded[role][1]}), found {version} (its "
                f"{STATE_MANIFEST}, whose files are intact)")
        expected[role] = version
    return StateCheck(expected, legacy=False)


STATE_KEEP = 2  # resume states kept per run: the last complete step's and the one after it


class ResumeStore:
    """The resume states of one run, in a local folder (peft writes local files)."""

    def __init__(self, root: Path, run_id: str, keep: int = STATE_KEEP) -> None:
        self.root, self.run_id, self.keep = Path(root), run_id, keep

    @classmethod
    def for_run(cls, artifacts_root: str, run_id: str) -> ResumeStore:
        """Next to the Parquet store when that is a local folder, else under
        ``.cache/state/<run_id>``."""
        if "://" in artifacts_root and not artifacts_root.startswith("file://"):
            return cls(Path(".cache") / "state" / run_id, run_id)
        return cls(Path(artifacts_root.removeprefix("file://")) / "_state" / f"run_id={run_id}",
                   run_id)

    def folder(self, step: int) -> Path:
        return self.root / f"step={step:06d}"

    def steps(self) -> list[int]:
        return state_steps(self.root)

    @property
    def reference_folder(self) -> Path:
        """The KL reference adapters of ``ppo.kl_reference: start`` (``models.reference``):
        written once, as training begins, and never pruned with the states."""
        return self.root / "reference"

    def save(self, step: int, write: Callable[[Path], None],
             adapter_versions: dict[str, str]) -> Path:
        """A new state for ``step``: ``write(tmp)`` fills a temp folder, the manifest (sha256
        and size of every file, each role's ``adapter_version``) is written last, and the
        folder is renamed into place, so a kill leaves either the whole state or none of it.
        Only the last ``keep`` states stay."""
        final = self.write_folder(self.folder(step), step, write, adapter_versions)
        for old in sorted(self.root.glob("step=*"))[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def write_folder(self, final: Path, step: int, write: Callable[[Path], None],
                     adapter_versions: dict[str, str]) -> Path:
        """``final`` (a folder of this store) filled by ``write`` with a manifest written
        last, atomically (see :meth:`save`); what was there before is replaced."""
        tmp = final.with_name(f".tmp-{final.name}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        write(tmp)
        manifest = {"format": STATE_FORMAT, "run_id": self.run_id, "step": int(step),
                    "created_at": time.time(), "adapter_versions": dict(adapter_versions),
                    "files": {rel: {"sha256": sha256_file(tmp / rel),
                                    "bytes": (tmp / rel).stat().st_size}
                              for rel in state_files(tmp)}}
        (tmp / STATE_MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        return final

    def drop_after(self, step: int, damaged: set[int]) -> list[tuple[Path, Path]]:
        """After falling back to the state of ``step``: set the ``damaged`` states aside as
        ``damaged-step=NNNNNN`` (kept for inspection) and delete every other state after
        ``step`` (it would be stale once the steps after it are redone). Returns the
        (folder, set aside as) pairs."""
        aside = []
        for folder in sorted(self.root.glob("step=*")):
            s = int(folder.name.split("=")[1])
            if s < step or (s == step and step not in damaged):
                continue
            if s in damaged:
                target = folder.with_name(DAMAGED_PREFIX + folder.name)
                shutil.rmtree(target, ignore_errors=True)
                folder.rename(target)
                aside.append((folder, target))
            else:
                shutil.rmtree(folder)
        return aside
