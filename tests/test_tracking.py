"""MLflow tracking: parent run tags and params, namespaced metrics, LoRA checkpoints (reload with
identical logits, corruption refused), registry aliases, and loading from a fresh process.

Everything uses a temporary SQLite store and artifact folder, shared per module because creating
the MLflow schema costs ~2 s.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from adapter_support import random_adapter
from procs import serve_and_poll

from artifacts.checkpoints import CheckpointCorruptError
from configs.schema import TrackingConfig, TrainConfig
from deployments.server import free_port

CHAMPION_METRICS = {"generator_reward": 0.9, "test_validity": 0.5}  # score 0.78


@pytest.fixture(scope="module", autouse=True)
def foreign_cwd(tmp_path_factory):
    """Run the module from an empty folder and check that nothing fell back to MLflow's global
    default store (MLflow 3 creates ./mlflow.db when any call ignores our tracking URI)."""
    cwd, here = os.getcwd(), tmp_path_factory.mktemp("cwd")
    os.chdir(here)
    yield here
    os.chdir(cwd)
    assert sorted(p.name for p in here.iterdir()) == []


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    from artifacts.tracking import Tracker

    tmp = tmp_path_factory.mktemp("mlflow")
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp}/mlflow.db", experiment="artifacts-test")
    return Tracker.from_config(cfg, artifact_location=(tmp / "mlartifacts").as_uri())


@pytest.fixture(scope="module")
def run_id(tracker):
    return tracker.start_run(TrainConfig(name="tiny-test"), flow_run_id="flow-run-1",
                             commit="abc123")


INPUT_IDS = torch.tensor([[1, 5, 9, 200, 33, 7, 64, 3]])


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=INPUT_IDS).logits


def test_parent_run_tags_params_and_reuse(tracker, run_id):
    from configs.loader import config_hash

    cfg = TrainConfig(name="tiny-test")
    run = tracker.client.get_run(run_id)
    assert run.data.tags["prefect.flow_run_id"] == "flow-run-1"
    assert run.data.tags["mlflow.source.git.commit"] == "abc123"
    assert run.data.tags["config.hash"] == config_hash(cfg)
    assert run.data.params["ppo.learning_rate"] == "1e-05"
    assert run.data.params["schedule.stages"] == "[1, 2, 3, 4, 5]"
    assert run.data.params["model.discriminator"] == "null"
    # A retried flow run gets the same MLflow run; another config under it is refused.
    assert tracker.start_run(cfg, flow_run_id="flow-run-1") == run_id
    other = TrainConfig(name="tiny-test", ppo=cfg.ppo.__class__(learning_rate=0.1))
    with pytest.raises(ValueError, match="start a new flow run"):
        tracker.start_run(other, flow_run_id="flow-run-1")
    assert tracker.start_run(cfg, flow_run_id="flow-run-2") != run_id
    tracker.end_run(run_id, "FAILED")  # a crashed attempt; the retry resumes the same run
    assert tracker.client.get_run(run_id).info.status == "FAILED"
    assert tracker.start_run(cfg, flow_run_id="flow-run-1") == run_id
    assert tracker.client.get_run(run_id).info.status == "RUNNING"
    tracker.log_dict(run_id, {"name": cfg.name}, "config/resolved.json")
    assert [f.path for f in tracker.client.list_artifacts(run_id, "config")] == [
        "config/resolved.json"]


def test_metrics_are_namespaced_and_stepped(tracker, run_id):
    for step in range(3):
        tracker.log_metrics(run_id, {"generator/pass_rate": step / 10, "ppo/approx_kl": 0.01,
                                     "sandbox/timeouts": step}, step=step)
    hist = tracker.client.get_metric_history(run_id, "generator/pass_rate")
    assert [(m.step, m.value) for m in hist] == [(0, 0.0), (1, 0.1), (2, 0.2)]
    with pytest.raises(ValueError, match="use 'namespace/name'"):
        tracker.log_metrics(run_id, {"pass_rate": 1.0}, step=0)
    with pytest.raises(ValueError, match="not a number"):
        tracker.log_metrics(run_id, {"generator/x": "high"}, step=0)


@pytest.fixture(scope="module")
def checkpoints(tracker, run_id, tiny_model_dir):
    """Three generator checkpoints (scores 0.5, 0.78, 0.6) and the models behind them."""
    models, infos = [], []
    for step, metrics in ((1, {"generator_reward": 0.5, "test_validity": 0.5}),
                          (2, CHAMPION_METRICS),
                          (3, {"generator_reward": 0.6, "test_validity": 0.6})):
        model = random_adapter(tiny_model_dir, seed=step)
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        infos.append(tracker.save_checkpoint(run_id, "generator", step=step, stage=1,
                                             adapter=model, metrics=metrics,
                                             optimizer_state=opt.state_dict()))
        models.append(model)
    return models, infos


def test_checkpoint_list_latest_best(tracker, run_id, checkpoints):
    _, infos = checkpoints
    listed = tracker.list_checkpoints(run_id, "generator")
    assert [c.step for c in listed] == [1, 2, 3]
    assert [c.content_hash for c in listed] == [c.content_hash for c in infos]
    assert tracker.latest_checkpoint(run_id, "generator").step == 3
    assert tracker.best_checkpoint(run_id, "generator").step == 2
    assert tracker.best_checkpoint(run_id, "generator").score == pytest.approx(0.78)
    assert tracker.latest_checkpoint(run_id, "discriminator") is None
    assert len({c.adapter_version for c in listed}) == 3


def test_checkpoint_reload_gives_identical_logits(tracker, checkpoints, tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    models, infos = checkpoints
    folder = tracker.load_checkpoint(infos[1], tmp_path)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    base_logits = logits(base)
    reloaded = PeftModel.from_pretrained(base, folder / "adapter").eval()
    assert torch.equal(logits(reloaded), logits(models[1]))
    assert not torch.equal(logits(reloaded), base_logits)  # the adapter is not a no-op
    state = torch.load(folder / "optimizer.pt", weights_only=True)
    assert set(state) == {"state", "param_groups"}


def _artifact_dir(tracker, run_id, path) -> Path:
    from urllib.parse import urlparse

    uri = tracker.client.get_run(run_id).info.artifact_uri
    return Path(urlparse(uri).path) / path


@pytest.mark.parametrize("damage", ["flip", "delete", "manifest"])
def test_corrupt_checkpoint_is_refused_before_use(tracker, run_id, checkpoints, tmp_path, damage):
    _, infos = checkpoints
    src = _artifact_dir(tracker, run_id, infos[0].artifact_path)
    backup = tmp_path / "backup"
    shutil.copytree(src, backup)
    weights = src / "adapter" / "adapter_model.safetensors"
    try:
        if damage == "flip":
            data = bytearray(weights.read_bytes())
            data[-1] ^= 0xFF
            weights.write_bytes(bytes(data))
            match = "adapter_model.safetensors: content differs"
        elif damage == "delete":
            weights.unlink()
            match = "adapter_model.safetensors: missing"
        else:
            (src / "checkpoint.json").write_text("{not json")
            match = "checkpoint.json: not valid JSON"
        with pytest.raises(CheckpointCorruptError, match=match):
            tracker.load_checkpoint(infos[0], tmp_path / "dl")
    finally:
        shutil.rmtree(src)
        shutil.copytree(backup, src)


def test_registry_aliases_follow_newest_and_best(tracker, run_id, checkpoints, tiny_model_dir,
                                                caplog):
    from serving.registry import ModelRegistry

    _, infos = checkpoints
    name = TrackingConfig(experiment="artifacts-test").generator_registry_name
    registry = ModelRegistry(tracker)
    seen = []
    with caplog.at_level("INFO"):
        for info in infos:
            rv = registry.register_checkpoint(run_id, info, name, base_model=str(tiny_model_dir))
            seen.append((rv.version, registry.alias_version(name, "candidate"),
                         registry.alias_version(name, "champion")))
    # candidate: always the newest; champion: v1, then v2 (0.78), kept against v3 (0.6).
    assert seen == [("1", "1", "1"), ("2", "2", "2"), ("3", "3", "2")]
    # MLflow's per-version INFO line stays off the console
    assert "Validating input example" not in caplog.text
    mv = tracker.client.get_model_version(name, "2")
    assert mv.tags["content_hash"] == infos[1].content_hash
    assert float(mv.tags["score"]) == pytest.approx(0.78)
    # portable: the small local base model travels with the version, named, not by its path
    spec = registry.registered_base_spec(name, "2")
    assert spec["base_model"] == tiny_model_dir.name and spec["base_source"] == "bundled"
    assert str(tiny_model_dir) not in json.dumps(spec)
    assert mv.description.startswith(f"generator adapter after training stage {infos[1].stage}")
    assert f"run {run_id}" in mv.description and "score 0.780" in mv.description
    # which score: these checkpoints have no held-out evaluation, so their training step's
    assert "on the last training step: 0.7 generator_reward + 0.3 test_validity" \
        in mv.description and mv.tags["score_basis"] in mv.description
    assert float(mv.tags["training_score"]) == pytest.approx(0.78)


def test_tracking_uri_resolution(monkeypatch):
    from artifacts.tracking import REPO, default_artifact_location, resolve_tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri(None) == f"sqlite:///{REPO}/mlflow.db"
    assert default_artifact_location(f"sqlite:///{REPO}/mlflow.db") == (
        REPO / "mlartifacts").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert resolve_tracking_uri(None) == "http://127.0.0.1:5000"
    assert resolve_tracking_uri("sqlite:///x.db") == "sqlite:///x.db"  # config wins
    assert default_artifact_location("http://127.0.0.1:5000") is None
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"


def test_the_experiment_is_tagged_as_model_development(tracker):
    """MLflow 3 names an experiment's kind by a tag, GenAI app or model development; a new
    experiment is tagged when created, an older one (made before the tag) the first time a
    tracker opens it."""
    from artifacts.tracking import EXPERIMENT_KIND, TAG_EXPERIMENT_KIND, Tracker

    exp = tracker.client.get_experiment(tracker.experiment_id)
    assert exp.tags[TAG_EXPERIMENT_KIND] == EXPERIMENT_KIND == "custom_model_development"
    old = tracker.client.create_experiment("made-before-the-tag")
    assert TAG_EXPERIMENT_KIND not in tracker.client.get_experiment(old).tags
    reopened = Tracker(tracker.tracking_uri, "made-before-the-tag")
    assert reopened.experiment_id == old
    assert reopened.client.get_experiment(old).tags[TAG_EXPERIMENT_KIND] == EXPERIMENT_KIND


def test_run_for_resumes_the_same_mlflow_run(tracker):
    from configs import TrainConfig

    cfg = TrainConfig(name="resume-test")
    first = tracker.run_for(cfg, "resume-run-1", flow_run_id="flow-a")
    tracker.end_run(first, "FAILED")  # a killed flow
    again = tracker.run_for(cfg, "resume-run-1", flow_run_id="flow-b")
    assert again == first
    run = tracker.client.get_run(first)
    assert run.info.status == "RUNNING"
    assert run.data.tags["prefect.flow_run_id"] == "flow-b"
    assert tracker.run_for(cfg, "resume-run-2") != first  # another run id: another run


def test_logging_the_problems_dataset_prints_no_schema_hint(tracker):
    """MLflow hints at integer columns (8 lines) when it infers a logged table's schema; the
    problems dataset is logged for lineage only, so the hint stays off the console."""
    import warnings

    import pandas as pd

    run_id = tracker.client.create_run(tracker.experiment_id).info.run_id
    frame = pd.DataFrame([{"id": "p1", "n_baseline_tests": 3}])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tracker.log_dataset(run_id, frame, name="problems:hint-test", source="family:x:train")
    assert not [w for w in seen if "Inferred schema contains integer" in str(w.message)]
    assert tracker.client.get_run(run_id).inputs.dataset_inputs  # and it was logged


def test_a_dataset_logged_by_two_runs_at_once_is_linked_not_lost(tracker, monkeypatch):
    """Two workers' runs log the same problem set at once; the server's get-or-create of the
    dataset is not atomic, so one can get a unique-key violation: it is retried (the retry
    finds the row and links it), while any other error still raises."""
    import pandas as pd
    from mlflow.exceptions import MlflowException

    run_id = tracker.client.create_run(tracker.experiment_id).info.run_id
    real = tracker.client.log_inputs
    calls = []

    def racing(run, datasets=None, **kw):
        calls.append(run)
        if len(calls) == 1:
            raise MlflowException("BAD_REQUEST: (psycopg2.errors.UniqueViolation) duplicate key "
                                  'value violates unique constraint "dataset_pk"')
        return real(run, datasets=datasets, **kw)

    monkeypatch.setattr(tracker.client, "log_inputs", racing)
    frame = pd.DataFrame({"id": ["a"], "n": [1]})
    tracker.log_dataset(run_id, frame, name="problems:race", source="demo")
    assert len(calls) == 2
    (logged,) = tracker.client.get_run(run_id).inputs.dataset_inputs
    assert logged.dataset.name == "problems:race"

    def broken(run, datasets=None, **kw):
        raise MlflowException("INVALID_PARAMETER_VALUE: something else")

    monkeypatch.setattr(tracker.client, "log_inputs", broken)
    with pytest.raises(MlflowException, match="something else"):
        tracker.log_dataset(run_id, frame, name="problems:race", source="demo")


def test_the_summary_links_the_run_page_in_the_model_training_view(monkeypatch, capsys):
    """The end-of-run summary names each UI's command on a line of its own and the page to open
    on the next: the MLflow run's own page, in the UI's Model training view (its GenAI view,
    the UI's default, opens an experiment on an empty traces overview), and the Prefect flow
    run's page. Each command carries what keeps it off the user's home and the console
    quiet in a shell without the Makefile's environment; no line is over 200 characters."""
    from types import SimpleNamespace

    import pandas as pd

    import deployments.server as server
    import tasks.reporting as reporting
    from artifacts.tracking import REPO

    class Store:
        run_dir = "runs/run_id=x"

        def complete_steps(self):
            return []

        def read(self, table):
            return pd.DataFrame()

    monkeypatch.setattr(reporting, "stage_table", lambda rewards: "(table)")
    monkeypatch.setattr(reporting, "get_run_context",
                        lambda: SimpleNamespace(flow_run=SimpleNamespace(id="f-1")))
    monkeypatch.setattr(server, "_TEMPORARY", server.TemporaryServer())  # gone with the run
    tracker = SimpleNamespace(end_run=lambda run: None, experiment_id="7",
                              tracking_uri=f"sqlite:///{REPO}/mlflow.db")
    ctx = SimpleNamespace(run_id="x", store=Store(), cfg=TrainConfig(), mlflow_run_id="m1",
                          timings=[], tracker=tracker)
    reporting.finish_run(ctx)
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  browse      : "))
    browse, mlflow_page, prefect, prefect_page = (line.split(" : ", 1)[1]
                                                  for line in lines[at:at + 4])
    assert [line[:14] for line in lines[at:at + 4]] == ["  browse      ", "  open        ",
                                                        "  prefect     ", "  open        "]
    assert browse.startswith("MLFLOW_DISABLE_TELEMETRY=true ")
    assert " ui --backend-store-uri sqlite:///mlflow.db " in browse  # from the repository root
    assert mlflow_page == "http://127.0.0.1:5000/#/experiments/7/runs/m1?workflowType=" \
                          "machine_learning"
    assert prefect.startswith("PREFECT_HOME=")
    assert " PREFECT_SERVER_ANALYTICS_ENABLED=false " in prefect
    assert prefect.endswith(" --no-prompt server start")
    assert prefect_page == f"http://127.0.0.1:{server.UI_PORT}/runs/flow-run/f-1"
    assert max(len(line) for line in lines) <= 200, max(lines, key=len)

    # with a tracking server the summary links its page directly
    tracker.tracking_uri = "http://mlflow.example:5000"
    reporting.finish_run(ctx)
    out = capsys.readouterr().out
    assert "  browse      : http://mlflow.example:5000/#/experiments/7/runs/m1?workflowType=" \
           "machine_learning\n  prefect     : " in out, out


@pytest.mark.slow
def test_the_mlflow_ui_command_runs_in_a_fresh_shell(tmp_path):
    """The summary's ``mlflow ui`` command, as printed, must serve its store from a shell with
    no venv activated and none of the Makefile's variables, write nothing to the user's home,
    and start no job queue (its folder in /dev/shm outlives the server)."""
    from artifacts.tracking import REPO, run_page

    _, command = run_page(f"sqlite:///{tmp_path}/x.db", "1", "abc")
    port = free_port()
    home = tmp_path / "home"
    home.mkdir()
    problem = serve_and_poll(f"{command} --port {port}", REPO, port=port,
                             env={"PATH": "/usr/bin:/bin", "HOME": str(home)})
    assert problem == "", (command, problem)
    # its telemetry is off: it would have written its installation id to ~/.config/mlflow
    assert [p.relative_to(home) for p in home.rglob("*")] == [], command
