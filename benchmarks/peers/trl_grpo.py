"""The peer: TRL's ``GRPOTrainer`` on the same model and problems, its reward the pass fraction
that this project's sandbox gives the completion's code on the problem's own tests.

It runs in TRL's own environment (``make trl`` builds ``.venv-trl``; TRL is a peer to measure
against, never a dependency of the project), so it imports nothing of the project but the
parser of code; the sandbox runs in the project's environment as ``python -m sandbox serve``,
one process for the whole run, fed a step's completions at a time:

    .venv-trl/bin/python benchmarks/peers/trl_grpo.py --model .cache/smollm2-135m-instruct \\
        --problems problems.json --out adapter/ [--steps 4] [--generations 4]

``--problems`` is a JSON list of ``{"id", "prompt", "entry_point", "preamble", "tests"}``
(the prompt a chat message list, the same direct prompt the project's code-only arm samples;
``benchmarks/real_learning.py`` writes it). The LoRA adapter is saved to ``--out`` for the
project's evaluation, and a JSON summary (seconds, rewards per step, peak RSS) is printed as the
last line. It lives apart from the benchmarks (``make bench`` runs ``benchmarks/*.py`` in the
project's environment, which has no TRL).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from models.parsing import parse_code  # noqa: E402  (stdlib only: no torch, no project deps)


class SandboxClient:
    """``python -m sandbox serve`` in the project's environment, one request per batch."""

    def __init__(self, python: str, timeout_s: float) -> None:
        self.proc = subprocess.Popen(
            [python, "-m", "sandbox", "serve", "--timeout", str(timeout_s)], cwd=ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def judge(self, jobs: list[tuple[str, list[str]]]) -> list[dict]:
        self.proc.stdin.write(json.dumps({"jobs": jobs}) + "\n")
        self.proc.stdin.flush()
        reply = json.loads(self.proc.stdout.readline())
        if "error" in reply:
            raise RuntimeError(f"sandbox serve refused a request: {reply['error']}")
        return reply["results"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def pass_fraction_reward(client: SandboxClient, log: list[dict], tokenizer):
    """The reward function GRPOTrainer calls: each completion's pass fraction on its problem's
    tests (0 for code that does not parse or define the entry point). It logs each batch's
    mean reward, parsed share and sampled tokens (``tokenizer`` counts them)."""
    def reward(prompts, completions, entry_point, preamble, tests, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
        jobs, where = [], []
        for i, (text, ep, pre, ts) in enumerate(zip(texts, entry_point, preamble, tests,
                                                    strict=True)):
            parsed = parse_code(text, ep)
            if parsed.ok:
                jobs.append((f"{pre}\n{parsed.code}" if pre else parsed.code, list(ts)))
                where.append(i)
        scores = [0.0] * len(completions)
        for i, result in zip(where, client.judge(jobs) if jobs else [], strict=True):
            scores[i] = result["passed"] / result["total"] if result["total"] else 0.0
        log.append({"time": time.time(), "mean": sum(scores) / len(scores),
                    "parsed": len(jobs) / len(completions), "tokens": tokens})
        return scores

    reward.__name__ = "pass_fraction"
    return reward


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the converted model folder")
    parser.add_argument("--problems", required=True, help="JSON list of problems (see above)")
    parser.add_argument("--out", required=True, help="folder for the trained LoRA adapter")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts-per-step", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4, help="samples per prompt")
    parser.add_argument("--max-completion", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--lora-r", type=int, default=8)
    parser.add_argument("--lora-alpha", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sandbox-python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args(argv)

    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(args.threads)
    rows = json.loads(Path(args.problems).read_text())
    dataset = Dataset.from_list([{k: r[k] for k in ("prompt", "entry_point", "preamble",
                                                     "tests")} for r in rows])
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    config = GRPOConfig(
        output_dir=str(Path(args.out) / "trainer"), max_steps=args.steps,
        per_device_train_batch_size=args.prompts_per_step * args.generations,
        num_generations=args.generations, max_completion_length=args.max_completion,
        learning_rate=args.learning_rate, temperature=args.temperature, top_p=1.0, beta=0.0,
        use_cpu=True, seed=args.seed, logging_steps=1, save_strategy="no", report_to="none",
        bf16=False, dataloader_num_workers=0)
    lora = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, lora_dropout=0.0,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                      "up_proj", "down_proj"], task_type="CAUSAL_LM")
    client = SandboxClient(args.sandbox_python, args.timeout)
    log: list[dict] = []
    start = time.perf_counter()
    try:
        trainer = GRPOTrainer(model=model,
                              reward_funcs=pass_fraction_reward(client, log, tokenizer),
                              args=config, train_dataset=dataset, processing_class=tokenizer,
                              peft_config=lora)
        trainer.train()
        trainer.model.save_pretrained(args.out)
    finally:
        client.close()
    seconds = time.perf_counter() - start
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps({"seconds": round(seconds, 1), "steps": args.steps,
                      "seconds_per_step": round(seconds / max(args.steps, 1), 1),
                      "rewards": [round(e["mean"], 3) for e in log],
                      "parsed": [round(e["parsed"], 3) for e in log],
                      "completion_tokens": sum(e["tokens"] for e in log),
                      "peak_rss_gib": round(peak_gib, 2), "out": args.out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
