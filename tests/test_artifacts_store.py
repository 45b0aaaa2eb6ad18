"""The Parquet run store: round trips (pandas 3 dtypes), layout, manifests, URI roots, errors."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from artifacts import (
    SCHEMAS,
    ArtifactError,
    CorruptArtifactError,
    RunStore,
    SchemaError,
    StepCompleteError,
    get_schema,
    list_runs,
)


def sample_rows(table: str, n: int, seed: int = 0) -> list[dict]:
    """Valid rows for any table, built from its schema (unicode text, nulls, int32 extremes)."""
    schema, rng = get_schema(table), np.random.default_rng(seed)
    rows = []
    for i in range(n):
        k = int(rng.integers(0, 6))  # output length, 0 included
        row = {}
        for f in schema.fields:
            if f.name in schema.allowed:
                value = schema.allowed[f.name][i % len(schema.allowed[f.name])]
            elif pa.types.is_list(f.type) and pa.types.is_integer(f.type.value_type):
                value = [2**31 - 1, -(2**31)] + [int(x) for x in rng.integers(0, 9, k)]
            elif pa.types.is_list(f.type):
                value = [float(x) for x in -rng.random(k + 2)]
            elif pa.types.is_map(f.type):  # pandas reads a map back as (key, value) pairs
                value = [(f"key {j} é✓", float(x)) for j, x in enumerate(rng.random(k))]
            elif pa.types.is_string(f.type):
                value = f"{f.name} {i} é✓\n\"'"
            elif pa.types.is_boolean(f.type):
                value = bool(i % 2)
            elif pa.types.is_integer(f.type):
                value = int(rng.integers(0, 1000))
            else:
                value = float(rng.random())
            if f.nullable and i % 3 == 2:
                value = None
            row[f.name] = value
        if table == "chains":
            row["output_token_ids"] = row["output_token_ids"][:k]
            row["output_logprobs"] = row["output_logprobs"][:k]
            row["output_tokens"] = k
        if table == "tests":
            row["drop_reason"] = "unparsable" if row["parse_status"] == "dropped" else None
        rows.append(row)
    return rows


def sample_frame(table: str, n: int, seed: int = 0) -> pd.DataFrame:
    return pd.DataFrame(sample_rows(table, n, seed))


def assert_rows_equal(table: str, written: list[dict], got: pd.DataFrame) -> None:
    """Value-by-value comparison that spells out what pandas 3 returns."""
    schema = get_schema(table)
    assert len(got) == len(written)
    for f in schema.fields:
        col = got[f.name]
        if pa.types.is_string(f.type):
            assert col.dtype == "str", (f.name, col.dtype)  # pandas 3 default string dtype
        for i, row in enumerate(written):
            want, have = row[f.name], col.iloc[i]
            if want is None:
                assert pd.isna(have), (f.name, i, have)
            elif pa.types.is_list(f.type):
                assert isinstance(have, np.ndarray), (f.name, type(have))
                dtype = f.type.value_type.to_pandas_dtype()
                assert have.dtype == dtype and np.array_equal(have, np.asarray(want, dtype))
            else:
                assert have == want, (f.name, i, have, want)


@pytest.fixture()
def store(tmp_path) -> RunStore:
    return RunStore(str(tmp_path / "runs"), "run-1")


@pytest.mark.parametrize("table", sorted(SCHEMAS))
def test_round_trip_every_table(store, table):
    rows = sample_rows(table, 7)
    ptr = store.write(table, 3, "part-a", rows)
    assert (ptr.rows, ptr.table, ptr.step) == (7, table, 3)
    got = store.read(table, step=3)
    assert list(got.columns) == ["run_id", "step", *get_schema(table).names]
    assert (got["run_id"] == "run-1").all() and (got["step"] == 3).all()
    assert_rows_equal(table, rows, got)
    # The frame pandas 3 gives back (str dtype, numpy arrays in list columns, NaN for null
    # strings) writes back to byte-identical Parquet: replay can re-store what it read.
    again = store.write(table, 3, "part-a", got)
    assert again.sha256 == ptr.sha256


def test_inputs_dataframe_records_arrow_store_the_same(store):
    rows = sample_rows("executions", 5)
    a = store.write("executions", 1, "a", rows)
    b = store.write("executions", 1, "b", pd.DataFrame(rows))
    c = store.write("executions", 1, "c", pa.Table.from_pylist(rows))
    assert a.sha256 == b.sha256 == c.sha256
    assert store.list_parts("executions", 1) == ["a", "b", "c"]
    assert len(store.read("executions", step=1, part="b")) == 5


def test_empty_part_keeps_types(store):
    store.write("tests", 0, "stage-1", [])
    got = store.read("tests", step=0)
    assert got.empty and got["stage"].dtype == np.int32 and got["snippet"].dtype == "str"


def test_layout_is_hive_and_pandas_and_pyarrow_read_it_with_filters(store, tmp_path):
    for step in (0, 1, 2):
        store.write("chains", step, "generator-stage1", sample_rows("chains", 4, seed=step))
    root = tmp_path / "runs"
    assert (root / "run_id=run-1/table=chains/step=000001/part-generator-stage1.parquet").is_file()
    df = pd.read_parquet(root / "run_id=run-1" / "table=chains", filters=[("step", "=", 1)])
    assert len(df) == 4 and set(df["step"].astype(int)) == {1}
    dset = ds.dataset(root, partitioning="hive")
    got = dset.to_table(filter=(ds.field("table") == "chains") & (ds.field("step") >= 1))
    assert got.num_rows == 8 and set(got.column("run_id").to_pylist()) == {"run-1"}


def test_filters_and_columns(store):
    store.write("rewards", 5, "all", sample_rows("rewards", 9))
    got = store.read("rewards", step=5, filters=[("sample_idx", ">=", 0), ("n_tests", "<", 500)],
                     columns=["problem_id", "n_tests"])
    assert list(got.columns) == ["problem_id", "n_tests"] and (got["n_tests"] < 500).all()
    with pytest.raises(SchemaError, match="bad filter"):
        store.read("rewards", step=5, filters=[("nope", "=", 1)])


def test_manifest_marks_steps_complete(store):
    p0 = store.write("chains", 0, "g", sample_rows("chains", 2))
    t0 = store.write("tests", 0, "s1", sample_rows("tests", 3))
    store.write("chains", 1, "g", sample_rows("chains", 2))
    assert store.list_steps() == [0, 1] and store.incomplete_steps() == [0, 1]
    assert store.last_complete_step() is None
    uri = store.complete_step(0, [p0, t0])
    assert uri.endswith("run_id=run-1/_manifests/step=000000.json")
    manifest = store.manifest(0)
    assert [(e["table"], e["rows"], e["sha256"]) for e in manifest["files"]] == [
        ("chains", 2, p0.sha256), ("tests", 3, t0.sha256)]
    assert store.is_complete(0) and not store.is_complete(1)
    assert store.incomplete_steps() == [1] and store.last_complete_step() == 0
    store.verify_step(0)
    # step=None reads complete steps only (unless asked); a given step is read either way.
    assert set(store.read("chains")["step"]) == {0}
    assert set(store.read("chains", include_incomplete=True)["step"]) == {0, 1}
    assert len(store.read("chains", step=1)) == 2
    with pytest.raises(StepCompleteError, match="step 0 is complete"):
        store.write("chains", 0, "g", sample_rows("chains", 1))
    assert store.manifest(0) == manifest
    assert list_runs(store.root) == ["run-1"]


def test_complete_step_refuses_unlisted_or_changed_files(store, tmp_path):
    a = store.write("chains", 4, "a", sample_rows("chains", 2))
    store.write("chains", 4, "b", sample_rows("chains", 2))
    with pytest.raises(ArtifactError, match="part-b.parquet is not in the pointers"):
        store.complete_step(4, [a])
    stale = store.write("chains", 4, "b", sample_rows("chains", 3))
    store.write("chains", 4, "b", sample_rows("chains", 1))  # a retry replaced it
    with pytest.raises(CorruptArtifactError, match="part-b.parquet: content changed"):
        store.complete_step(4, [a, stale])
    assert not store.is_complete(4)
    assert store.complete_step(4)  # no pointers: lists what is there
    assert sorted(e["rows"] for e in store.manifest(4)["files"]) == [1, 2]


def test_pointer_round_trips_through_json(store):
    from artifacts import Pointer

    ptr = store.write("updates", 2, "generator", sample_rows("updates", 3))
    back = Pointer.from_dict(json.loads(json.dumps(ptr.to_dict())))
    assert back == ptr
    assert len(RunStore("elsewhere", "x").read_pointer(back)) == 3
    assert ptr.path.endswith("run_id=run-1/table=updates/step=000002/part-generator.parquet")


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_uri_roots(tmp_path, kind):
    root = "memory://artifact-test/runs" if kind == "memory" else (tmp_path / "r").as_uri()
    store = RunStore(root, "uri-run")
    rows = sample_rows("chains", 6)
    ptr = store.write("chains", 7, "g", rows)
    assert ptr.path.startswith(root)
    assert store.incomplete_steps() == [7]
    store.complete_step(7, [ptr])
    assert store.last_complete_step() == 7 and store.incomplete_steps() == []
    assert_rows_equal("chains", rows, store.read("chains"))
    # Plain pandas reads the same URI (fsspec for memory://, pyarrow for file://).
    assert len(pd.read_parquet(f"{root}/run_id=uri-run/table=chains")) == 6
    assert list_runs(root) == ["uri-run"]
    if kind == "memory":
        import fsspec

        fsspec.filesystem("memory").rm("/artifact-test", recursive=True)


def _snapshot(folder) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("mutate, match", [
    (lambda df: df.drop(columns=["snippet"]), "missing column 'snippet'"),
    (lambda df: df.assign(extra=1), "unexpected column 'extra'"),
    (lambda df: df.assign(stage="one"), "column 'stage' cannot be stored as int32"),
    (lambda df: df.assign(test_idx=2**40), "column 'test_idx' cannot be stored as int32"),
    (lambda df: df.assign(problem_id=None), "column 'problem_id' is null in row 0"),
    (lambda df: df.assign(is_duplicate=[[1]] * len(df)), "column 'is_duplicate'"),
    (lambda df: df.assign(origin="human"), "column 'origin': row 0 has 'human'"),
    (lambda df: df.assign(parse_status="dropped", drop_reason=None), "'drop_reason'"),
    (lambda df: df.assign(run_id="other"), "column 'run_id' holds 'other'"),
    (lambda df: df.assign(step=8), "column 'step' holds 8"),
])
def test_schema_errors_name_the_column_and_touch_nothing(store, tmp_path, mutate, match):
    store.write("tests", 9, "s1", sample_rows("tests", 4))
    before = _snapshot(tmp_path)
    with pytest.raises(SchemaError, match=match):
        store.write("tests", 9, "s1", mutate(sample_frame("tests", 4)))
    assert _snapshot(tmp_path) == before
    assert store.stray_temp_files() == []


def test_chain_lengths_and_inputs_are_checked(store):
    rows = sample_rows("chains", 3)
    rows[1]["output_logprobs"] = [-1.0] * (len(rows[1]["output_token_ids"]) + 1)
    with pytest.raises(SchemaError, match="'output_logprobs': row 1 has a different length"):
        store.write("chains", 0, "g", rows)
    with pytest.raises(SchemaError, match="row 1 has different columns"):
        store.write("updates", 0, "g", [sample_rows("updates", 1)[0], {"loss": 1.0}])
    with pytest.raises(SchemaError, match="expected a DataFrame"):
        store.write("updates", 0, "g", {"loss": [1.0]})
    with pytest.raises(KeyError, match="unknown table 'chain'"):
        store.write("chain", 0, "g", rows)
    with pytest.raises(ValueError, match="part='a/b'"):
        store.write("chains", 0, "a/b", rows)
    with pytest.raises(ValueError, match="step=-1"):
        store.write("chains", -1, "g", rows)


def test_corrupt_and_truncated_files_are_named(store, tmp_path):
    ptr = store.write("executions", 1, "candidate", sample_rows("executions", 50))
    path = tmp_path / "runs" / "run_id=run-1" / ptr.relpath
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # truncated, step incomplete: parse error
    with pytest.raises(CorruptArtifactError, match="part-candidate.parquet: not a readable"):
        store.read("executions", step=1)
    with pytest.raises(CorruptArtifactError, match="part-candidate.parquet: content differs"):
        store.read_pointer(ptr)
    path.write_bytes(data)
    store.complete_step(1, [ptr])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # still parses, maybe; the manifest hash catches it
    path.write_bytes(bytes(flipped))
    with pytest.raises(CorruptArtifactError, match="content differs from the manifest"):
        store.read("executions", step=1)
    with pytest.raises(CorruptArtifactError, match="part-candidate.parquet"):
        store.verify_step(1)
    os.remove(path)
    with pytest.raises(CorruptArtifactError, match="listed in the step's manifest but missing"):
        store.read("executions")


def test_file_of_another_schema_version_is_refused(store, tmp_path):
    ptr = store.write("rewards", 2, "r", sample_rows("rewards", 2))
    path = tmp_path / "runs" / "run_id=run-1" / ptr.relpath
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata({"artifacts.schema_version": "0"}), path)
    with pytest.raises(SchemaError, match=r"part-r.parquet: written with rewards schema v0"):
        store.read("rewards", step=2)
    retyped = table.set_column(table.schema.get_field_index("n_tests"), "n_tests",
                               table.column("n_tests").cast(pa.string()))
    pq.write_table(retyped, path)
    with pytest.raises(SchemaError, match="column 'n_tests' is string"):
        store.read("rewards", step=2)


def test_unparsable_manifest_is_corruption_not_absence(store, tmp_path):
    from artifacts.store import ManifestCorrupt

    ptr = store.write("updates", 3, "g", sample_rows("updates", 1))
    store.complete_step(3, [ptr])
    manifest = tmp_path / "runs" / "run_id=run-1" / "_manifests" / "step=000003.json"
    manifest.write_text(manifest.read_text()[:20])
    with pytest.raises(ManifestCorrupt, match=r"step=000003.json: corrupt manifest of step 3"):
        store.incomplete_steps()


def test_store_pickles_without_its_filesystem(store):
    import pickle

    store.write("updates", 0, "g", sample_rows("updates", 2))
    back = pickle.loads(pickle.dumps(store))
    assert repr(back) == repr(store) and len(back.read("updates", step=0)) == 2
