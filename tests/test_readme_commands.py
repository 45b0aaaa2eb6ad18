"""Every shell command in README.md and docs/*.md runs as written (shrunk where a flag allows).

The commands are read from the ```bash blocks of the docs. Each one must be in :data:`COMMANDS`,
which either runs it (the command as written, plus the shrink its entry states) or skips it
with the reason; a command the table does not know fails the fast test below, so a new docs
command cannot go untested by accident.

The slow test runs them in order, in a copy of the working tree in a temporary folder (so
``runs/``, ``mlflow.db`` and ``mlartifacts/`` of the commands land there, not in the
checkout), with ``bash -c`` from the copy's root as a user would, a fresh ``PREFECT_HOME`` and
the checkout's environments and tiny model (symlinks). The training command comes first: its
run (``ID`` in the replay commands) and its registered models (``tiny-generator@champion``)
are what the later commands read.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from procs import serve_and_poll

from deployments.server import free_port

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN_ID = "readme-run"


@dataclass(frozen=True)
class Command:
    """How the test treats one docs command: ``run`` (the command to run: the docs' text with
    the shrink applied; ``{ID}``, ``{PORT}`` and ``{TMP}`` are filled in) or ``skip`` (why
    not). ``shrink`` says what changed and why. ``server``: a server, polled for HTTP 200 on
    ``{PORT}`` and stopped. ``code``: its expected exit code."""

    run: str | None = None
    shrink: str = ""
    skip: str | None = None
    server: bool = False
    code: int = 0  # the exit code the docs describe


TINY_RUN = (".venv/bin/python -m flows.train --config configs/tiny.yaml "
            "--set ppo.learning_rate=1e-4 --set schedule.stages=[1,2]")
CODE_ONLY_RUN = (".venv/bin/python -m flows.train --config configs/tiny.yaml --set "
                 "chain.stages=[5] --set chain.discriminator=false --set schedule.stages=[5] "
                 "--set schedule.n_discriminator_steps=0 --set schedule.k_alternating=0 "
                 "--set \"rewards.generator={baseline_pass_rate: 1.0}\"")
QWEN_RUN = ("make vllm VLLM_REQ=requirements-vllm-cuda.txt",
            ".venv/bin/python -m flows.train --config configs/qwen2.5-coder-1.5b.yaml "
            "--set model.generator=/models/Qwen2.5-Coder-1.5B-Instruct")
SANDBOX_RUN = ".venv/bin/python -m sandbox run --code solution.py --tests test_solution.py"
PYFUNC = ("MLFLOW_TRACKING_URI=sqlite:///$PWD/mlflow.db .venv/bin/python -c \"\n"
          "import mlflow, pandas as pd\n"
          "m = mlflow.pyfunc.load_model('models:/tiny-generator@champion')\n"
          "problem = {'description': 'Return the sum of a and b.', 'entry_point': 'add'}\n"
          "out = m.predict(pd.DataFrame([problem]), params={'with_tests': True, 'seed': 1})\n"
          "print(out.iloc[0].to_dict())\"")
BENCHMARK = ("a benchmark (minutes of measurement on 2 cores, not a check): `make bench` runs "
             "every one")
DEPLOYMENTS = ("long-running Prefect server, workers and deployment runs, one terminal each: "
               "tests/test_deployments.py runs this walkthrough (server, pool, deploy, worker, "
               "a shrunk training run)")
STACK = ("the several-workers stack (PostgreSQL, Prefect, MLflow, Ray, two workers): "
         "tests/test_stack.py runs this walkthrough with the trainings shrunk")

# In the order the slow test runs them (later ones read what earlier ones wrote).
COMMANDS: dict[str, Command] = {
    TINY_RUN: Command(
        run=TINY_RUN + f" --run-id {RUN_ID} --set evaluation.limit=4 --set warm_start.steps=100",
        shrink="--run-id names the run the replay commands use; held-out evaluation on 4 "
               "problems instead of 12 (its 3 evaluations are a third of the run's time); a "
               "warm start of 100 steps instead of 400 (a fresh clone has no cached one; 400 "
               "steps of both roles were its largest part: 585 s -> 387 s beside other work); "
               "otherwise as written: 2 stages x (1 + 1 + 2) steps"),
    ".venv/bin/python -m flows.replay --run-id ID --step 3 --stage execute": Command(
        run=f".venv/bin/python -m flows.replay --run-id {RUN_ID} --step 3 --stage execute",
        shrink="ID is the training run above"),
    ".venv/bin/python -m flows.replay --run-id ID --step 5 --stage rollout --downstream":
        Command(run=f".venv/bin/python -m flows.replay --run-id {RUN_ID} --step 5 --stage "
                    "rollout --downstream",
                shrink="ID is the training run above (step 5 starts stage 2: replayable from "
                       "the MLflow checkpoint of step 4)"),
    ".venv/bin/python -m flows.replay --run-id ID --failed": Command(
        run=f".venv/bin/python -m flows.replay --run-id {RUN_ID} --failed",
        shrink="ID is the training run above (complete: 'no incomplete steps')"),
    ".venv/bin/python -m flows.infer --model tiny-generator@champion --problems demo --ids add":
        Command(run=".venv/bin/python -m flows.infer --model tiny-generator@champion "
                    "--problems demo --ids add"),
    ".venv/bin/python -m flows.infer --model models:/tiny-generator/3 --problems humaneval "
    "--limit 2 --tests": Command(
        run=".venv/bin/python -m flows.infer --model models:/tiny-generator/2 --problems "
            "humaneval --limit 2 --tests",
        shrink="version 2: the shrunk run registers one version per stage, 2 stages"),
    ".venv/bin/python -m flows.infer show": Command(run=".venv/bin/python -m flows.infer show"),
    ".venv/bin/python -m flows.evaluate --model tiny-generator@champion --problems humaneval "
    "--k 1 --k 10 --samples 10": Command(
        run=".venv/bin/python -m flows.evaluate --model tiny-generator@champion --problems "
            "humaneval --k 1 --k 10 --samples 10 --limit 2",
        shrink="--limit 2: two HumanEval problems instead of 164"),
    PYFUNC: Command(run=PYFUNC),
    CODE_ONLY_RUN: Command(
        run=CODE_ONLY_RUN + " --set warm_start.steps=20 --set evaluation.limit=2",
        shrink="a warm start of 20 steps instead of 400 and held-out evaluation on 2 problems "
               "instead of 12: the command's point is that a code-only chain runs, its "
               "figures are tests/test_chain_config.py's"),
    "MLFLOW_DISABLE_TELEMETRY=true MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false .venv/bin/mlflow ui "
    "--backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 --port 5000 --workers 1": Command(
        run="MLFLOW_DISABLE_TELEMETRY=true MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false exec "
            ".venv/bin/mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 "
            "--port {PORT} --workers 1",
        shrink="a free port instead of 5000; polled for HTTP 200, then stopped", server=True),
    ".venv/bin/python -m problems list demo --curriculum": Command(
        run=".venv/bin/python -m problems list demo --curriculum"),
    ".venv/bin/python -m problems validate demo": Command(
        run=".venv/bin/python -m problems validate demo"),
    SANDBOX_RUN: Command(run=SANDBOX_RUN, shrink="solution.py and test_solution.py, which the "
                         "command names, are written first"),
    "cp -r mlflow.db mlartifacts /new/place/": Command(
        run="mkdir -p {TMP}/new/place && cp -r mlflow.db mlartifacts {TMP}/new/place/",
        shrink="/new/place under the test's temporary folder (created first)"),
    ".venv/bin/python -m artifacts.relocate --db /new/place/mlflow.db --artifacts "
    "/new/place/mlartifacts": Command(
        run=".venv/bin/python -m artifacts.relocate --db {TMP}/new/place/mlflow.db "
            "--artifacts {TMP}/new/place/mlartifacts",
        shrink="/new/place under the test's temporary folder; last, as it rewrites the copy"),
    # -- skipped, each with its reason --
    "make run": Command(skip="the full tiny training (minutes) after the set-up; the shrunk "
                        "training command above runs the same flow and config"),
    "make test": Command(skip="the whole test suite, this test included"),
    "make smollm2": Command(skip="installs a 93 MB wheel, converts it and trains SmolLM2 "
                                 "(~11 min); tests/test_convert_gguf.py converts a GGUF file "
                                 "it writes itself"),
    "make smollm2-model": Command(skip="installs a 93 MB wheel and converts it; "
                                       "tests/test_convert_gguf.py converts a GGUF file it "
                                       "writes itself"),
    ".venv/bin/python benchmarks/real_chain.py": Command(skip=BENCHMARK),
    QWEN_RUN[0]: Command(skip="installs vLLM's CUDA wheel: for a CUDA machine"),
    QWEN_RUN[1]: Command(skip="needs Qwen2.5-Coder-1.5B's weights in /models and a GPU"),
    QWEN_RUN[1] + " --set problems.source=../shared/data/leetcode_formatted.json --set "
    "problems.on_invalid=skip --set evaluation.source=humaneval --set evaluation.limit=164":
        Command(skip="needs Qwen2.5-Coder-1.5B's weights in /models and a GPU"),
    ".venv/bin/python -m flows.train --config configs/tiny.yaml [--artifacts-root DIR] "
    "[--run-id ID] [--set key=value ...] [--init-from models:/tiny-generator@champion]":
        Command(skip="a synopsis ([...] are optional parts), not a command"),
    ".venv/bin/python -m flows.train --config configs/tiny.yaml --set sampling.engine=vllm":
        Command(skip="the vLLM engine's start alone is ~30 s of 2 cores: "
                     "tests/test_vllm_flow.py runs this flow on vLLM, shrunk"),
    ".venv/bin/python benchmarks/learning.py": Command(skip=BENCHMARK),
    ".venv/bin/python benchmarks/generation_throughput.py": Command(skip=BENCHMARK),
    ".venv/bin/python benchmarks/shared_prefill.py": Command(skip=BENCHMARK),
    ".venv/bin/python benchmarks/token_draw.py": Command(skip=BENCHMARK),
    ".venv/bin/python benchmarks/rollout_engine.py": Command(skip=BENCHMARK),
    ".venv/bin/python benchmarks/real_shape.py": Command(skip=BENCHMARK),
    ".venv/bin/python benchmarks/logprob_memory.py": Command(skip=BENCHMARK),
    ".venv/bin/python benchmarks/sandbox_throughput.py": Command(skip=BENCHMARK),
    ".venv/bin/python benchmarks/sandbox_load.py": Command(skip=BENCHMARK),
    "export PREFECT_HOME=$PWD/.prefect PREFECT_API_URL=http://127.0.0.1:4200/api "
    "PREFECT_SERVER_ANALYTICS_ENABLED=false":
        Command(skip=DEPLOYMENTS),
    ".venv/bin/prefect server start --host 127.0.0.1 --port 4200": Command(skip=DEPLOYMENTS),
    ".venv/bin/python -m deployments setup": Command(skip=DEPLOYMENTS),
    ".venv/bin/prefect --no-prompt deploy --all": Command(skip=DEPLOYMENTS),
    ".venv/bin/prefect worker start --pool adversarial-cpu": Command(skip=DEPLOYMENTS),
    ".venv/bin/prefect deployment run train/train -p config=configs/minimal.yaml --watch":
        Command(skip=DEPLOYMENTS),
    ".venv/bin/python -m deployments stack up --dir /tmp/adv-stack": Command(skip=STACK),
    "source /tmp/adv-stack/stack.env": Command(skip=STACK),
    ".venv/bin/python -m deployments stack status --dir /tmp/adv-stack": Command(skip=STACK),
    ".venv/bin/python -m deployments deploy --name train-stack": Command(skip=STACK),
    ".venv/bin/prefect worker start --pool adversarial-cpu --limit 1 --name w1":
        Command(skip=STACK),
    ".venv/bin/prefect worker start --pool adversarial-cpu --limit 1 --name w2":
        Command(skip=STACK),
    "for id in run-a run-b; do .venv/bin/prefect deployment run train/train-stack -p "
    "config=configs/minimal.yaml -p run_id=$id -p 'overrides=[\"sandbox.executor=ray\"]' "
    "done": Command(skip=STACK),
    ".venv/bin/python -m deployments stack down --dir /tmp/adv-stack": Command(skip=STACK),
}


def normalise(command: str) -> str:
    """One docs command as one string: continuations joined, comments and runs of blanks
    outside quotes dropped (a multi-line quoted argument keeps its lines)."""
    out, quote, i = [], "", 0
    text = command.replace("\\\n", " ")
    while i < len(text):
        c = text[i]
        if quote:
            out.append(c)
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
            out.append(c)
        elif c == "#" and (not out or out[-1] in " \t"):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        elif c in " \t\n":
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(c)
        i += 1
    return "".join(out).strip()


def docs_commands() -> list[tuple[str, str]]:
    """``(file, command)`` for every command of every ```bash block, in order. A line that
    opens a quote or ends in ``\\`` continues on the next; ``for ... done`` is one command."""
    found = []
    for path in DOCS:
        for block in re.findall(r"```(?:bash|sh|shell)\n(.*?)```", path.read_text(), re.S):
            pending = ""
            for line in block.splitlines():
                pending = f"{pending}\n{line}" if pending else line
                if pending.rstrip().endswith("\\"):
                    continue
                try:
                    words = shlex.split(pending, comments=True)
                except ValueError:  # an open quote: the argument goes on
                    continue
                if words and words[0] == "for" and not re.search(r"\bdone\s*(#.*)?$",
                                                                pending.strip()):
                    continue
                command = normalise(pending)
                if words:
                    found.append((path.relative_to(REPO).as_posix(), command))
                pending = ""
    return found


def test_every_docs_command_is_known():
    """A docs command the table does not know fails here: give it a shrink or a reason. A
    table entry no docs command matches any more is stale."""
    seen = {command for _, command in docs_commands()}
    unknown = [f"{where}: {command}" for where, command in docs_commands()
               if command not in COMMANDS]
    assert not unknown, "docs commands missing from COMMANDS:\n" + "\n".join(unknown)
    assert not sorted(set(COMMANDS) - seen), "stale COMMANDS entries"
    for command, entry in COMMANDS.items():
        assert (entry.run is None) != (entry.skip is None), command


# -- running them ----------------------------------------------------------------------------

def copy_tree(dest: Path) -> Path:
    """The working tree (tracked and untracked, not ignored files) copied to ``dest/repo``,
    with the checkout's environments, tiny model and warm-start cache linked in, and
    ``dest/shared`` linked to the checkout's sibling ``shared`` where there is one."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    repo = dest / "repo"
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, repo / rel)
    for rel in (".venv", ".venv-vllm", ".cache/tiny-qwen2", ".cache/warmstart"):
        if (REPO / rel).exists():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).symlink_to((REPO / rel).resolve())
    if (REPO.parent / "shared").is_dir():
        (dest / "shared").symlink_to((REPO.parent / "shared").resolve())
    return repo


NOISE = ("Traceback (most recent call last)", "SyntaxWarning")


# A hang guard, not a speed check: quiet, the whole sequence took 285-325 s in three CI runs;
# with three CPU-bound processes beside it on 2 cores its first command alone (the training
# run) took 472 s and the suite's default 600 s cut it off. Each command has its own limit.
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_docs_commands_run_as_written(tmp_path):
    repo = copy_tree(tmp_path)
    (repo / "solution.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "test_solution.py").write_text("def test_add():\n    assert add(1, 2) == 3\n")
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"),
           "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    for name in ("MLFLOW_TRACKING_URI", "PREFECT_API_URL", "PYTHONPATH"):
        env.pop(name, None)  # the copy's own mlflow.db and a temporary Prefect server
    failures, timings = [], []
    for written, entry in COMMANDS.items():
        if entry.run is None:
            continue
        if "../shared/" in entry.run and not (tmp_path / "shared").is_dir():
            continue  # a user's clone without the shared data: the command names a file
        port = free_port()
        command = (entry.run.replace("{ID}", RUN_ID).replace("{PORT}", str(port))
                   .replace("{TMP}", str(tmp_path)))
        start = time.monotonic()
        if entry.server:
            problem = serve_and_poll(command, repo, env, port)
        else:
            out = subprocess.run(["bash", "-c", command], cwd=repo, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 timeout=900)
            noise = [n for n in NOISE if n in out.stdout]
            problem = (f"exit code {out.returncode}" if out.returncode != entry.code else
                       f"printed {noise}" if noise else "")
            if problem:
                problem += ":\n" + out.stdout[-3000:]
        timings.append(f"{time.monotonic() - start:6.1f} s  {written.splitlines()[0][:90]}")
        print(timings[-1], flush=True)  # with -s, as it goes
        if problem:
            failures.append(f"{written}\n  ran: {command}\n  {problem}")
    assert not failures, "\n\n".join(failures)
