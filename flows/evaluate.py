"""The evaluation flow: pass@k, the direct-code baseline, and test-side metrics for one model.

    python -m flows.evaluate --config configs/tiny.yaml --model tiny-generator@champion \
        --problems humaneval --k 1 --k 10 --samples 10 [--ids add ...] [--limit N] [--set k=v]

``--model`` is anything ``serving.inference.InferenceEngine.load`` takes: a registry alias
(``NAME@ALIAS``), ``models:/NAME/VERSION``, a ``runs:/`` or local checkpoint, an adapter folder,
a local model path or hub id (default: the config's base model, i.e. before training). The
metrics are defined in ``pipeline/evaluation.py``. Results go to the run store (table
``evaluations``, step 0 of run ``eval-<config>-<time>``), to an MLflow run in the config's
experiment (``eval/pass_at_1``, ``eval/direct_pass_at_1``, ``eval/test_validity``, ...; MLflow
does not allow ``@`` in metric names), to a Prefect table artifact, and a summary table is
printed.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m flows.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/tiny.yaml", help="YAML config file")
    parser.add_argument("--model", help="registry alias NAME@ALIAS, models:/NAME/VERSION, "
                        "checkpoint, adapter folder, model path or hub id")
    parser.add_argument("--discriminator", default="auto",
                        help="discriminator weights (default: the registry sibling, if any)")
    parser.add_argument("--problems", default="demo", help="demo, humaneval or a file")
    parser.add_argument("--ids", nargs="+", help="only these problem ids")
    parser.add_argument("--limit", type=int, help="at most this many problems")
    parser.add_argument("--k", type=int, action="append", help="pass@k (repeatable; default 1)")
    parser.add_argument("--samples", type=int, help="samples per problem (default: max k)")
    parser.add_argument("--no-direct", action="store_true", help="skip the direct baseline")
    parser.add_argument("--no-tests", action="store_true", help="skip discriminator tests")
    parser.add_argument("--run-id", help="evaluation id in the run store and MLflow")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config value (repeatable)")
    return parser


if __name__ == "__main__":  # --help, usage and config errors answer before Prefect and torch
    from flows import check_config_first, preload, stopping

    stopping.install()  # Ctrl-C / SIGTERM: one line, within seconds, from here on
    _args = build_parser().parse_args()
    check_config_first(_args.config, _args.overrides)

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.context import get_run_context

from artifacts.store import RunStore
from artifacts.tracking import Tracker
from configs import ConfigError, load_config
from deployments.server import ensure_prefect_api
from flows import preload, stopping
from pipeline.evaluation import EVAL_REPORT, chunk_size, evaluate_engine
from pipeline.heldout import hidden_problem
from pipeline.stagereport import format_report, report_from_metrics
from problems import ProblemLoadError, load_problems
from serving.inference import InferenceEngine
from tasks.progress import API_ONLY, flow_run_name, name_flow_run, quiet_console

# (metric, label) rows of the printed summary; pass@k rows are added per k.
_SHOWN = (
    ("code_ok_rate", "code parsed"), ("baseline_pass_rate", "baseline tests passed"),
    ("generation_s", "generation s/sample"), ("test_validity", "test validity"),
    ("mutation_kill_rate", "mutation kill rate"), ("distinct_test_rate", "distinct tests"),
    ("distinct_inputs", "distinct inputs/sample"), ("tests_per_sample", "tests/sample"),
    ("test_drop_rate", "unparsable tests"), ("failure_rate", "failure rate"),
    ("coherence", "reasoning coherence"), ("generator_reward", "generator reward"),
    ("discriminator_reward", "discriminator reward"),
)


def summary_rows(metrics: dict[str, float], ks: list[int]) -> list[dict[str, str]]:
    """The summary as table rows: metric, five-stage chain, direct baseline."""
    def fmt(key: str) -> str:
        return f"{metrics[key]:.3f}" if key in metrics else "-"

    names = [(f"pass_at_{k}", f"pass@{k}") for k in sorted(set(ks))] + list(_SHOWN)
    return [{"metric": label, "chain": fmt(f"eval/{key}"), "direct": fmt(f"eval/direct_{key}")}
            for key, label in names
            if f"eval/{key}" in metrics or f"eval/direct_{key}" in metrics]


def stage_lines(metrics: dict[str, float]) -> str:
    """The chain stages' report of the evaluated chains, when tests were written."""
    report = report_from_metrics(metrics, EVAL_REPORT)
    if not report:
        return ""
    return format_report(report, "what each chain stage's tests did (bugs caught: valid tests "
                                 "the final code fails)") + "\n\n"


def format_table(rows: list[dict[str, str]]) -> str:
    cols = list(rows[0]) if rows else ["metric", "chain", "direct"]
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(width[c]) for c in cols),
             "  ".join("-" * width[c] for c in cols)]
    lines += ["  ".join(r[c].ljust(width[c]) for c in cols) for r in rows]
    return "\n".join(lines)


@task(name="evaluate-model", cache_policy=NO_CACHE)
def evaluate_model(cfg: Any, model: str | None, problems: list, samples: int, ks: list[int],
                   direct: bool, tests: bool, discriminator: str | None
                   ) -> tuple[list[dict[str, Any]], dict[str, float], str]:
    """Load the model, generate, execute and score (``pipeline.evaluation.evaluate_engine``)."""
    engine = InferenceEngine.load(model, cfg, discriminator=discriminator)
    label = model or cfg.model.generator
    problems = [hidden_problem(p) for p in problems]  # a family problem: its hidden suite
    # in chunks of problems, so the console counts problems with an ETA
    chunk = chunk_size(len(problems), samples, engine.cfg.sampling.batch_size)
    rows, metrics = evaluate_engine(engine, problems, samples=samples, ks=ks, direct=direct,
                                    tests=tests, model=label, chunk=chunk, progress="evaluate")
    return rows, metrics, engine.describe()


@task(name="record-evaluation", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2)
def record_evaluation(cfg: Any, run_id: str, rows: list[dict[str, Any]],
                      metrics: dict[str, float], params: dict[str, str]) -> dict[str, Any]:
    """Rows to the run store, metrics to MLflow, the summary to a Prefect table artifact."""
    store = RunStore(cfg.artifacts.root, run_id)
    if not store.is_complete(0):
        store.write("evaluations", 0, "all", rows)
        store.complete_step(0)
    tracker = Tracker.from_config(cfg.tracking)
    try:
        flow_run_id = str(get_run_context().flow_run.id)  # type: ignore[union-attr]
    except Exception:  # called outside a flow run
        flow_run_id = None
    mlflow_run = tracker.start_run(cfg, flow_run_id, run_name=run_id,
                                   tags={"adversarial.eval_id": run_id,
                                         **{f"eval.{k}": v for k, v in params.items()}})
    tracker.log_metrics(mlflow_run, metrics, step=0)
    tracker.log_dict(mlflow_run, {"params": params, "metrics": metrics},
                     "evaluation/summary.json")
    tracker.end_run(mlflow_run)
    create_table_artifact(summary_rows(metrics, [int(k) for k in params["k"].split(",")]),
                          key=re.sub(r"[^a-z0-9-]+", "-", f"{run_id}-summary".lower()),
                          description=f"Evaluation of {params['model']} on {params['problems']}")
    return {"run_store": store.run_dir, "mlflow_run_id": mlflow_run,
            "mlflow_tracking_uri": tracker.tracking_uri}


@flow(name="evaluate", log_prints=True, flow_run_name=flow_run_name)
def evaluate(config: str = "configs/tiny.yaml", overrides: list[str] | None = None,
             model: str | None = None, problems: str = "demo", ids: list[str] | None = None,
             limit: int | None = None, k: list[int] | None = None, samples: int | None = None,
             direct: bool = True, tests: bool = True, discriminator: str | None = "auto",
             run_id: str | None = None) -> dict[str, Any]:
    """Evaluate ``model`` on ``problems``: pass@k (chain and direct), test-side metrics."""
    stopping.reclaim()  # SIGTERM: our one line, not Prefect's crash report
    quiet_console()
    cfg = load_config(config, overrides or [])
    ks = sorted(set(k or [1]))
    samples = samples or max(ks)
    chosen = load_problems(problems, ids=ids, limit=limit)
    run_id = run_id or f"eval-{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    name_flow_run(run_id, ["evaluation", f"config:{cfg.name}"])
    rows, metrics, described = evaluate_model(cfg, model, chosen, samples, ks, direct, tests,
                                              discriminator)
    params = {"model": model or cfg.model.generator, "problems": problems,
              "n_problems": str(len(chosen)), "samples": str(samples),
              "k": ",".join(map(str, ks)), "weights": described}
    where = record_evaluation(cfg, run_id, rows, metrics, params)
    summary = (f"Evaluation {run_id}: {params['model']} on {problems} ({len(chosen)} problems "
               f"x {samples} samples)\n{described}\n\n"
               f"{format_table(summary_rows(metrics, ks))}\n\n{stage_lines(metrics)}"
               f"  run store : {where['run_store']}/table=evaluations\n"
               f"  mlflow    : {where['mlflow_tracking_uri']} (run {where['mlflow_run_id']})")
    # the flow run's logs only: main() prints it to the console once, on stdout
    get_run_logger().info(summary, extra=API_ONLY)
    return {"run_id": run_id, "metrics": metrics, "summary": summary, **where}


def kept(root: str, run_id: str) -> str:
    """What a stopped evaluation leaves: its rows once they are recorded, else nothing."""
    store = RunStore(root, run_id)
    if store.is_complete(0):
        return f"evaluation {run_id} was recorded in {store.run_dir}/table=evaluations"
    return (f"evaluation {run_id} was not recorded (its rows are written once every problem "
            "is done), so nothing was kept")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # fail fast, before Prefect starts: config, this machine's preconditions, problems
        from flows.preflight import check as check_preconditions

        cfg = load_config(args.config, args.overrides)
        check_preconditions(cfg, model=args.model, engine=False)  # inference samples on policies
        load_problems(args.problems, ids=args.ids, limit=args.limit)
        ks = args.k or [1]
        if args.samples is not None and max(ks) > args.samples:
            raise ValueError(f"--k {max(ks)} needs --samples >= {max(ks)}")
    except (ConfigError, ProblemLoadError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run_id = args.run_id or f"eval-{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    stopping.keeping(lambda: kept(cfg.artifacts.root, run_id))
    try:
        # a temporary Prefect server that dies with this run; what the evaluation loads
        # anyway is imported while it starts
        ensure_prefect_api(meanwhile=lambda: preload(cfg.model.load_in_4bit))
        out = evaluate(config=args.config, overrides=args.overrides, model=args.model,
                       problems=args.problems, ids=args.ids, limit=args.limit, k=ks,
                       samples=args.samples, direct=not args.no_direct,
                       tests=not args.no_tests, discriminator=args.discriminator or None,
                       run_id=run_id)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (flows.stopping): its one line, its code
        return stopping.leave()
    print(f"\n{out['summary']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
