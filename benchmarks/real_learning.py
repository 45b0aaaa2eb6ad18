"""Does training help a real model on problems it never saw? Four arms on SmolLM2-135M.

    make smollm2-model trl vllm     # once: the model, TRL's and vLLM's environments
    .venv/bin/python benchmarks/real_learning.py [--seeds 0 1] [--quick] [--candidates 128]
        [--train 8] [--heldout 8] [--humaneval 4] [--steps 8] [--keep DIR]

**Problems.** Candidates (``--candidates``, drawn with the screen's seed from the seed-format
files in ``../shared/data/``: ``function_problems.json``, ``example_problems.json`` and the
easy problems of ``leetcode_formatted.json``, plus HumanEval after the fixed subset) are
screened once: the base model (no adapter) samples ``--screen-samples`` solutions a problem
with the project's direct prompt (``models.stages.direct_messages``), judged by the sandbox on
the problem's own tests. The screen is cached in ``.cache/real_learning/`` keyed by the model
files' hash, the candidates, samples, seed and sampling settings, so a second call skips it.
Problems whose pass rate lies in the band (``--band 0.1 0.9``) are learnable (a group of
samples that all pass or all fail carries no group-relative advantage); they are shuffled and
cut into ``--train`` training problems and ``--heldout`` held-out ones, disjoint. The held-out
set adds a fixed HumanEval subset (its first ``--humaneval`` problems, not screened, never a
candidate). The warm start's source (the config's, ``demo``) is disjoint from both: no demo
problem is a candidate. Without ``../shared`` the candidates are HumanEval's (after the subset)
alone, and the call says so.

**Arms**, each with the same problems, samples per prompt (``sampling.samples_per_problem``),
LoRA (the config's r and alpha), learning rate and sampling seed:

1. ``chain``: the adversarial chain at the project's defaults (``configs/smollm2-135m.yaml``:
   both roles warm-started, the chain sampled in full every step, generator paid ``all_pass``),
   1 discriminator step then ``--steps`` generator steps on the code stage;
2. ``direct``: code only (``chain.stages=[5]``, ``chain.discriminator=false``: no reasoning
   stages, no discriminator, the problems' own tests; paid ``baseline_pass_rate``, the pass
   fraction TRL gets too), ``--steps`` generator steps from the base model (no warm start:
   the warm start teaches the chain's format, and TRL starts from the base too);
3. ``control``: arm 1 with learning rate 0 for both roles: it samples exactly the same and
   never updates, so its gain shows what evaluation alone moves;
4. ``trl``: TRL's ``GRPOTrainer`` (``benchmarks/peers/trl_grpo.py`` in ``.venv-trl``, a peer,
   never a dependency), ``--steps`` steps of ``problems_per_step`` prompts x the same samples,
   its reward the pass fraction from this project's sandbox; it starts from the base model
   (TRL does not warm-start), and its held-out pass@1 before (the base) and after (its adapter,
   ``serving.inference.InferenceEngine`` loads the peft folder) is measured here exactly as
   arm 2's held-out evaluation is (a code-only chain: the same sampler, prompts, seeds and
   sandbox), so the two arms' "before" are the same draws.

Arms 1-3 are ``python -m flows.train`` runs (``--set`` overrides, as ``benchmarks/learning.py``
runs its arms), one after another on one temporary Prefect server; their held-out pass@1
before and after is the run's own held-out evaluation (``tasks.heldout``: arm 1 and the
control in chain mode, arm 2 its code-only chain). An arm that fails is reported (its log's
tail) and the call exits 1 after printing what it has.

**Standard error.** Each pass@1 is a share of ``N = held-out problems x evaluation samples``
samples; its SE the binomial ``sqrt(p(1-p)/N)``. The SE of a gain is
``sqrt(SE_before^2 + SE_after^2)`` (the two taken as independent: they share problems and
seeds, so this overstates it). The control samples the same draws before and after, so its gain
(0 unless evaluation is not repeatable) is subtracted as a point estimate and adds no error of
its own. Over several seeds the gains are averaged and the SE is ``sqrt(sum SE_i^2) / S``.
Goal: every trained arm's gain over the control >= 2 SE; each is printed met or missed.

**Defaults, and why** (one call within 90 minutes on 2 CPU cores, the first one paying the
screen and the warm start once; docs/training.md has the measured costs of each phase):

* ``--candidates 128``, ``--screen-samples 4``: 512 direct samples, cached. The base model
  solves few problems when sampling (most candidates pass 0 of 4), and the band must still
  hold the training and held-out problems; 4 samples put a pass rate of 0.25-0.75 in it;
* ``--band 0.1 0.9``: the issue's learnable band;
* ``--train 8``, ``--heldout 8``: half the band each, up to 8 (a smaller band shrinks both in
  proportion), plus ``--humaneval 4`` fixed held-out problems, x ``--eval-samples 2``;
* ``--steps 8`` (+ 1 discriminator step in arms 1 and 3), ``problems_per_step`` 2 and 4
  samples (the config's): held-out evaluation, engine starts and the warm start are most of
  an arm's time, so the steps are as many as the call's budget leaves; every arm takes the
  same number, so they sample the same number of training completions;
* token budgets, learning rate 1e-4, LoRA r 8 / alpha 16 on every projection: the config's
  (stage 5: 256 tokens, TRL's ``--max-completion`` the same).

``--quick``: 1 step per arm, 2 training and 2 + 1 held-out problems x 1 sample, 16 candidates x
2 samples, the band widened to [0, 1] (a smoke run of the wiring, no figure to read).
The last line::

    real_gain=<arm 1's held-out gain over control> direct=<arm 2's> trl=<arm 4's>
    se=<one standard error of arm 1's gain> valid=<arm 1's held-out test validity after>
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

from benchmarks.learning_report import heldout  # noqa: E402
from benchmarks.real_learning_report import (  # noqa: E402
    gain_se,
    in_band,
    last_line,
    run_figures,
    seeds_se,
    split_band,
    table,
    verdict,
)

CONFIG = REPO / "configs" / "smollm2-135m.yaml"
SHARED = REPO.parent / "shared" / "data"
CACHE = REPO / ".cache" / "real_learning"
TRL_PYTHON = REPO / ".venv-trl" / "bin" / "python"
ARMS = ("chain", "direct", "control", "trl")
BEGAN = time.perf_counter()


def say(text: str) -> None:
    """A progress line on stderr with the call's elapsed time."""
    print(f"[{time.perf_counter() - BEGAN:6.0f} s] {text}", file=sys.stderr, flush=True)


# --- problems --------------------------------------------------------------------------------
def record(problem: Any) -> dict:
    """A problem as a seed-format record that loads back as the same problem (empty optional
    fields left out: the loader refuses an empty preamble)."""
    return {k: v for k, v in problem.to_row().items() if v not in ("", [], None)}


def candidates(n: int, n_humaneval: int, seed: int) -> tuple[list, str]:
    """``n`` screening candidates drawn with ``seed``, and where they came from."""
    from problems.loaders import load_problem_set, load_problems

    pool = list(load_problems("humaneval"))[n_humaneval:]  # after the fixed held-out subset
    if SHARED.is_dir():
        for name in ("function_problems.json", "example_problems.json",
                     "leetcode_formatted.json"):
            loaded = load_problem_set(SHARED / name).problems  # messy files: the good ones
            pool += [p for p in loaded if name != "leetcode_formatted.json"
                     or p.difficulty == "easy"]
        where = f"{SHARED} (function, example, easy LeetCode) and HumanEval"
    else:
        where = "HumanEval only (no ../shared/data here)"
        say(f"note: {SHARED} is missing; candidates are HumanEval's after the held-out subset")
    demo = {p.id for p in load_problems("demo")}  # the warm start's: never a candidate
    unique = list({p.id: p for p in reversed(pool) if p.id not in demo}.values())[::-1]
    random.Random(seed).shuffle(unique)
    return unique[:n], where


def write_problems(path: Path, problems: list) -> Path:
    path.write_text(json.dumps([record(p) for p in problems]))
    return path


def files_hash(folder: Path) -> str:
    """A hash of every file under ``folder`` (the converted model), names and contents."""
    digest = hashlib.sha256()
    for f in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        digest.update(str(f.relative_to(folder)).encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


# --- the project's direct evaluation, in a subprocess ----------------------------------------
def direct_eval(spec: dict) -> dict:
    """``--direct-eval``: sample ``spec["samples"]`` direct solutions a problem from the base
    model with ``spec["adapter"]`` (None: fresh adapters, i.e. the base), on the config's
    sampler (vLLM or transformers), judged by the sandbox on each problem's own tests. Returns
    per problem ``[samples, passed]``, the tokens generated and the seconds.

    ``spec["mode"]``: ``"direct"`` (the screen) or ``"code-only"``: the held-out evaluation of
    a code-only run (``chain.stages=[5]``, no discriminator), its prompts and seeds, so TRL's
    adapter is judged on exactly the draws arm 2's held-out evaluation makes."""
    from flows import skip_bitsandbytes

    skip_bitsandbytes()
    from configs import load_config
    from models.engine.sampler import VllmSampler
    from pipeline.heldout import evaluation_config, hidden_problem
    from pipeline.solver import ChainSolver
    from problems.loaders import load_problems
    from serving.inference import InferenceEngine

    code_only = ["chain.stages=[5]", "chain.discriminator=false"]
    cfg = evaluation_config(load_config(str(CONFIG), spec["overrides"] + (
        code_only if spec["mode"] == "code-only" else [])))
    problems = [hidden_problem(p) for p in load_problems(spec["problems"])]
    engine = InferenceEngine.load(spec["adapter"], cfg, discriminator=None)
    sampler, started = engine.policies, time.perf_counter()
    if cfg.sampling.engine == "vllm":
        log = Path(tempfile.mkdtemp(prefix="real-learning-")) / "engine.log"
        sampler = VllmSampler(engine.policies, engine.cfg.model, engine.cfg.sampling,
                              engine.cfg.lora.r, log, threads=cfg.model.cpu_threads)
        sampler.start()
    try:
        solver = ChainSolver(sampler, engine.cfg)
        t0 = time.perf_counter()
        results = solver.generate(problems, spec["samples"], seed=spec["seed"],
                                  mode="chain" if spec["mode"] == "code-only" else "direct")
        generate_s = time.perf_counter() - t0
        solver.execute(results)
    finally:
        if sampler is not engine.policies:
            sampler.close()
    tokenizer = engine.policies.tokenizer_for("generator")
    tokens = sum(len(tokenizer(r.generated_code)["input_ids"]) for r in results)
    counts: dict[str, list[int]] = {}
    for r in results:
        c = counts.setdefault(r.problem.id, [0, 0])
        c[0] += 1
        c[1] += int(r.passed)
    return {"counts": counts, "tokens": tokens, "generate_s": generate_s,
            "seconds": time.perf_counter() - started}


def run_logged(cmd: list[str], log: Path, env: dict | None = None) -> tuple[int, float, float]:
    """Run ``cmd`` with its output in ``log``; (exit status, seconds, peak RSS in GiB of the
    largest process it waited on, itself or a child)."""
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.perf_counter() - start, usage.ru_maxrss / 2**20


def evaluate_direct(work: Path, name: str, adapter: str | None, problems: Path, samples: int,
                    seed: int, overrides: list[str], mode: str = "code-only"
                    ) -> tuple[dict, float, float]:
    """``direct_eval`` in the project's environment, in a process of its own."""
    spec = work / f"{name}.spec.json"
    spec.write_text(json.dumps({"adapter": adapter, "problems": str(problems), "samples":
                                samples, "seed": seed, "overrides": overrides, "mode": mode,
                                "out": str(work / f"{name}.json")}))
    code, seconds, rss = run_logged([sys.executable, __file__, "--direct-eval", str(spec)],
                                    work / f"{name}.log")
    if code:
        raise ArmFailed(f"{name}: exit {code}", work / f"{name}.log")
    return json.loads((work / f"{name}.json").read_text()), seconds, rss


class ArmFailed(RuntimeError):
    def __init__(self, message: str, log: Path) -> None:
        tail = log.read_text()[-3000:] if log.exists() else "(no log)"
        super().__init__(f"{message}; log {log}, its tail:\n{tail}")
        self.short = message


def pass_rate(counts: dict[str, list[int]]) -> tuple[float, int]:
    n = sum(c[0] for c in counts.values())
    return sum(c[1] for c in counts.values()) / max(n, 1), n


# --- the screen ------------------------------------------------------------------------------
def screen(work: Path, problems: list, args: argparse.Namespace) -> dict[str, float]:
    """Each candidate's sampled pass rate on the base model, cached (module docstring)."""
    from configs import load_config

    cfg = load_config(str(CONFIG), args.set)
    key = hashlib.sha256(json.dumps({
        "model": files_hash(Path(REPO / cfg.model.generator)), "ids": [p.id for p in problems],
        "problems": [record(p) for p in problems], "samples": args.screen_samples,
        "seed": args.screen_seed, "sampling": [cfg.sampling.temperature,
                                               cfg.sampling.stage_max_new_tokens.get(5),
                                               cfg.sampling.engine]},
        sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = CACHE / f"screen-{key}.json"
    if path.exists():
        say(f"screen: cached ({path})")
        return json.loads(path.read_text())["rates"]
    say(f"screen: {len(problems)} candidates x {args.screen_samples} samples on the base model")
    out, seconds, _ = evaluate_direct(work, "screen", None, write_problems(
        work / "candidates.json", problems), args.screen_samples, args.screen_seed, args.set,
        mode="direct")
    rates = {pid: c[1] / c[0] for pid, c in out["counts"].items()}
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"rates": rates, "seconds": seconds}))
    os.replace(tmp, path)
    say(f"screen: done in {seconds:.0f} s")
    return rates


# --- the arms --------------------------------------------------------------------------------
def arm_sets(arm: str, args: argparse.Namespace) -> list[str]:
    """The arm's ``--set`` overrides on top of the call's common ones.

    >>> ns = argparse.Namespace(steps=4)
    >>> arm_sets("control", ns)[-2:]
    ['ppo.learning_rate=0', 'ppo.discriminator_learning_rate=0']
    >>> arm_sets("direct", ns)[1]
    'chain.stages=[5]'
    """
    chain = ["schedule.n_discriminator_steps=1", f"schedule.n_generator_steps={args.steps}",
             "schedule.k_alternating=0"]
    if arm == "chain":
        return chain
    if arm == "control":
        return chain + ["ppo.learning_rate=0", "ppo.discriminator_learning_rate=0"]
    # Code only starts where TRL starts, from the base model: the warm start teaches the
    # chain's format, which a direct prompt does not ask for; so this arm and the peer differ
    # only in the trainer.
    return [f"schedule.n_generator_steps={args.steps}", "chain.stages=[5]",
            "chain.discriminator=false", "schedule.n_discriminator_steps=0",
            "schedule.k_alternating=0", "rewards.generator={baseline_pass_rate: 1.0}",
            "warm_start.enabled=false"]


def training_seconds(db: Path, experiment: str) -> float:
    """The seconds a ``flows.train`` run's steps took, their held-out evaluations and the
    engine's start left out (its ``time/*`` metrics in MLflow): what its samples cost."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    total = 0.0
    for key, sign in (("time/step_s", 1), ("time/heldout_s", -1),
                      ("time/engine_start_s", -1)):
        total += sign * sum(m.value for m in client.get_metric_history(run.info.run_id, key))
    return total


def flow_arm(work: Path, arm: str, seed: int, files: dict, args: argparse.Namespace,
             api_url: str) -> dict:
    run_id = f"s{seed}-{arm}"
    sets = [f"artifacts.root={work / 'runs'}", "tracking.register_models=false",
            f"tracking.tracking_uri=sqlite:///{work / (run_id + '.db')}",
            f"tracking.experiment=real-learning-{run_id}",
            f"problems.source={files['train']}", f"problems.limit={files['n_train']}",
            f"evaluation.source={files['heldout']}", f"evaluation.limit={files['n_heldout']}",
            f"evaluation.samples={args.eval_samples}", "evaluation.each_stage=false",
            f"sampling.seed={seed}", *args.set, *arm_sets(arm, args)]
    cmd = [sys.executable, "-m", "flows.train", "--config", str(CONFIG), "--run-id", run_id]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "PREFECT_HOME": str(work / f"prefect-{run_id}"),
           "PREFECT_API_URL": api_url, "PYTHONPATH": str(REPO), "MLFLOW_DISABLE_TELEMETRY": "true"}
    log = work / f"{run_id}.log"
    code, wall, rss = run_logged(cmd, log, env)
    if code:
        raise ArmFailed(f"{run_id}: flows.train exit {code}", log)
    entries = heldout(work / "runs", run_id)
    first, last = entries[0]["metrics"], entries[-1]["metrics"]
    figures = run_figures(work / "runs", run_id)
    other = wall - figures["generate_s"] - figures["update_s"]
    steps_s = training_seconds(work / (run_id + ".db"), f"real-learning-{run_id}")
    return {"before": first.get("pass_at_1"), "after": last.get("pass_at_1"),
            "n": int(last.get("samples", 0)), "valid": last.get("test_validity"),
            "tokens_s": figures["tokens"] / max(figures["generate_s"], 1e-9),
            "s_per_ktok": 1000 * steps_s / max(figures["tokens"], 1),
            "phases": {"generate": figures["generate_s"], "update": figures["update_s"],
                       "eval+start+other": other},
            "stages": figures["stages"], "rss_gib": rss, "wall_s": wall}


def trl_arm(work: Path, seed: int, files: dict, args: argparse.Namespace) -> dict:
    from configs import load_config
    from models.stages import direct_messages
    from problems.loaders import load_problems

    if not TRL_PYTHON.exists():
        raise ArmFailed("trl: no .venv-trl (make trl builds it)", work / "none")
    cfg = load_config(str(CONFIG), args.set)
    rows = [{"id": p.id, "prompt": direct_messages(p), "entry_point": p.entry_point,
             "preamble": p.preamble, "tests": list(p.baseline_tests)}
            for p in load_problems(files["train"])]
    (work / "trl-problems.json").write_text(json.dumps(rows))
    overrides = [*args.set, f"sampling.seed={seed}"]
    say(f"seed {seed}, trl: held-out before (the base, direct prompt)")
    before, before_s, rss0 = evaluate_direct(work, f"s{seed}-trl-before", None,
                                             files["heldout"], args.eval_samples, seed, overrides)
    out = work / f"s{seed}-trl-adapter"
    cmd = [str(TRL_PYTHON), str(REPO / "benchmarks" / "peers" / "trl_grpo.py"),
           "--model", str(REPO / cfg.model.generator),
           "--problems", str(work / "trl-problems.json"),
           "--out", str(out), "--steps", str(args.steps),
           "--prompts-per-step", str(cfg.schedule.problems_per_step),
           "--generations", str(cfg.sampling.samples_per_problem),
           "--max-completion", str(cfg.sampling.stage_max_new_tokens.get(5,
                                                                       cfg.sampling.max_new_tokens)),
           "--learning-rate", str(cfg.ppo.learning_rate), "--lora-r", str(cfg.lora.r),
           "--lora-alpha", str(cfg.lora.alpha), "--temperature", str(cfg.sampling.temperature),
           "--seed", str(seed), "--threads", str(cfg.model.cpu_threads or 2),
           "--sandbox-python", sys.executable, "--timeout", str(cfg.sandbox.timeout_s)]
    say(f"seed {seed}, trl: GRPO, {args.steps} steps")
    code, train_s, rss1 = run_logged(cmd, work / f"s{seed}-trl.log")
    if code:
        raise ArmFailed(f"s{seed}-trl: trl_grpo.py exit {code}", work / f"s{seed}-trl.log")
    summary = json.loads([line for line in (work / f"s{seed}-trl.log").read_text().splitlines()
                          if line.startswith("{")][-1])  # its last line; warnings may follow
    say(f"seed {seed}, trl: held-out after (its adapter) ; rewards {summary.get('rewards')}")
    after, after_s, rss2 = evaluate_direct(work, f"s{seed}-trl-after", str(out),
                                           files["heldout"], args.eval_samples, seed, overrides)
    (p0, n), (p1, _) = pass_rate(before["counts"]), pass_rate(after["counts"])
    return {"before": p0, "after": p1, "n": n, "valid": None,
            "tokens_s": (before["tokens"] + after["tokens"])
            / max(before["generate_s"] + after["generate_s"], 1e-9),
            "s_per_ktok": 1000 * summary["seconds"] / max(summary.get("completion_tokens", 0), 1),
            "phases": {"eval_before": before_s, "train": train_s, "eval_after": after_s},
            "stages": {}, "rss_gib": max(rss0, rss1, rss2),
            "wall_s": before_s + train_s + after_s, "trl": summary}


# --- the call --------------------------------------------------------------------------------
def sizes(args: argparse.Namespace) -> None:
    if args.quick:  # a smoke run of the wiring: every arm starts, steps once and reports
        args.candidates, args.screen_samples, args.train, args.heldout = 16, 2, 2, 2
        args.humaneval, args.eval_samples, args.steps = 1, 1, 1
        args.band = [0.0, 1.0]  # every candidate: so few may fall in the band that none does


def problem_files(work: Path, args: argparse.Namespace) -> dict:
    from problems.loaders import load_problems

    pool, where = candidates(args.candidates, args.humaneval, args.screen_seed)
    rates = screen(work, pool, args)
    band = in_band(rates, *args.band)
    say(f"screen: {len(band)} of {len(rates)} candidates ({where}) in the band {args.band}")
    train_ids, held_ids = split_band(band, args.train, args.heldout, args.screen_seed)
    by_id = {p.id: p for p in pool}
    humaneval = list(load_problems("humaneval"))[:args.humaneval]
    assert not set(train_ids) & {p.id for p in humaneval} and not set(train_ids) & set(held_ids)
    held = [by_id[i] for i in held_ids] + humaneval
    say(f"problems: train {train_ids}; held-out {held_ids} + HumanEval "
        f"{[p.id for p in humaneval]}")
    return {"train": write_problems(work / "train.json", [by_id[i] for i in train_ids]),
            "heldout": write_problems(work / "heldout.json", held),
            "n_train": len(train_ids), "n_heldout": len(held), "rates": rates}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="sampling seeds; every arm of a seed shares it")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--candidates", type=int, default=128, help="problems screened")
    parser.add_argument("--screen-samples", type=int, default=4)
    parser.add_argument("--screen-seed", type=int, default=0)
    parser.add_argument("--band", type=float, nargs=2, default=[0.1, 0.9], metavar=("LO", "HI"))
    parser.add_argument("--train", type=int, default=8, help="training problems (band)")
    parser.add_argument("--heldout", type=int, default=8, help="held-out problems (band)")
    parser.add_argument("--humaneval", type=int, default=4, help="fixed HumanEval held-out")
    parser.add_argument("--eval-samples", type=int, default=2, help="samples per held-out one")
    parser.add_argument("--steps", type=int, default=8, help="generator steps per arm")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every arm (as flows.train's --set)")
    parser.add_argument("--keep", type=Path, help="keep every run and log under DIR (new)")
    parser.add_argument("--direct-eval", help=argparse.SUPPRESS)  # the subprocess's job
    args = parser.parse_args(argv)
    if args.direct_eval:
        spec = json.loads(Path(args.direct_eval).read_text())
        Path(spec["out"]).write_text(json.dumps(direct_eval(spec)))
        return 0
    sizes(args)
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep {args.keep}: already exists (runs are never written over)")
    from benchmarks.learning import prefect_server  # deferred: Prefect

    work = (args.keep or Path(tempfile.mkdtemp(prefix="real-learning-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    say(f"working in {work}")
    files = problem_files(work, args)
    rows, failed = [], []
    with prefect_server(work / "prefect") as api_url:
        for seed in args.seeds:
            for arm in args.arms:
                say(f"seed {seed}, {arm}: started")
                try:
                    row = (trl_arm(work, seed, files, args) if arm == "trl"
                           else flow_arm(work, arm, seed, files, args, api_url))
                except ArmFailed as exc:
                    print(str(exc), file=sys.stderr)
                    failed.append(exc.short)
                    row = {"error": exc.short}
                rows.append({"arm": arm, "seed": seed, **row})
                say(f"seed {seed}, {arm}: {'FAILED' if 'error' in row else 'done'}")
    figures = report(rows, args.seeds)
    print(f"\nwork folder {work}; {files['n_train']} training, {files['n_heldout']} held-out "
          f"problems x {args.eval_samples} samples; {args.steps} steps per arm; wall "
          f"{time.perf_counter() - BEGAN:.0f} s")
    print(table(rows))
    for arm, key in (("chain", "real_gain"), ("direct", "direct"), ("trl", "trl")):
        print(verdict(arm, figures[key], figures.get(f"se_{arm}")))
    if failed:
        print("failed arms: " + "; ".join(failed))
    print(last_line(figures))
    return 1 if failed else 0


def report(rows: list[dict], seeds: list[int]) -> dict[str, float | None]:
    """Per arm the mean over seeds of the gain over the control and its SE (module
    docstring), written into ``rows`` too; the last line's figures."""
    by = {(r["arm"], r["seed"]): r for r in rows}
    out: dict[str, float | None] = {}
    for arm, key in (("chain", "real_gain"), ("direct", "direct"), ("trl", "trl")):
        gains, ses = [], []
        for seed in seeds:
            r, ctrl = by.get((arm, seed), {}), by.get(("control", seed), {})
            if None in (r.get("before"), r.get("after"), ctrl.get("before"), ctrl.get("after")):
                continue
            r["over_control"] = (r["after"] - r["before"]) - (ctrl["after"] - ctrl["before"])
            r["se"] = gain_se(r["before"], r["after"], r["n"])
            gains.append(r["over_control"])
            ses.append(r["se"])
        out[key] = sum(gains) / len(gains) if gains else None
        out[f"se_{arm}"] = seeds_se(ses) if ses else None
    out["se"] = out["se_chain"]
    valid = [r["valid"] for r in rows if r["arm"] == "chain" and r.get("valid") is not None]
    out["valid"] = sum(valid) / len(valid) if valid else None
    return out


if __name__ == "__main__":
    raise SystemExit(main())
