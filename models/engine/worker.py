"""The vLLM engine process: one ``vllm.LLM`` serving sampling requests from the trainer.

Runs under the vLLM environment's interpreter (``.venv-vllm``, see ``models.engine``), not the
trainer's, so it imports nothing from this project: the standard library, torch, safetensors
and vLLM only. Started by ``models.engine.client.EngineClient``, which hands it one end of a
socket pair (``--fd``) and talks to it in pickled messages (``multiprocessing.connection``):

    {"op": "start", ...engine settings}             -> {"seconds": ...}
    {"op": "load_weights", "path": p}               -> {"seconds": ...}   merged weights, in place
    {"op": "generate", "prompts", "params", "seeds", "lora"} -> {"outputs": [...], "seconds"}
    {"op": "shutdown"}                              -> exits, no answer

Any failure is answered as ``{"error": traceback}`` and the process keeps serving. It dies
with its parent: a watchdog thread exits the process within a second of the trainer dying
however it dies (``kill -9`` included; ``PR_SET_PDEATHSIG`` would tie it to the trainer *thread*
that started it, and the trainer starts it from whichever thread loads the models), and it
exits when the socket closes. vLLM's engine core runs in this
process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set by the client), so there is no grandchild
to leave behind.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection


def _die_with_parent(parent: int, interval_s: float = 0.5) -> None:
    """Exit (hard: vLLM may be mid-request in the main thread) once ``parent`` is gone."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        os._exit(0)

    if os.getppid() != parent:                               # gone before we started
        sys.exit(0)
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


class Engine:
    def __init__(self) -> None:
        self.llm = None

    def start(self, msg: dict) -> dict:
        from vllm import LLM

        t0 = time.perf_counter()
        kwargs = dict(
            model=msg["model"], dtype=msg["dtype"],
            max_model_len=msg["max_model_len"], seed=msg["seed"],
            # the processed distribution (temperature, top-p) each token was drawn from: the
            # log-probs PPO's ratio compares, as the transformers engine records them
            logprobs_mode="processed_logprobs",
            # no model generation_config defaults (Qwen's top_k=20, repetition_penalty=1.05)
            generation_config="vllm",
            skip_tokenizer_init=True, enable_prefix_caching=True,
            max_num_seqs=msg["max_num_seqs"], enforce_eager=msg["enforce_eager"],
            # Whole prompts per step: a prompt prefilled in chunks discards the token sampled
            # after each partial chunk by rewinding its per-request generator, which vLLM's CPU
            # build cannot ("CPU Generator does not use offset"); per-request seeds are what
            # make a sample independent of its batch.
            enable_chunked_prefill=False,
            max_num_batched_tokens=max(msg["max_model_len"], 8192),
        )
        import torch

        if torch.cuda.is_available():                        # the trainer shares the GPU
            kwargs["gpu_memory_utilization"] = msg["gpu_memory_utilization"]
        if msg.get("max_lora_rank"):
            kwargs.update(enable_lora=True, max_lora_rank=msg["max_lora_rank"],
                          max_loras=msg.get("max_loras", 2))
        self.llm = LLM(**kwargs)
        return {"seconds": time.perf_counter() - t0}

    def load_weights(self, msg: dict) -> dict:
        from safetensors.torch import load_file

        t0 = time.perf_counter()
        weights = load_file(msg["path"])
        # vLLM's in-place reload: each touched layer back to checkpoint layout, loaded, then
        # processed again (the CPU backend repacks linear weights for its kernels)
        self.llm.collective_rpc("reload_weights", kwargs={
            "weights_iterator": list(weights.items()), "is_checkpoint_format": True})
        # cached KV blocks were computed with the old weights
        self.llm.reset_prefix_cache()
        return {"seconds": time.perf_counter() - t0}

    def generate(self, msg: dict) -> dict:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.lora.request import LoRARequest

        p = msg["params"]
        params = [SamplingParams(
            n=1, temperature=p["temperature"], top_p=p["top_p"], top_k=0, min_p=0.0,
            repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0,
            max_tokens=p["max_tokens"], min_tokens=p["min_tokens"],
            stop_token_ids=p["stop_token_ids"], ignore_eos=False, logprobs=0,
            detokenize=False, seed=seed) for seed in msg["seeds"]]
        lora = msg.get("lora")
        request = LoRARequest(lora["name"], lora["id"], lora["path"]) if lora else None
        t0 = time.perf_counter()
        distinct = list(dict.fromkeys(tuple(ids) for ids in msg["prompts"]))
        if len(distinct) < len(msg["prompts"]):
            # A step samples each prompt several times. vLLM caches a prompt's KV blocks only
            # once they are computed, so copies in one batch would each be prefilled: compute
            # each distinct prompt first (one token, discarded) and the batch reads the cache.
            self.llm.generate([TokensPrompt(prompt_token_ids=list(ids)) for ids in distinct],
                              SamplingParams(max_tokens=1, detokenize=False), use_tqdm=False,
                              lora_request=request)
        results = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in msg["prompts"]],
                                    params, use_tqdm=False, lora_request=request)
        outputs = []
        for result in results:
            out = result.outputs[0]
            ids = list(out.token_ids)
            # one entry per sampled token: the token's own log-prob (logprobs=0 asks no top-k)
            logprobs = [float(step[tok].logprob)
                        for tok, step in zip(ids, out.logprobs or [], strict=True)]
            outputs.append({"token_ids": ids, "logprobs": logprobs,
                            "finish_reason": out.finish_reason})
        return {"outputs": outputs, "seconds": time.perf_counter() - t0}


def serve(conn: Connection) -> None:
    engine = Engine()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):                          # the trainer is gone
            return
        op = msg.get("op")
        if op == "shutdown":                                 # no answer: the client has gone
            return
        try:
            reply = getattr(engine, op)(msg)
        except Exception:                                    # noqa: BLE001 - sent back whole
            reply = {"error": traceback.format_exc()}
        conn.send(reply)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True, help="this end of the socket pair")
    parser.add_argument("--parent", type=int, required=True, help="the trainer's pid")
    args = parser.parse_args()
    _die_with_parent(args.parent)
    sock = socket.socket(fileno=args.fd)
    serve(Connection(sock.detach()))


if __name__ == "__main__":
    main()
