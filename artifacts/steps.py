"""Upkeep of a run's steps, beyond writing and reading them: corrupt manifests found and
salvaged, steps verified and cleared, temp files of killed writers removed.

``StepUpkeep`` is a part of ``artifacts.store.RunStore`` (its methods use the store's file
system and paths); it is kept apart so each file has one job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow.fs as pafs

from artifacts.convert import ArtifactError
from artifacts.manifests import ManifestCorrupt, check_step, salvage_entries


class StepUpkeep:
    """Step-level upkeep methods of ``RunStore`` (see the module docstring)."""

    def corrupt_manifests(self) -> list[ManifestCorrupt]:
        """Every step whose manifest exists but is corrupt, oldest first (empty when none)."""
        out = []
        for s in self.list_steps():
            try:
                self.manifest(s)
            except ManifestCorrupt as exc:
                out.append(exc)
        return out

    def salvage_manifest(self, step: int) -> list[dict[str, Any]]:
        """The file entries still whole in a step's (corrupt) manifest: every ``{...}`` object in
        its text that is a valid entry for this step (a truncated manifest keeps those before
        the cut). Empty when there is no manifest or nothing can be salvaged. Read-only."""
        step = check_step(step)
        path = self._manifest_path(step)
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return []
        try:
            with self.fs.open_input_stream(path) as f:
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return []
        return salvage_entries(text, step)

    def step_files(self, step: int) -> list[str]:
        """Every part file of ``step`` on disk, as paths below the run folder (as manifests list
        them), whatever the manifest says."""
        return [p[len(self.run_dir) + 1:] for p in self._part_paths(check_step(step))]

    def file_entry(self, relpath: str) -> dict[str, Any]:
        """The manifest entry a file below the run folder would get (rows, sha256, bytes),
        after reading it whole and checking it against its table's schema; raises
        ``CorruptArtifactError`` naming it when it cannot be read or parsed."""
        return self._entry_from_disk(f"{self.run_dir}/{relpath}")

    def verify_step(self, step: int) -> None:
        """Re-hash every file of a complete step; raises naming the first bad file."""
        manifest = self.manifest(step)
        if manifest is None:
            raise ArtifactError(f"{self._uri(self._manifest_path(step))}: step {step} is "
                                "incomplete (no manifest)")
        for entry in manifest["files"]:
            self._verified_bytes(f"{self.run_dir}/{entry['path']}", entry)

    def stray_temp_files(self) -> list[str]:
        """Temp files of writers that were killed (harmless; ``remove_stray_temp_files``)."""
        return [i.path for i in self._listing()
                if i.type == pafs.FileType.File and ".tmp-" in i.base_name
                and i.base_name.startswith(".")]

    def remove_stray_temp_files(self) -> list[str]:
        """Delete temp files left by killed writers; call only while no writer runs."""
        stray = self.stray_temp_files()
        for path in stray:
            self.fs.delete_file(path)
        return [self._uri(p) for p in stray]

    def clear_steps(self, steps: Iterable[int]) -> None:
        """Remove ``steps`` from the store: every manifest first, newest step first (so the
        complete steps stay a prefix of the run if this is killed half-way), then each step's
        part folders in every table, newest first. Nothing to remove is not an error."""
        fs = self.fs
        steps = sorted({check_step(s) for s in steps}, reverse=True)
        for s in steps:
            path = self._manifest_path(s)
            if fs.get_file_info(path).type == pafs.FileType.File:
                fs.delete_file(path)
        tables = self._dirs(self.run_dir, "table=")
        for s in steps:
            for table in tables:
                folder = f"{table.path}/step={s:06d}"
                if fs.get_file_info(folder).type == pafs.FileType.Directory:
                    fs.delete_dir(folder)

    def keep_manifest_aside(self, step: int, suffix: str = ".corrupt") -> str | None:
        """Copy the step's manifest to ``<manifest><suffix>`` (replacing an older copy) before
        it is rewritten; returns the copy's URI, or None when there is no manifest."""
        path = self._manifest_path(check_step(step))
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        self.fs.copy_file(path, path + suffix)
        return self._uri(path + suffix)
