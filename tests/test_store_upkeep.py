"""The run store's addresses and step upkeep: part URIs, clearing steps (manifests before parts,
newest first), keeping a manifest aside before it is rebuilt."""

from __future__ import annotations

import pyarrow.fs as pafs
from test_artifacts_store import sample_rows

from artifacts import RunStore


def _store_with_steps(tmp_path, steps=(1, 2, 3)) -> RunStore:
    store = RunStore(str(tmp_path), "r1")
    for s in steps:
        store.write("chains", s, "generator-1", sample_rows("chains", 2, seed=s))
        store.write("rewards", s, "all", sample_rows("rewards", 2, seed=s))
        store.complete_step(s)
    return store


def test_part_addresses_name_the_files_the_store_writes(tmp_path):
    store = RunStore(str(tmp_path), "r1")
    assert not store.has_part("chains", 4, "generator-2")
    ptr = store.write("chains", 4, "generator-2", sample_rows("chains", 1))
    assert store.part_relpath("chains", 4, "generator-2") == ptr.relpath
    assert store.part_uri("chains", 4, "generator-2") == ptr.path
    assert store.has_part("chains", 4, "generator-2")
    assert not store.has_part("chains", 4, "generator-3")
    assert (tmp_path / "run_id=r1" / ptr.relpath).is_file()
    store.complete_step(4)
    assert store.manifest_uri(4).endswith("run_id=r1/_manifests/step=000004.json")
    assert (tmp_path / "run_id=r1" / "_manifests" / "step=000004.json").is_file()


def test_clear_steps_removes_manifests_first_newest_first_then_parts(tmp_path, monkeypatch):
    store = _store_with_steps(tmp_path)
    deleted: list[str] = []
    fs = store.fs
    real_file, real_dir = fs.delete_file, fs.delete_dir

    class Recording:  # the store's file system, recording what is deleted in which order
        def __getattr__(self, name):
            return getattr(fs, name)

        def delete_file(self, path):
            deleted.append(path)
            real_file(path)

        def delete_dir(self, path):
            deleted.append(path)
            real_dir(path)

    monkeypatch.setattr(store, "_fs", Recording())
    store.clear_steps([2, 3])
    names = [p.split("run_id=r1/")[1] for p in deleted]
    assert names[:2] == ["_manifests/step=000003.json", "_manifests/step=000002.json"]
    assert sorted(names[2:4]) == ["table=chains/step=000003", "table=rewards/step=000003"]
    assert sorted(names[4:]) == ["table=chains/step=000002", "table=rewards/step=000002"]
    assert store.list_steps() == [1] and store.complete_steps() == [1]
    assert len(store.read_table("chains", step=1)) == 2       # the step kept is untouched
    store.clear_steps([2, 3])                                 # nothing left to remove: no error
    RunStore(str(tmp_path), "never-written").clear_steps([1])


def test_keep_manifest_aside_copies_it_and_leaves_it_in_place(tmp_path):
    store = _store_with_steps(tmp_path, steps=(1,))
    manifest = tmp_path / "run_id=r1" / "_manifests" / "step=000001.json"
    manifest.write_text(manifest.read_text()[:40])            # truncated: a corrupt manifest
    uri = store.keep_manifest_aside(1)
    assert uri is not None and uri.endswith("step=000001.json.corrupt")
    aside = tmp_path / "run_id=r1" / "_manifests" / "step=000001.json.corrupt"
    assert aside.read_text() == manifest.read_text()
    assert store.keep_manifest_aside(2) is None               # no manifest: nothing to keep
    assert store.fs.get_file_info(str(aside)).type == pafs.FileType.File
