"""What a command needs of this machine is checked before it starts (``flows.preflight``): each
missing precondition is one line naming the key, its value and the fix, exit code 2, no
traceback; and ``model.tiny`` builds its random model only in the project's own folder for it,
never in place of another model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import configs.sections
from configs import ConfigError, LoraConfig, ModelConfig, load_config
from flows.preflight import base_config, check

REPO = Path(__file__).resolve().parent.parent
TINY = str(REPO / "configs/tiny.yaml")
FAKE_HUB_ID = "no-such-org-preflight/no-such-model"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A stand-in repository root, so the project's tiny-model folder is built in tmp_path."""
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.setattr(configs.sections, "ROOT", root)
    return root


def test_tiny_is_built_only_in_the_projects_own_folder(project, tmp_path, monkeypatch):
    from models.policy import Policies

    other = tmp_path / "some" / "missing" / "folder"
    with pytest.raises(ConfigError, match=rf"^model\.generator={other}: the model folder does "
                       rf"not exist \(model\.tiny builds its random tiny model only at "
                       rf"{project / '.cache/tiny-qwen2'}, never in place of another model\)$"):
        Policies.load(ModelConfig(generator=str(other), tiny=True), LoraConfig(r=4, alpha=8))
    assert not other.exists() and not (tmp_path / "some").exists()
    with pytest.raises(ConfigError, match=r"^model\.discriminator=.*only at"):
        ModelConfig(generator=".cache/tiny-qwen2", discriminator=str(other), layout="separate",
                    tiny=True).check_folders()
    # the same name from another directory is another folder: not built there either
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="only at .*: run from the repository root"):
        ModelConfig(generator=".cache/tiny-qwen2", tiny=True).check_folders()
    assert not (tmp_path / ".cache").exists()
    # a hub id is never a folder to build in
    with pytest.raises(ConfigError, match=rf"^model\.generator={FAKE_HUB_ID}: not a local"):
        Policies.load(ModelConfig(generator=FAKE_HUB_ID, tiny=True), LoraConfig(r=4, alpha=8))
    assert not (tmp_path / FAKE_HUB_ID.split("/")[0]).exists()
    # the project's own folder, named from the repository root, is built on load
    monkeypatch.chdir(project)
    cfg = ModelConfig(generator=".cache/tiny-qwen2", tiny=True, cpu_threads=1)
    check(load_config(TINY, [f"model.generator={cfg.generator}"]))
    Policies.load(cfg, LoraConfig(r=4, alpha=8))
    assert (project / ".cache/tiny-qwen2/config.json").is_file()


def test_a_missing_project_folder_names_what_builds_it(project):
    with pytest.raises(ConfigError, match=r"\(`\.venv/bin/python -m models\.tiny --out "
                       r"\.cache/tiny-qwen2` builds it\)$"):
        ModelConfig(generator=str(project / ".cache/tiny-qwen2")).check_folders()


def _fake_cache(cache: Path, repo_id: str) -> None:
    """A Hugging Face hub cache holding ``repo_id``'s config.json, as a download leaves it."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")


def test_a_hub_id_must_be_in_the_local_cache_while_the_hub_is_off(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = load_config(TINY, ["model.tiny=false", f"model.generator={FAKE_HUB_ID}"])
    with pytest.raises(ConfigError, match=rf"^model\.generator={FAKE_HUB_ID}: not a local "
                       r"folder, and not in the local Hugging Face cache; this project "
                       r"downloads no weights .*`make smollm2`.*`hf download "):
        check(cfg)
    _fake_cache(tmp_path / "hub", FAKE_HUB_ID)
    check(cfg)  # cached: from_pretrained reads it offline
    with pytest.raises(ConfigError, match="not a local folder"):
        check(load_config(TINY, ["model.tiny=false", "model.generator=bad id!"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user turned hub access on
    check(load_config(TINY, ["model.tiny=false", "model.generator=other-org/other-model"]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_and_4bit_without_cuda_are_refused():
    with pytest.raises(ConfigError, match=r"^model\.device='cuda': no CUDA device is available "
                       r"here; use model\.device=cpu or auto$"):
        check(load_config(TINY, ["model.device=cuda"]))
    for device in ("cpu", "auto"):
        with pytest.raises(ConfigError, match=rf"^model\.load_in_4bit=True: .* CUDA only, but "
                           rf"model\.device='{device}' resolves to 'cpu'"):
            check(load_config(TINY, ["model.load_in_4bit=true", f"model.device={device}"]))
    check(load_config(TINY, ["model.device=auto"]))


def test_the_vllm_engine_needs_its_environment_and_one_base(tmp_path, monkeypatch,
                                                            tiny_model_dir):
    monkeypatch.setenv("VLLM_PYTHON", str(tmp_path / "no-python"))
    cfg = load_config(TINY, ["sampling.engine=vllm"])
    with pytest.raises(ConfigError, match=r"^sampling\.engine=vllm needs the vLLM environment.*"
                       r"run `make vllm`"):
        check(cfg)
    check(cfg, engine=False)  # inference and evaluation sample on the policies
    check(cfg, models=False)  # a replay of execute or rewards loads no model
    monkeypatch.setenv("VLLM_PYTHON", sys.executable)
    with pytest.raises(ConfigError, match=r"^model\.discriminator=.*holds one base model"):
        check(load_config(TINY, ["sampling.engine=vllm", "model.layout=separate",
                                 f"model.discriminator={tiny_model_dir}"]))


def test_the_model_option_names_the_base_that_is_checked(tmp_path):
    model_cfg = load_config(TINY).model
    assert base_config(model_cfg, None) is model_cfg
    assert base_config(model_cfg, "tiny-generator@champion") is None  # known once fetched
    assert base_config(model_cfg, "models:/tiny-generator/3") is None
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    assert base_config(model_cfg, str(adapter)) is model_cfg  # put on the config's base
    base = base_config(model_cfg, str(tmp_path / "base"))
    assert (base.generator, base.tiny) == (str(tmp_path / "base"), False)
    with pytest.raises(ConfigError, match=r"^--model .*/base: the model folder does not"):
        check(load_config(TINY), model=str(tmp_path / "base"))
    with pytest.raises(ConfigError, match=rf"^--model {FAKE_HUB_ID}: not a local folder"):
        check(load_config(TINY), model=FAKE_HUB_ID)


# -- the commands: one line on stderr, exit code 2, before anything starts -----------------------

def _run(module: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "PREFECT_HOME": str(tmp_path / "prefect"), "MLFLOW_DISABLE_TELEMETRY": "true",
           "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PREFECT_API_URL", None)
    return subprocess.run([sys.executable, "-m", module, "--config", TINY, *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)


def _one_line(proc: subprocess.CompletedProcess, start: str) -> str:
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: " + start), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    return lines[0]


@pytest.mark.slow  # fresh interpreters importing Prefect and MLflow
@pytest.mark.parametrize("module", ["flows.evaluate", "flows.train"])
def test_a_missing_folder_with_tiny_is_one_line_not_a_random_model(module, tmp_path):
    missing = tmp_path / "some" / "missing" / "folder"
    _one_line(_run(module, tmp_path, "--set", f"model.generator={missing}"),
              f"model.generator={missing}: the model folder does not exist (model.tiny builds")
    assert not (tmp_path / "some").exists()


@pytest.mark.slow
@pytest.mark.parametrize("module", ["flows.infer", "flows.train"])
def test_an_uncached_hub_id_is_one_line_at_once(module, tmp_path):
    _one_line(_run(module, tmp_path, "--set", f"model.generator={FAKE_HUB_ID}",
                   "--set", "model.tiny=false"),
              f"model.generator={FAKE_HUB_ID}: not a local folder, and not in the local "
              "Hugging Face cache")


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
@pytest.mark.parametrize("module", ["flows.evaluate", "flows.train"])
def test_cuda_without_cuda_is_one_line_before_the_flow(module, tmp_path):
    _one_line(_run(module, tmp_path, "--set", "model.device=cuda"),
              "model.device='cuda': no CUDA device is available here")


class _Started(Exception):
    """Raised where a replay would start its Prefect server: every check before it passed."""


@pytest.mark.parametrize("stage, refused", [("rollout", True), ("update", True),
                                            ("execute", False), ("rewards", False)])
def test_a_replay_checks_what_its_stages_use(stage, refused, monkeypatch, capsys):
    """A replay that samples or updates loads the models: cuda without CUDA is its one line;
    one that re-executes or re-scores loads none and goes on."""
    import flows.replay
    from pipeline.schedule import plan
    from tasks.replay import replay_sequence

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    cfg = load_config(TINY, ["model.device=cuda"])
    monkeypatch.setattr(flows.replay, "run_config", lambda *_: cfg)
    monkeypatch.setattr(flows.replay, "check_replayable", lambda _cfg, _run, step, kind, down: (
        plan(cfg.schedule)[step - 1], replay_sequence(kind, down), []))
    monkeypatch.setattr(flows.replay, "incomplete", lambda *_: [])

    def started(**_):
        raise _Started

    monkeypatch.setattr(flows.replay, "ensure_prefect_api", started)
    argv = ["--run-id", "some-run", "--step", "1", "--stage", stage]
    if not refused:
        with pytest.raises(_Started):
            flows.replay.main(argv)
        return
    assert flows.replay.main(argv) == 2
    assert capsys.readouterr().err == ("error: model.device='cuda': no CUDA device is available "
                                       "here; use model.device=cpu or auto\n")
