"""Two full training steps at the real model's shape, on this machine's CPU.

    .venv/bin/python benchmarks/real_shape.py [--tokens 16] [--engine vllm]

The model is a random-weight model of the exact architecture of
``configs/qwen2.5-coder-1.5b.yaml``'s model (Qwen2.5-Coder-1.5B-Instruct: 28 layers, hidden
1536, 12 heads, 2 KV heads, MLP 8960; ``models.shapes``). One difference: it uses the project's
tokenizer, so its vocabulary is 2,048 tokens instead of 151,936 (the embedding and output
matrices are ~1% of the real ones; everything between them is full size). It runs that config
through ``flows.train`` in float32 on the CPU, with gradient checkpointing and the config's PPO
micro-batch (4), vLLM sampling (the config's engine), one problem with the config's 4 samples,
and ``--tokens`` new tokens per stage output instead of 512 (the responses are shortened, not
the architecture): step 1 trains the discriminator, step 2 the generator, each one with all
five chain stages, both roles' tests, the sandbox, the rewards and a PPO update. The update
uses ``ppo.advantage=gae``: a random model scores 0 on every sample, and the config's
group-relative advantages would skip an update without reward spread (no backward pass to
measure); GAE adds a value head and trains on every token.

Prints seconds per phase of each step (``time/*``), the peak resident memory of the run's
process tree (trainer, vLLM engine, sandboxes: sampled every 0.2 s), and what the measured
token counts predict for the real config on one GPU (assumptions printed with it). Last line:
``step_s=<mean seconds per training step> peak_rss_gib=<...>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

import psutil  # noqa: E402

from models.shapes import SHAPES, build_shaped_model  # noqa: E402

SHAPE = "qwen2.5-coder-1.5b"
CONFIG = ROOT / "configs" / "qwen2.5-coder-1.5b.yaml"
PHASES = ("engine_start", "generation", "sandbox", "ppo", "other")


class PeakRss:
    """Largest summed RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, interval_s: float = 0.2) -> None:
        self.pid, self.interval_s, self.peak = pid, interval_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                root = psutil.Process(self.pid)
                total = 0
                for p in [root, *root.children(recursive=True)]:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                return
            time.sleep(self.interval_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def gpu_prediction(tokens: dict[str, float], params: float) -> list[str]:
    """What the measured token counts predict for the real config (bf16 weights, 4-bit base,
    512 new tokens, 8 problems x 4 samples per step) on one H100-class GPU. Rough by design:
    generation is bound by reading the weights once per decode step, PPO by its FLOPs."""
    real = {"sequences": 8 * 4, "new_tokens": 512, "calls": 10}  # 5 stages x 2 roles per step
    hbm_bytes_per_s, flops = 2.0e12, 300e12                      # achieved, not peak
    weight_bytes = params * 2                                    # bf16 weights as vLLM holds
    decode_s = real["calls"] * real["new_tokens"] * weight_bytes / hbm_bytes_per_s
    prompt = tokens["prompt_tokens_per_sequence"]
    trained = real["sequences"] * (prompt + real["new_tokens"])
    # forward + backward (x3), gradient checkpointing recomputes the forward (+1), then the
    # reference and old log-prob passes (+2): 6 forwards' worth of 2 N FLOPs per token
    ppo_s = 6 * 2 * params * trained / flops
    return [f"prediction for {CONFIG.name} on one GPU (H100-class; assumed "
            f"{hbm_bytes_per_s / 1e12:.0f} TB/s and {flops / 1e12:.0f} TFLOP/s achieved, "
            f"{params / 1e9:.2f} B parameters with the real vocabulary):",
            f"  generation ~{decode_s:.0f} s per step ({real['calls']} batched calls x "
            f"{real['new_tokens']} decode steps, each reading {weight_bytes / 1e9:.1f} GB of "
            f"weights; prefill of ~{prompt:.0f}-token prompts adds little)",
            f"  PPO ~{ppo_s:.0f} s per update ({trained:,.0f} tokens x 6 forward-equivalents)",
            "  sandbox: as measured here per test (it runs on the CPU either way)",
            f"  so a step of the real config: ~{decode_s + ppo_s:.0f} s plus the sandbox"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=16, help="new tokens per stage output")
    parser.add_argument("--engine", choices=["vllm", "hf"], default="vllm")
    parser.add_argument("--model", default=str(ROOT / ".cache" / f"shape-{SHAPE}"),
                        help="where the random model is built (reused when present)")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    model_dir = build_shaped_model(args.model, SHAPE)
    print(f"model: random {SHAPE} shape in {model_dir} ({time.perf_counter() - t0:.0f} s); "
          f"{ {k: v for k, v in SHAPES[SHAPE].items() if 'size' in k or 'num' in k} }",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        run_id = "real-shape"
        overrides = [
            f"model.generator={model_dir}", "model.device=cpu", "model.dtype=float32",
            "model.load_in_4bit=false", "model.gradient_checkpointing=true",
            f"sampling.engine={args.engine}", f"sampling.max_new_tokens={args.tokens}",
            "sampling.batch_size=4", "schedule.stages=[1]", "schedule.n_discriminator_steps=1",
            "schedule.n_generator_steps=1", "schedule.k_alternating=0",
            "schedule.problems_per_step=1", "tracking.register_models=false",
            # random weights score 0 on every sample, and group-relative advantages skip an
            # update without reward spread: GAE (a value head per role) gives every update its
            # full forward and backward work
            "ppo.advantage=gae",
            f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db", f"artifacts.root={tmp}/runs"]
        cmd = [sys.executable, "-m", "flows.train", "--config", str(CONFIG), "--run-id", run_id]
        for o in overrides:
            cmd += ["--set", o]
        env = {**os.environ, "PREFECT_HOME": f"{tmp}/prefect", "HF_HUB_OFFLINE": "1",
               "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1"}
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
        with PeakRss(proc.pid) as rss:
            code = proc.wait()
        wall = time.perf_counter() - start
        if code != 0:
            print(f"the training run failed (exit {code})")
            return 1
        steps, tokens = read_results(tmp, run_id)
    print(f"\nwall time of the whole run (Prefect, loading, two steps, checkpoints): {wall:.0f} s")
    print("seconds per phase:")
    for step, phases in steps.items():
        print(f"  step {step}: total {phases['step']:.0f} | " + " | ".join(
            f"{p} {phases.get(p, 0.0):.0f}" for p in PHASES))
    peak = rss.peak / 2 ** 30
    print(f"peak RSS (trainer + vLLM engine + sandboxes): {peak:.1f} GiB")
    print(f"tokens: ~{tokens['prompt_tokens_per_sequence']:.0f} prompt tokens per chain-stage "
          f"prompt, {args.tokens} new tokens per output")
    real_params = 1.54e9  # Qwen2.5-Coder-1.5B with its 151,936-token vocabulary (tied)
    for line in gpu_prediction(tokens, real_params):
        print(line)
    mean_step = statistics.mean(p["step"] for p in steps.values())
    print(f"step_s={mean_step:.0f} peak_rss_gib={peak:.1f}")
    return 0


def read_results(tmp: str, run_id: str) -> tuple[dict[int, dict[str, float]], dict[str, float]]:
    """``time/*`` of each step (MLflow) and the prompt lengths the chains recorded."""
    from artifacts import RunStore
    from artifacts.tracking import Tracker

    tracker = Tracker(f"sqlite:///{tmp}/mlflow.db", "qwen2.5-coder-1.5b")
    runs = tracker.client.search_runs([tracker.experiment_id])
    run = runs[0]
    steps: dict[int, dict[str, float]] = {}
    for key in ["step", *PHASES]:
        for m in tracker.client.get_metric_history(run.info.run_id, f"time/{key}_s"):
            steps.setdefault(m.step, {})[key] = m.value
    store = RunStore(f"{tmp}/runs", run_id)
    chains = store.read("chains", columns=["prompt_token_ids"])
    lengths = [len(x) for x in chains["prompt_token_ids"]]
    for row in store.read("updates", columns=["step", "role", "optimizer_steps",
                                              "n_tokens"]).to_dict("records"):
        print(f"update of step {row['step']} ({row['role']}): {row['optimizer_steps']} "
              f"optimizer step(s) over {row['n_tokens']} tokens")
    return dict(sorted(steps.items())), {"prompt_tokens_per_sequence":
                                         sum(lengths) / max(len(lengths), 1)}


if __name__ == "__main__":
    raise SystemExit(main())
