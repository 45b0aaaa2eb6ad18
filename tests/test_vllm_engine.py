"""``sampling.engine=vllm``: the vLLM engine samples what the trainer's policy would, with the
adapter version the trainer holds, and never outlives the process that started it.

Needs the vLLM environment (``make vllm``; ``make test`` builds it), else skips saying so.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from configs.schema import LoraConfig, ModelConfig, SamplingConfig
from models.engine.client import EngineError, vllm_python
from models.engine.sampler import remove_orphaned_weights
from models.tiny import TinySpec

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

try:
    vllm_python()
except EngineError as exc:  # a user's clone without `make vllm`
    pytestmark = [pytestmark, pytest.mark.skip(reason=str(exc))]

EPS32 = torch.finfo(torch.float32).eps
SCORE_BOUND = 24.0
"""|logit / temperature| bound of the tiny model at the temperatures used (see
``test_models_generation.SCORE_BOUND``)."""
_SPEC = TinySpec()
_MATMULS = _SPEC.num_layers * 7 + 1  # q, k, v, o, gate, up, down per layer, and the head
_K = max(_SPEC.hidden_size, _SPEC.intermediate_size)
ENGINE_ATOL = 2 * _MATMULS * _K * EPS32 * SCORE_BOUND  # 0.011
"""Two float32 forward passes of the same weights (vLLM's oneDNN kernels and paged attention,
the trainer's PyTorch ones) sum in different orders. A dot product of length K is within
K eps32 (relative to the sum of |terms|) of exact; to first order each of the model's matmuls
adds that much relative error to the score (RMSNorm rescales each layer's input, so one
layer's relative error is passed on, not amplified), and the log-softmax doubles it. Both
passes: twice that, relative to the score bound S. A wrong merge or a stale adapter moves log-
probs by the adapter's own effect, which the tests check is far larger."""

SAMPLING = SamplingConfig(max_new_tokens=16, temperature=0.7, top_p=0.9, seed=5, engine="vllm")


@pytest.fixture(scope="module")
def policies(tiny_model_dir):
    from models.policy import Policies

    return Policies.load(ModelConfig(generator=str(tiny_model_dir)), LoraConfig(), seed=1)


def _perturb(policies, role: str, seed: int) -> None:
    """Move ``role``'s adapter somewhere a fresh one never is (B starts at zero)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policies.trainable_parameters(role):
            p.add_(torch.randn(p.shape, generator=g) * 0.3)


def _trainer_logprobs(policies, role: str, generations, sampling: SamplingConfig, *,
                      adapter: bool = True) -> list[list[float]]:
    from models.logprobs import packed_batch, packed_logprobs

    batch = packed_batch([g.prompt_ids for g in generations],
                         [g.response_ids for g in generations], 0, "cpu",
                         max(len(g.response_ids) for g in generations))
    model = policies.model_for(role)
    with torch.no_grad():
        if adapter:
            lp = packed_logprobs(model, batch, temperature=sampling.temperature,
                                 top_p=sampling.top_p).logprobs
        else:
            with policies.reference(role) as base:
                lp = packed_logprobs(base, batch, temperature=sampling.temperature,
                                     top_p=sampling.top_p).logprobs
    return [lp[i, :len(g.response_ids)].tolist() for i, g in enumerate(generations)]


def _max_gap(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True)
               for x, y in zip(ra, rb, strict=True))


def _mean_gap(a: list[list[float]], b: list[list[float]]) -> float:
    gaps = [abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)]
    return sum(gaps) / len(gaps)


@pytest.mark.parametrize("weights", ["merged", "lora"])
def test_engine_samples_with_the_adapter_version_the_trainer_holds(policies, tiny_model_dir,
                                                                   tmp_path, weights):
    from dataclasses import replace

    from models.engine.sampler import VllmSampler

    sampling = replace(SAMPLING, vllm_weights=weights)
    model_cfg = ModelConfig(generator=str(tiny_model_dir))
    tok = policies.tokenizer_for("generator")
    prompts = [tok(t)["input_ids"] for t in ("def add(a, b):", "class Foo:\n    x = 1",
                                              "for i in range(")] * 2
    with VllmSampler(policies, model_cfg, sampling, LoraConfig().r,
                     tmp_path / "engine.log") as engine:
        for round_, role in enumerate(["discriminator", "generator", "discriminator"]):
            # a new adapter version before every batch: the engine must sample with it
            _perturb(policies, role, seed=round_)
            version = policies.adapter_version(role)
            assert engine.adapter_version(role) == version
            batch = engine.sample(role, prompts, sampling, seed=round_)
            gens = batch.generations
            assert [g.prompt_ids for g in gens] == prompts
            assert all(0 < len(g.response_ids) <= sampling.max_new_tokens for g in gens)
            # a finished sample ends with its stop token; an unfinished one ran to the limit
            stops = set(engine._stop[role])
            for g in gens:
                assert g.finished == (g.response_ids[-1] in stops)
                assert g.finished or len(g.response_ids) == sampling.max_new_tokens
                assert not any(t in stops for t in g.response_ids[:-1])
            engine_lp = [g.logprobs for g in gens]
            trainer = _trainer_logprobs(policies, role, gens, sampling)
            base = _trainer_logprobs(policies, role, gens, sampling, adapter=False)
            assert _max_gap(engine_lp, trainer) < ENGINE_ATOL
            # the check can fail: the adapter moves these log-probs far more than the bound
            assert _mean_gap(trainer, base) > 10 * ENGINE_ATOL
        # same seed, same adapter: the same samples; min_new_tokens forbids stopping early
        again = engine.sample("discriminator", prompts, sampling, seed=2)
        assert [g.response_ids for g in again.generations] == [g.response_ids for g in gens]
        longest = engine.sample("generator", prompts, sampling, seed=9,
                                min_new_tokens=sampling.max_new_tokens)
        assert all(len(g.response_ids) == sampling.max_new_tokens
                   for g in longest.generations)
        # a stop rule cuts the engine's samples where the trainer's loop stops its own
        from models.generation import stop_length
        from models.stages import StopRule

        free = engine.sample("generator", prompts, sampling, seed=5).generations
        text = "".join(g.text for g in free)
        rule = StopRule(strings=(max(set(text) - {" "}, key=text.count),))
        cut = engine.sample("generator", prompts, sampling, seed=5, stop=rule).generations
        lengths = [stop_length(tok, g.response_ids, rule) for g in free]
        assert any(lengths)
        for a, b, n in zip(free, cut, lengths, strict=True):
            assert b.response_ids == a.response_ids[:n or len(a.response_ids)]
            assert b.logprobs == a.logprobs[:len(b.response_ids)]
            assert b.finished == (n is not None or a.finished)
        assert engine.syncs >= 3 and engine.start_seconds > 0
        # models reloaded mid-run (a damaged state): the engine follows them, even though the
        # fresh generator's version may equal one it held before
        from models.policy import Policies

        fresh = Policies.load(model_cfg, LoraConfig(), seed=1)
        engine.use(fresh)
        again = engine.sample("generator", prompts, sampling, seed=4).generations
        assert _max_gap([g.logprobs for g in again],
                        _trainer_logprobs(fresh, "generator", again, sampling)) < ENGINE_ATOL


N_FIRST = 600
DKW_FAILURE = 1e-6
DKW_EPS = math.sqrt(math.log(2 / DKW_FAILURE) / (2 * N_FIRST))  # 0.107
"""Dvoretzky-Kiefer-Wolfowitz: the empirical CDF of n i.i.d. draws is within eps of the true
CDF everywhere, except with probability <= 2 exp(-2 n eps^2). For one engine against the exact
distribution, at failure probability 1e-6 and n = 600 draws, eps = 0.107. The draws are seeded,
so the test is deterministic; the bound says it was not tuned to pass."""


def _first_token_cdf_gap(first: list[int], exact: torch.Tensor) -> float:
    counts = Counter(first)
    emp = torch.tensor([counts.get(i, 0) for i in range(exact.numel())], dtype=torch.float64)
    return float((emp.cumsum(0) / len(first) - exact.cumsum(0)).abs().max())


def test_both_engines_draw_first_tokens_from_the_same_distribution(policies, tiny_model_dir,
                                                                   tmp_path):
    from transformers import TopPLogitsWarper

    from models.engine.sampler import VllmSampler

    role = "generator"
    _perturb(policies, role, seed=42)
    tok = policies.tokenizer_for(role)
    prompt = tok("def add(a, b):\n    return")["input_ids"]
    model = policies.model_for(role)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt])).logits[0, -1].double()
    scores = TopPLogitsWarper(SAMPLING.top_p)(None, (logits / SAMPLING.temperature)[None])[0]
    exact = torch.softmax(scores, dim=-1)                    # what both must sample from
    assert float(exact.max()) < 0.9, "a near-deterministic first token tests nothing"

    hf = policies.sample(role, [_ids(prompt)] * N_FIRST,
                         SamplingConfig(max_new_tokens=1, temperature=SAMPLING.temperature,
                                        top_p=SAMPLING.top_p, batch_size=N_FIRST), seed=1)
    with VllmSampler(policies, ModelConfig(generator=str(tiny_model_dir)), SAMPLING,
                     LoraConfig().r, tmp_path / "engine.log") as engine:
        vl = engine.sample(role, [prompt] * N_FIRST, SAMPLING, seed=1, max_new_tokens=1)
    for name, batch in (("hf", hf), ("vllm", vl)):
        first = [g.response_ids[0] for g in batch.generations]
        gap = _first_token_cdf_gap(first, exact)
        assert gap < DKW_EPS, (name, gap)
        # outside the top-p nucleus nothing is drawn, by either engine
        assert all(exact[t] > 0 for t in first), name


def _ids(prompt):
    from models.prompts import Prompt

    return Prompt(text="", ids=list(prompt))


ORPHAN_SCRIPT = """
import sys, time
from configs.schema import LoraConfig, ModelConfig, SamplingConfig
from models.engine.sampler import VllmSampler
from models.policy import Policies
if __name__ == "__main__":
    cfg = ModelConfig(generator=sys.argv[1])
    engine = VllmSampler(Policies.load(cfg, LoraConfig()), cfg, SamplingConfig(engine="vllm"),
                         8, sys.argv[2])
    engine.start()
    print(engine.client.process.pid, flush=True)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for every purpose but its table entry
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[-1][0] != "Z"


def test_engine_dies_with_a_killed_parent(tiny_model_dir, tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT, str(tiny_model_dir),
                             str(tmp_path / "engine.log")], cwd=REPO, stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip().isdigit(), (line, (tmp_path / "engine.log").read_text()[-2000:])
        engine_pid = int(line)
        assert _alive(engine_pid)
        proc.kill()                                          # kill -9 of the run
        proc.wait()
        deadline = time.monotonic() + 10
        while _alive(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(engine_pid), "the vLLM engine outlived its killed parent"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        remove_orphaned_weights()  # the killed parent's push folder: what its close would do
