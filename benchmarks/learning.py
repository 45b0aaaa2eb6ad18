"""Learning that counts: held-out problems, both roles, every chain stage, three seeds.

    python benchmarks/learning.py [--seeds 0 1 2] [--family guards] [--parallel 3]
                                  [--control shuffled|frozen] [--oracle]

Runs the real training flow (``python -m flows.train``: real Prefect flow, real sandbox, real
PPO) on the tiny model and a procedural family (``guards`` by default: three independent ways
to be wrong, each exposed by one chain stage's focus, ``problems/guards.py``), per seed three
times on the same warm-started adapters and the same sampling seeds:

* ``adversarial``: both roles trained; the generator's reward is ``--generator-reward`` over
  every valid test (the problem's own and the discriminator's): ``all_pass`` by default (1 only
  when the code passes them all), or ``pass_rate`` (the share it passes); the discriminator's
  the default ``progressive`` reward (what stage k's tests add to stages < k);
* ``control``: trained exactly like ``adversarial``, but each step's rewards, both roles', are
  permuted among the samples of each problem (``rewards.shuffle_seed``, the arm's seed): PPO sees
  the same reward values, the same spread and the same skipped groups, and nothing of which
  sample earned which. It differs from ``adversarial`` only in whether the reward speaks of
  the sample, so its gains are what these updates do without signal (drift, sharpening).
  ``--control frozen`` is the earlier control, learning rate 0 for both roles: nothing
  changes, so its gains are 0 by construction and test only that evaluation repeats;
* ``baseline_only`` (ablation): trained like ``adversarial``, but the generator's reward counts
  only the problem's own tests (its baseline-only twin: ``baseline_all_pass`` or
  ``baseline_pass_rate``);
* ``oracle`` (a diagnostic, ``--oracle`` only): ``baseline_only`` with each training problem's
  own tests replaced by its hidden suite (every path: ``oracle_source``), so the generator is
  paid for code that is right, as if the discriminator's tests caught every bug. It differs
  from ``baseline_only`` only in how strong the tests are, and bounds what better tests could
  do for the generator in this budget. Printed per seed and as ``oracle_gain`` before the last
  line, which keeps the issue's figures.

First the tiny base's own weights are fitted, once per call, on the ``warmstart`` split's ideal
chains (``--base-steps``, ``pipeline/basefit.py``: a base that reads its prompt, as a pretrained
one does; adapters on random weights did not learn to read the guards' kinds in this budget).
The adapters' warm start is fitted on top of it once per seed, on ``--warm-limit`` problems of
the same split (imperfect on purpose), PPO uses the ``train`` split, and each run is evaluated
on the ``heldout`` split (never trained on, judged on hidden suites) before its first step and
after its last training stage (``evaluation.each_stage=false``; ``pipeline/heldout.py``).
Training covers all five chain stages in order, each in the N + N + K pattern. Every seed's warm
start, then every arm, run as separate processes, ``--parallel`` at a time (one torch thread
each), on one temporary Prefect server the benchmark starts for them, in the call's own folder
(its ``.cache`` too: the warm starts it saves are keyed on its model's path and serve no other
call). The "before" evaluation is made once per seed, by the warm-start run, and each arm's run
store starts with it (``share_before``): every arm starts from the same adapters with the same
seeds, and when each arm evaluated its own, the three rows were equal to the last digit.

Per seed, first a diagnostic: of the adversarial arm's training samples whose code passed every
baseline test, how many are wrong (their code fails the problem's hidden suite, run by this
benchmark after training; no run sees it) and how many a valid discriminator test rejected
(``generator/rejected_beyond_baseline``), and how many of those are among the wrong ones.
With group-relative advantages these rejections are the only way the discriminator's tests can
change what the generator learns, and the wrong ones are the room they have. Then per seed,
and (last line) as medians over the seeds::

    heldout_gain=      adversarial pass@1 after - before
    control_gain=      control's
    disc_gain=         adversarial: share of the untrained generator's wrong held-out
                       solutions (fixed per seed) that the discriminator's valid tests reject,
                       after - before
    disc_control_gain= control's
    ablation_delta=    adversarial pass@1 after - baseline_only's
    stage_new_tests=   adversarial, after: of the valid tests stages 2-5 wrote, share new
    late_catch=        adversarial, after: of the caught wrong solutions, share first caught
                       at stage >= 2

Goals (issue #23): heldout_gain >= 0.15 and >= control_gain + 0.10; disc_gain >=
disc_control_gain + 0.10; ablation_delta >= 0.05; stage_new_tests >= 0.25; late_catch >= 0.2,
at the median of 3 seeds, in at most 25 minutes on 2 cores.

Recorded results: docs/benchmarks.md, section benchmarks/learning.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from configs.environment import apply as _environment  # noqa: E402

_environment()  # the Makefile's environment, as every entry point sets it

from benchmarks.learning_report import (  # noqa: E402
    ARMS,
    ORACLE,
    beyond_baseline,
    figures,
    heldout,
    line,
    medians,
    oracle_lines,
    table,
)
from configs.names import STAGES  # noqa: E402
from models.tiny import build_tiny_model  # noqa: E402

CONFIG = REPO / "configs" / "tiny.yaml"
"""Every run's config (the call's ``--set`` overrides and each run's own on top)."""

BASELINE_ONLY = {"pass_rate": "baseline_pass_rate", "all_pass": "baseline_all_pass"}
"""The generator reward of each ``--generator-reward`` and its baseline-only twin (the ablation
arm's: the same function over the problem's own tests alone)."""


CONTROLS = ("shuffled", "frozen")
"""What the control arm changes: ``shuffled`` (the default) trains it like the adversarial arm
on rewards permuted within each problem's samples (``rewards.shuffle_seed``: the same values,
no word on which sample earned them); ``frozen`` trains nothing (learning rate 0: its figures
after equal its figures before, by construction)."""


def arm_sets(arm: str, reward: str, control: str = "shuffled", seed: int = 0) -> list[str]:
    """The arm's ``--set`` overrides: the adversarial and control arms pay the generator by
    ``reward``, the ablation by its baseline-only twin; the control's rewards are permuted
    with ``seed`` (``shuffled``) or it learns nothing (``frozen``).

    >>> arm_sets("control", "all_pass", "shuffled", 2)
    ['rewards.generator={all_pass: 1.0}', 'rewards.shuffle_seed=2']
    >>> arm_sets("baseline_only", "all_pass")
    ['rewards.generator={baseline_all_pass: 1.0}']
    >>> arm_sets("oracle", "pass_rate")  # and its problems' own tests are their hidden suites
    ['rewards.generator={baseline_pass_rate: 1.0}']
    """
    paid_by = BASELINE_ONLY[reward] if arm in ("baseline_only", ORACLE) else reward
    sets = [f"rewards.generator={{{paid_by}: 1.0}}"]
    if arm == "control" and control == "shuffled":
        sets += [f"rewards.shuffle_seed={seed}"]
    elif arm == "control":
        sets += ["ppo.learning_rate=0", "ppo.discriminator_learning_rate=0"]
    return sets


@dataclass
class Job:
    """One ``flows.train`` run: a seed's warm start (``arm`` None) or one arm of a seed."""

    seed: int
    arm: str | None
    proc: subprocess.Popen | None = None
    began: float = 0.0
    seconds: float = 0.0
    after: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return f"s{self.seed}-{self.arm or 'warmup'}"


def flow_command(tmp: Path, job: Job, args: argparse.Namespace, model_dir: Path,
                 api_url: str) -> tuple[list[str], dict[str, str]]:
    fam = f"family:{args.family}"
    # model.tiny=false: every run loads the call's own model folder, and a missing one is an
    # error, not a new random tiny model built in its place (tiny.yaml's default would build
    # one silently where the fitted base was)
    sets = [f"model.generator={model_dir}", "model.tiny=false", f"artifacts.root={tmp / 'runs'}",
            f"tracking.tracking_uri=sqlite:///{tmp / (job.run_id + '.db')}",
            "tracking.register_models=false", f"tracking.experiment=learning-{job.run_id}",
            f"problems.source={fam}:train", f"warm_start.source={fam}:warmstart",
            f"evaluation.source={fam}:heldout", "evaluation.each_stage=false",
            "schedule.stages=[" + ",".join(map(str, args.stages)) + "]",
            f"schedule.n_discriminator_steps={args.disc_steps}",
            f"schedule.n_generator_steps={args.gen_steps}",
            f"schedule.k_alternating={args.alt_steps}",
            f"schedule.problems_per_step={args.problems}",
            f"sampling.samples_per_problem={args.samples}", f"ppo.learning_rate={args.lr}",
            f"ppo.discriminator_learning_rate={args.disc_lr}", f"sampling.seed={job.seed}",
            f"evaluation.limit={args.heldout}", f"evaluation.samples={args.eval_samples}",
            f"sampling.max_new_tokens={args.max_new_tokens}",
            f"warm_start.limit={args.warm_limit}"]
    sets += args.set  # the caller's; the arm's own below win (its reward, the control's lr 0)
    if job.arm is None:  # the warm start and the "before" evaluation alone (no steps)
        sets += ["schedule.n_discriminator_steps=0", "schedule.n_generator_steps=0",
                 "schedule.k_alternating=0"]
    else:
        sets += arm_sets(job.arm, args.generator_reward, args.control, job.seed)
    if job.arm == ORACLE:
        sets += [f"problems.source={oracle_source(tmp, args.family)}"]
    cmd = [sys.executable, "-m", "flows.train", "--config", str(CONFIG),
           "--run-id", job.run_id]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "PREFECT_HOME": str(tmp / f"prefect-{job.run_id}"),
           "PREFECT_API_URL": api_url, "PYTHONPATH": str(REPO),
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    return cmd, env


def oracle_source(tmp: Path, family: str) -> Path:
    """The family's ``train`` split as a problem file whose baseline tests are each problem's
    hidden suite (``problems.family.hidden_tests``: every path), for the ``oracle`` arm: the
    same problems, ids and references, only stronger tests. Written once per call."""
    path = tmp / f"oracle-{family}-train.json"
    if not path.exists():
        from problems.family import family_records, hidden_tests  # deferred as in main

        records = [{**r, "baseline_tests": hidden_tests(r["id"])}
                   for r in family_records(f"family:{family}:train")]
        path.write_text(json.dumps(records))
    return path


def run_all(tmp: Path, jobs: list[Job], args: argparse.Namespace, model_dir: Path,
            api_url: str) -> None:
    """Every job, at most ``args.parallel`` at a time, each arm after its seed's warm start,
    all on the Prefect API at ``api_url``."""
    pending, running, done = list(jobs), [], set()
    while pending or running:
        for job in list(running):
            if job.proc.poll() is not None:
                running.remove(job)
                job.seconds = time.perf_counter() - job.began
                if job.proc.returncode != 0:
                    print((tmp / f"{job.run_id}.log").read_text()[-4000:])
                    raise SystemExit(f"{job.run_id} failed (exit {job.proc.returncode})")
                done.add(job.run_id)
                print(f"  {job.run_id} done in {job.seconds:.0f} s", flush=True)
        for job in [j for j in pending if all(d in done for d in j.after)]:
            if len(running) >= args.parallel:
                break
            if job.arm is not None:
                share_before(tmp / "runs", job)
            cmd, env = flow_command(tmp, job, args, model_dir, api_url)
            log = open(tmp / f"{job.run_id}.log", "w")
            job.proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log,
                                        stderr=subprocess.STDOUT)
            job.began = time.perf_counter()
            pending.remove(job)
            running.append(job)
        time.sleep(0.5)


@contextlib.contextmanager
def prefect_server(home: Path) -> Iterator[str]:
    """One temporary Prefect server (``deployments.server``) for every run of the call, its
    API URL: each run would start its own otherwise, twelve times over (what one costs: see
    docs/benchmarks.md). It dies with this process."""
    os.environ["PREFECT_HOME"] = str(home)  # before Prefect reads its settings
    import flows  # noqa: F401  its environment defaults, as every run's: no analytics service
    from deployments.server import TemporaryServer, startup_timeout_s  # deferred: Prefect

    server = TemporaryServer()
    try:
        yield server.start(startup_timeout_s())
    finally:
        server.stop()


def share_before(root: Path, job: Job) -> None:
    """Start an arm's run store with its seed's "before" evaluation (the held-out row and the
    untrained generator's wrong solutions, ``tasks.heldout``), which the warm-start run made:
    every arm starts from those adapters with those seeds, so each would evaluate the same
    figures (they did, to the last digit, when each arm evaluated its own), and a run that
    has a "before" row does not evaluate it again."""
    source, target = (root / f"run_id={run_id}" / "_run"
                      for run_id in (f"s{job.seed}-warmup", job.run_id))
    target.mkdir(parents=True, exist_ok=True)
    from tasks.heldout import RECORD, WRONG  # deferred as in main

    for name in (RECORD, WRONG):
        shutil.copyfile(source / name, target / name)


def fitted_base(model_dir: Path, out: Path, args: argparse.Namespace) -> Path:
    """The base every run of the call loads: the tiny model fitted on the family's ideal
    warm-start chains (``pipeline.basefit``), once per call, before the warm starts."""
    from configs import load_config
    from pipeline.basefit import BaseFit, fit_base_with_progress

    runs = load_config(str(CONFIG), args.set)  # the prompts they render
    fit = BaseFit(source=f"family:{args.family}:warmstart", steps=args.base_steps,
                  max_context_tokens=runs.model.max_context_tokens)
    record = fit_base_with_progress(model_dir, out, fit)
    print(f"base fitted on {record['problems']} {fit.source} problems' ideal chains: loss "
          f"{record['first_loss']:.3f} -> {record['last_loss']:.4f} in {record['seconds']} s",
          flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="sampling seeds (every arm of a seed shares it)")
    parser.add_argument("--family", default="guards", choices=("guards", "piecewise"),
                        help="problem family (problems/family.py)")
    parser.add_argument("--stages", type=int, nargs="+", default=list(STAGES),
                        help="chain stages trained, in order")
    parser.add_argument("--lr", type=float, default=0.0001,
                        help="the generator's PPO learning rate (trained arms)")
    parser.add_argument("--disc-lr", type=float, default=0.0003,
                        help="the discriminator's PPO learning rate (trained arms)")
    parser.add_argument("--generator-reward", default="all_pass", choices=tuple(BASELINE_ONLY),
                        help="the generator's reward in the trained arms (rewards.functions); "
                             "the ablation uses its baseline-only twin")
    parser.add_argument("--control", default="shuffled", choices=CONTROLS,
                        help="the control arm: trained on rewards permuted within each "
                             "problem (shuffled) or not trained at all (frozen, lr 0)")
    parser.add_argument("--disc-steps", type=int, default=1, help="N discriminator steps")
    parser.add_argument("--gen-steps", type=int, default=1, help="N generator steps")
    parser.add_argument("--alt-steps", type=int, default=2, help="K alternating steps")
    parser.add_argument("--problems", type=int, default=8, help="train problems per step")
    parser.add_argument("--samples", type=int, default=4, help="samples per problem and step")
    parser.add_argument("--heldout", type=int, default=32, help="held-out problems evaluated")
    parser.add_argument("--eval-samples", type=int, default=2, help="samples per held-out one")
    parser.add_argument("--max-new-tokens", type=int, default=80,
                        help="tokens per stage output (a guards solution is ~64)")
    parser.add_argument("--base-steps", type=int, default=400,
                        help="fit the tiny base's own weights on the family's ideal warm-start "
                             "chains for this many steps first (pipeline/basefit.py: a base "
                             "that reads its prompt, as a pretrained one does); 0 keeps the "
                             "random base")
    parser.add_argument("--warm-limit", type=int, default=1600,
                        help="warm-start problems the adapters are fitted on (the split has "
                             "1639 guards problems; on 200 the adapters learned each "
                             "problem's drawn flaws by heart and applied them arbitrarily to "
                             "new ones)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every run (as flows.train's --set), e.g. "
                             "rewards.peer_tests=true; repeatable")
    parser.add_argument("--oracle", action="store_true",
                        help="also run the oracle arm (a diagnostic: the generator paid by the "
                             "training problems' hidden suites; module docstring)")
    parser.add_argument("--parallel", type=int, default=3,
                        help="runs at once (each uses one thread for torch)")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="write every run (stores, logs, MLflow databases) under DIR, a new "
                             "folder, and keep it (default: a temporary folder, removed)")
    args = parser.parse_args()
    if args.keep is not None and args.keep.exists():
        parser.error(f"--keep {args.keep}: already exists (runs are never written over)")

    # deferred: --help and usage errors answer before torch loads (pipeline.heldout imports it)
    from pipeline.heldout import heldout_table

    began = time.perf_counter()
    jobs = [Job(seed, None) for seed in args.seeds]
    arms = (*ARMS, ORACLE) if args.oracle else ARMS
    jobs += [Job(seed, arm, after=[f"s{seed}-warmup"]) for arm in arms for seed in args.seeds]
    with (contextlib.nullcontext(str(args.keep)) if args.keep
          else tempfile.TemporaryDirectory(prefix="learning-")) as name:
        tmp = Path(name).resolve()  # the runs work in it: every path they are given is absolute
        tmp.mkdir(parents=True, exist_ok=True)
        model_dir = build_tiny_model(tmp / "tiny")
        if args.base_steps:
            model_dir = fitted_base(model_dir, tmp / "tiny-fitted", args)
        print(f"{len(jobs)} runs ({len(args.seeds)} warm starts, then {len(arms)} arms per "
              f"seed), {args.parallel} at a time", flush=True)
        with prefect_server(tmp / "prefect") as api_url:
            run_all(tmp, jobs, args, model_dir, api_url)
        results = {seed: {arm: heldout(tmp / "runs", f"s{seed}-{arm}") for arm in arms}
                   for seed in args.seeds}
        beyond = {seed: beyond_baseline(tmp / "runs", f"s{seed}-adversarial", args.family)
                  for seed in args.seeds}
    elapsed = time.perf_counter() - began

    source = f"family:{args.family}:heldout"
    per_seed = {}
    for seed, arms in results.items():
        for arm, entries in arms.items():
            print(f"\n== seed {seed}, {arm}")
            print(heldout_table(entries, source))
        per_seed[seed] = figures(arms)
    print(f"\nwall time {elapsed:.0f} s for {len(args.seeds)} seeds; generator reward "
          f"{args.generator_reward}; control {args.control}; lr {args.lr} "
          f"(discriminator {args.disc_lr}); stages {args.stages}, each "
          f"{args.disc_steps} + {args.gen_steps} + {args.alt_steps} steps of {args.problems} "
          f"problems x {args.samples} samples; held-out {args.heldout} problems x "
          f"{args.eval_samples}; base fit {args.base_steps or 'none'} steps; adapters warm-"
          f"started on {args.warm_limit} problems; overrides {args.set or 'none'}; per run: "
          + ", ".join(f"{j.run_id} {j.seconds:.0f} s" for j in jobs))
    for seed, b in beyond.items():
        print(f"seed {seed}, adversarial: of the {b['passing']} training samples passing every "
              f"baseline test, {b['wrong']} fail the hidden suite; a valid discriminator test "
              f"rejected {b['rejected']} ({b['rejected_wrong']} of the wrong ones)")
    print(table(results))
    if args.oracle:
        print(oracle_lines(results))
    for seed, values in per_seed.items():
        print(f"seed {seed}: {line(values)}")
    print(f"median of {len(per_seed)} seeds: {line(medians(per_seed))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
