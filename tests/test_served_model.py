"""A registered version serves the five-stage chain: its signature and input example, what it
returns in process, its errors, and loading it in a fresh process from a copy of the store moved
to another folder (the relocation a moved SQLite store needs)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from adapter_support import random_adapter

from configs.loader import config_to_dict
from configs.schema import TrackingConfig, TrainConfig

NAME = "served-test-generator"
SEED = 11  # sampling seed of every prediction here
INPUT_IDS = [[1, 5, 9, 200, 33, 7, 64, 3]]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("served") / "store"


@pytest.fixture(scope="module")
def registered(store, tiny_model_dir):
    """One generator version registered with its partner discriminator of the same step."""
    from artifacts.tracking import Tracker
    from problems.model import Problem
    from serving.registry import ModelRegistry
    from serving.served import example_row

    store.mkdir()
    tracker = Tracker.from_config(
        TrackingConfig(tracking_uri=f"sqlite:///{store}/mlflow.db", experiment="served-test"),
        artifact_location=(store / "mlartifacts").as_uri())
    cfg = TrainConfig(name="served-test")
    run_id = tracker.start_run(cfg, flow_run_id="served-flow-run")
    gen = random_adapter(tiny_model_dir, 1)
    infos = {role: tracker.save_checkpoint(run_id, role, step=4, stage=2, adapter=model,
                                           metrics={"generator_reward": 0.5, "test_validity": 0.5})
             for role, model in (("generator", gen),
                                 ("discriminator", random_adapter(tiny_model_dir, 2)))}
    problem = Problem("p-max", "Return the larger of a and b.", "def bigger(a, b):", "bigger",
                      ("assert bigger(1, 2) == 2",), "def bigger(a, b):\n    return max(a, b)")
    registry = ModelRegistry(tracker)
    version = registry.register_checkpoint(
        run_id, infos["generator"], NAME, str(tiny_model_dir), partner=infos["discriminator"],
        config=config_to_dict(cfg), example=example_row(problem))
    with torch.no_grad():
        logits = gen(input_ids=torch.tensor(INPUT_IDS)).logits
    return registry, version, logits


def test_version_declares_signature_example_and_description(registered):
    from mlflow.models import Model

    registry, version, _ = registered
    local = registry._download_version(NAME, version.version, str(Path.cwd() / "dl"))
    try:
        model = Model.load(local)
        assert model.signature.inputs.input_names() == [
            "description", "entry_point", "function_signature", "id"]
        assert {p.name: p.default for p in model.signature.params.params} == {
            "with_tests": False, "seed": 0, "max_new_tokens": 0}
        example = model.load_input_example(local)
        assert example.to_dict("records") == [{
            "id": "p-max", "description": "Return the larger of a and b.",
            "entry_point": "bigger", "function_signature": "def bigger(a, b):"}]
        code = Path(local) / "code"
        assert {p.name for p in code.iterdir()} >= {"configs", "models", "problems", "rewards",
                                                    "serving"}
    finally:
        shutil.rmtree(Path.cwd() / "dl", ignore_errors=True)
    mv = registry.tracker.client.get_model_version(NAME, version.version)
    assert "five-stage chain with the discriminator of the same step" in mv.description


def test_version_returns_five_stages_code_and_tests(registered, one_thread):
    import pandas as pd

    registry, version, _ = registered
    model = registry.load_registered(version.model_uri)
    frame = pd.DataFrame([{"description": "Return the larger of a and b.",
                           "entry_point": "bigger"}] * 2)
    out = model.predict(frame, params={"max_new_tokens": 6, "seed": SEED, "with_tests": True})
    assert list(out.columns) == ["stage_1", "stage_2", "stage_3", "stage_4", "stage_5",
                                 "code", "code_reason", "tests"]
    assert len(out) == 2
    for row in out.to_dict("records"):
        assert all(isinstance(row[f"stage_{k}"], str) for k in range(1, 6))
        assert row["code"] is None or "def bigger" in row["code"]
        assert isinstance(json.loads(row["tests"]), list)
    # seeded: the same call gives the same chains
    again = model.predict(frame, params={"max_new_tokens": 6, "seed": SEED, "with_tests": True})
    assert again.equals(out)


@pytest.mark.parametrize("frame, match", [
    ({"description": ["x"]}, r"missing column\(s\) \['entry_point'\]"),
    ({"description": ["x"], "entry_point": [""]}, "row 0: 'entry_point' must be a non-empty"),
])
def test_bad_input_is_named(registered, frame, match):
    import pandas as pd

    from serving.served import _problems

    with pytest.raises(ValueError, match=match):
        _problems(pd.DataFrame(frame))


def test_relocate_refuses_a_folder_without_the_artifacts(registered, store, tmp_path):
    from artifacts.relocate import relocate_store

    copy = tmp_path / "copy.db"
    shutil.copy(store / "mlflow.db", copy)
    before = copy.read_bytes()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="does not hold what the store names"):
        relocate_store(copy, tmp_path / "empty")
    with pytest.raises(ValueError, match="no such artifacts folder"):
        relocate_store(copy, tmp_path / "nowhere")
    assert copy.read_bytes() == before  # nothing written


@pytest.mark.slow  # a new interpreter importing torch + transformers + mlflow: 5-25 s
def test_moved_copy_of_the_store_serves_the_chain_in_a_fresh_process(registered, store,
                                                                     tmp_path):
    """Copy the store to another folder, take the original away, relocate the copy, and load
    ``models:/NAME@champion`` with plain MLflow in a new interpreter outside the repository:
    it returns five stages and code for its input example, on the same adapter weights."""
    from artifacts.relocate import main as relocate

    _, _, logits = registered
    moved = tmp_path / "elsewhere" / "store"
    shutil.copytree(store, moved)
    gone = store.with_name("store-gone")
    store.rename(gone)  # nothing may read the original folder
    try:
        assert relocate(["--db", str(moved / "mlflow.db"),
                         "--artifacts", str(moved / "mlartifacts")]) == 0
        with sqlite3.connect(moved / "mlflow.db") as db:
            sources = [s for (s,) in db.execute("SELECT source FROM model_versions")]
        assert sources and all(str(moved) in s for s in sources)
        code = textwrap.dedent(f"""
            import json, sys, numpy as np, torch, mlflow
            from mlflow.models import Model
            uri = "models:/{NAME}@champion"
            local = mlflow.artifacts.download_artifacts(uri, dst_path="example")
            example = Model.load(local).load_input_example(local)
            model = mlflow.pyfunc.load_model(uri)
            out = model.predict(example, params={{"max_new_tokens": 6, "seed": {SEED}}})
            policies = model.unwrap_python_model().predictor.engine.policies
            with torch.no_grad():
                logits = policies.model_for("generator")(
                    input_ids=torch.tensor({INPUT_IDS!r})).logits
            np.save(sys.argv[1], logits.numpy())
            print(json.dumps(out.to_dict("records")))
        """)
        env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{moved}/mlflow.db",
               "MLFLOW_DISABLE_TELEMETRY": "true"}
        env.pop("PYTHONPATH", None)  # the version must not need this repository
        out_file = tmp_path / "logits.npy"
        proc = subprocess.run([sys.executable, "-c", code, str(out_file)], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Add type hints" not in proc.stderr
        rows = json.loads(proc.stdout.strip().splitlines()[-1])
        assert len(rows) == 1
        assert all(isinstance(rows[0][f"stage_{k}"], str) for k in range(1, 6))
        assert "code" in rows[0] and rows[0]["tests"] == "[]"
        import numpy as np

        assert np.array_equal(np.load(out_file), logits.numpy())
    finally:
        gone.rename(store)
