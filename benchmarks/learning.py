"""Learning that counts: held-out problems, both roles, and the adversarial effect measured.

    python benchmarks/learning.py [--seed 0] [--lr 1e-4] [--disc-lr 3e-4] [--gen-steps 8]

Runs the real training flow (``python -m flows.train``: real Prefect flow, real sandbox, real
PPO) on the tiny model and the procedural ``piecewise`` family (``problems/family.py``), three
times on the same warm-started adapters and the same sampling seeds:

* ``adversarial``: both roles trained, the generator's reward is its pass rate over every
  valid test (the problem's own and the discriminator's);
* ``control``: the same run at learning rate 0 for both roles (nothing changes; same samples
  drawn);
* ``baseline_only`` (ablation): trained like ``adversarial``, but the generator's reward
  counts only the problem's own tests (``rewards.generator={baseline_pass_rate: 1.0}``).

The warm start is fitted once on the family's ``warmstart`` split (imperfect on purpose: the
guard is missing from 30% of its code targets, its tests are mostly main-path), PPO uses the
``train`` split, and each run evaluates on the ``heldout`` split (never trained on; each
problem judged on its hidden suite, main and edge path) before its first step and after its
training stage (``pipeline/heldout.py``). Training is at chain stage 5 only, in the N + N + K
pattern (discriminator steps, generator steps, alternating steps): the code and the final
tests are where the edge path is written or tested, and one stage keeps the run within
minutes on 2 cores.

It prints each arm's held-out table and, last, one line:
``heldout_gain=<adversarial pass@1 after - before> control_gain=<control's>
disc_gain=<adversarial mutants killed after - before> disc_control_gain=<control's>
ablation_delta=<adversarial after - baseline_only after>``. Goals (issue #15): heldout_gain
>= 0.15 and >= control_gain + 0.10; disc_gain >= disc_control_gain + 0.10, at the median of 3
seeds; <= 15 min per seed on 2 cores.

Measured on 2026-11-24, 2 cores, 48 held-out problems x 2 samples, stage 5, 4 + 8 + 4 steps of
8 problems x 4 samples, warm start 400 steps on 200 warm-start problems. Three settings, three
seeds each (pass@1 on hidden suites; "mutants" = share of reference mutants the
discriminator's valid tests kill; "wrong" = share of the untrained generator's wrong held-out
solutions they reject; a = adversarial, c = lr-0 control, b = baseline-only ablation):

    defaults: generator lr 1e-4, discriminator lr 3e-4 (``--lr 1e-4 --disc-lr 3e-4``)
    seed  pass@1 before  a      c      b     | mutants before  a      c     | wrong before  a
    0     0.188          0.333  0.188  0.292 | 0.517           0.517  0.517 | 0.077         0.077
    1     0.625          0.646  0.625  0.604 | 0.545           0.622  0.545 | 0.087         0.087
    2     0.000          0.208  0.000  0.188 | 0.622           0.677  0.622 | 0.667         0.833
    heldout_gain +0.146 / +0.021 / +0.208 (median +0.146), control_gain 0 at every seed;
    disc_gain +0.000 / +0.076 / +0.056 (median +0.056), disc_control_gain 0;
    ablation_delta +0.042 / +0.042 / +0.021 (median +0.042); 284-307 s per seed.

    both roles lr 1e-4 (``--lr 1e-4``)
    heldout_gain +0.146 / +0.042 / +0.208 (median +0.146); control 0;
    disc_gain +0.000 / +0.007 / +0.045 (median +0.007); ablation_delta +0.042 / +0.062 / +0.021;
    310-381 s per seed.

    both roles lr 3e-4 (the previous default; an earlier warm start, so the "before" differs)
    heldout_gain +0.073 / -0.052 / -0.177 (median -0.052; seed 2 collapsed to no passing code);
    disc_gain -0.057 / +0.111 / +0.099 (median +0.099); ablation_delta -0.042 / -0.062 / 0.000;
    463-509 s per seed.

Goals (issue #15), at the defaults: heldout_gain median +0.146 against >= 0.15, **missed by
0.004** (and 0.146 above the control, which meets its >= 0.10); disc_gain median +0.056 over a
control of 0 against >= 0.10, **missed**; the adversarial arm beat the baseline-only ablation
at every seed of both lr-1e-4 settings (+0.021 to +0.062), all within 15 min per seed.
What was tried: three learning-rate settings, including separate ones per role. Not tried: more
samples per group, longer schedules, other chain stages. The discriminator's tests barely
change what they catch: its warm start writes mostly main-path tests, and 16 steps of PPO
rarely turn them into edge tests (``wrong`` moved only at seed 2). The warm start decides most
of the starting point (pass@1 0.00 to 0.63 across seeds), so comparisons are only meaningful
within a seed, which is how the arms are built.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from models.tiny import build_tiny_model  # noqa: E402

ARMS = {"adversarial": [],
        "control": ["ppo.learning_rate=0", "ppo.discriminator_learning_rate=0"],
        "baseline_only": ["rewards.generator={pass_rate: 0.0, baseline_pass_rate: 1.0}"]}


def flow_command(tmp: Path, run_id: str, args: argparse.Namespace, model_dir: Path,
                 extra: list[str]) -> tuple[list[str], dict[str, str]]:
    sets = [f"model.generator={model_dir}", f"artifacts.root={tmp / 'runs'}",
            f"tracking.tracking_uri=sqlite:///{tmp / (run_id + '.db')}",
            "tracking.register_models=false", f"tracking.experiment=learning-{run_id}",
            "schedule.stages=[5]", f"schedule.n_discriminator_steps={args.disc_steps}",
            f"schedule.n_generator_steps={args.gen_steps}",
            f"schedule.k_alternating={args.alt_steps}",
            f"schedule.problems_per_step={args.problems}",
            f"sampling.samples_per_problem={args.samples}", f"ppo.learning_rate={args.lr}",
            f"ppo.discriminator_learning_rate={args.disc_lr}",
            f"sampling.seed={args.seed}", f"evaluation.limit={args.heldout}",
            f"evaluation.samples={args.eval_samples}", *extra]
    cmd = [sys.executable, "-m", "flows.train", "--config", str(REPO / "configs/tiny.yaml"),
           "--run-id", run_id]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "PREFECT_HOME": str(tmp / f"prefect-{run_id}"),
           "PYTHONPATH": str(REPO), "MLFLOW_DISABLE_TELEMETRY": "true"}
    return cmd, env


def start(tmp: Path, run_id: str, args: argparse.Namespace, model_dir: Path,
          extra: list[str]) -> subprocess.Popen:
    cmd, env = flow_command(tmp, run_id, args, model_dir, extra)
    log = open(tmp / f"{run_id}.log", "w")
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait(tmp: Path, procs: dict[str, subprocess.Popen]) -> None:
    for run_id, proc in procs.items():
        if proc.wait() != 0:
            print((tmp / f"{run_id}.log").read_text()[-4000:])
            raise SystemExit(f"{run_id} run failed (exit {proc.returncode})")


def heldout(root: Path, run_id: str) -> list[dict]:
    path = root / f"run_id={run_id}" / "_run" / "heldout.json"
    return json.loads(path.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (every arm)")
    parser.add_argument("--lr", type=float, default=0.0001,
                        help="the generator's PPO learning rate (trained arms)")
    parser.add_argument("--disc-lr", type=float, default=0.0003,
                        help="the discriminator's PPO learning rate (trained arms)")
    parser.add_argument("--disc-steps", type=int, default=4, help="N discriminator steps")
    parser.add_argument("--gen-steps", type=int, default=8, help="N generator steps")
    parser.add_argument("--alt-steps", type=int, default=4, help="K alternating steps")
    parser.add_argument("--problems", type=int, default=8, help="train problems per step")
    parser.add_argument("--samples", type=int, default=4, help="samples per problem and step")
    parser.add_argument("--heldout", type=int, default=48, help="held-out problems evaluated")
    parser.add_argument("--eval-samples", type=int, default=2, help="samples per held-out one")
    args = parser.parse_args()

    # deferred: --help and usage errors answer before torch loads (pipeline.heldout imports it)
    from pipeline.heldout import heldout_table

    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="learning-") as name:
        tmp = Path(name)
        model_dir = build_tiny_model(tmp / "tiny")
        # The warm start once (a schedule of no steps), so the three arms reuse its cache
        # entry instead of fitting the same adapters three times in parallel.
        wait(tmp, {"warmup": start(tmp, "warmup", args, model_dir, [
            "schedule.n_discriminator_steps=0", "schedule.n_generator_steps=0",
            "schedule.k_alternating=0", "evaluation.source=null"])})
        warm_s = time.perf_counter() - began
        procs = {arm: start(tmp, arm, args, model_dir, extra) for arm, extra in ARMS.items()}
        wait(tmp, procs)
        results = {arm: heldout(tmp / "runs", arm) for arm in ARMS}
    elapsed = time.perf_counter() - began

    source = "family:piecewise:heldout"
    for arm, entries in results.items():
        print(f"\n== {arm}")
        print(heldout_table(entries, source))
    delta = {arm: {k: e[-1]["metrics"].get(k, 0.0) - e[0]["metrics"].get(k, 0.0)
                   for k in ("pass_at_1", "mutation_kill_rate", "test_validity",
                             "wrong_caught")}
             for arm, e in results.items()}
    after = {arm: e[-1]["metrics"].get("pass_at_1", 0.0) for arm, e in results.items()}
    print(f"\nwall time {elapsed:.0f} s (warm start {warm_s:.0f} s, then the 3 arms in "
          f"parallel); seed {args.seed}, lr {args.lr} (discriminator {args.disc_lr}), "
          f"stage 5: {args.disc_steps} + {args.gen_steps} + {args.alt_steps} steps of "
          f"{args.problems} problems x {args.samples} samples; held-out {args.heldout} "
          f"problems x {args.eval_samples}")
    print("discriminator on the untrained (= control) generator's wrong held-out solutions, "
          "share its valid tests reject, after - before: "
          + ", ".join(f"{arm} {d['wrong_caught']:+.3f}" for arm, d in delta.items())
          + "; test validity: "
          + ", ".join(f"{arm} {d['test_validity']:+.3f}" for arm, d in delta.items()))
    print(f"heldout_gain={delta['adversarial']['pass_at_1']:.3f} "
          f"control_gain={delta['control']['pass_at_1']:.3f} "
          f"disc_gain={delta['adversarial']['mutation_kill_rate']:.3f} "
          f"disc_control_gain={delta['control']['mutation_kill_rate']:.3f} "
          f"ablation_delta={after['adversarial'] - after['baseline_only']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
