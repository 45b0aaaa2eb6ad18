"""The entry points' preload: a run without 4-bit models goes without bitsandbytes."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

LORA_WITHOUT_BNB = """
import sys
from flows import preload
preload(quantised=False)
import peft, torch
from models.tiny import build_tiny_model
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(build_tiny_model(sys.argv[1]))
lora = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj"]))
lora(torch.tensor([[1, 2, 3]])).logits.sum().backward()
print("bitsandbytes", sys.modules.get("bitsandbytes", "absent"),
      "inductor", "torch._inductor.compile_fx" in sys.modules)
"""


def _run(code: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(REPO),
                                                       "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_a_full_precision_run_trains_lora_without_importing_bitsandbytes(tmp_path):
    out = _run(LORA_WITHOUT_BNB, str(tmp_path / "tiny"))
    assert "bitsandbytes None inductor False" in out
    assert "gemm_4bit" not in out  # bitsandbytes' CPU warning never printed


@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None,
                    reason="bitsandbytes is not installed")
def test_a_4bit_run_and_an_earlier_import_keep_bitsandbytes():
    out = _run("import sys\nfrom flows import preload\npreload(quantised=True)\n"
               "print('loaded', type(sys.modules['bitsandbytes']).__name__)")
    assert "loaded module" in out
    out = _run("import sys, peft\nfrom flows import skip_bitsandbytes\nskip_bitsandbytes()\n"
               "print('kept', type(sys.modules.get('bitsandbytes')).__name__)")
    assert "kept module" in out


INFER_WITHOUT_BNB = """
import sys
from flows import infer
from models.tiny import build_tiny_model
code = infer.main(["--model", str(build_tiny_model(sys.argv[1])), "--problems", "demo",
                   "--ids", "add"])
print("exit", code, "bitsandbytes", sys.modules.get("bitsandbytes", "absent"))
"""


def test_inference_without_cuda_goes_without_bitsandbytes(tmp_path):
    """``flows.infer`` loads a registered model whose quantisation it learns only while loading
    it; without CUDA no 4-bit load can happen, so bitsandbytes (and its CPU warning) stays out."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available: bitsandbytes may be needed")
    out = _run(INFER_WITHOUT_BNB, str(tmp_path / "tiny"))
    assert "exit 0 bitsandbytes None" in out, out[-3000:]
    assert "gemm_4bit" not in out
