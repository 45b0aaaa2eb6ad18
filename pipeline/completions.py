"""A few samples of a step as a user wants to read them: the problem, each stage's text, the
code, the tests with their verdicts, the rewards (an MLflow table per step), and one full chain
as markdown (a Prefect artifact)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from configs.names import CODE_STAGE, STAGES
from models.parsing import parse_code

CELL_MAX = 2000  # characters per table cell; longer text is cut and says so
Row = Mapping[str, Any]


def _cut(text: str | None, limit: int = CELL_MAX) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + f"... [cut: {len(text)} chars]"


def _verdicts(tests: Iterable[Row], executions: Iterable[Row]) -> dict[tuple, list[str]]:
    """Per sample, one line per kept test: stage, first line, candidate and reference verdicts."""
    status = {(e["problem_id"], e["sample_idx"], e["test_id"], e["target_kind"]): e["status"]
              for e in executions if e["target_kind"] in ("candidate", "reference")}
    out: dict[tuple, list[str]] = {}
    for t in sorted(tests, key=lambda t: (t["stage"], t["test_idx"])):
        if t["parse_status"] != "ok" or t["is_duplicate"]:
            continue
        key = (t["problem_id"], t["sample_idx"])
        ref = status.get((*key, t["test_id"], "reference"))
        validity = {"passed": "valid", None: "not run"}.get(ref, "infra" if ref == "infra"
                                                         else "invalid")
        line = (t["snippet"].strip().splitlines() or [""])[0][:120]
        out.setdefault(key, []).append(
            f"[{'baseline' if t['origin'] == 'baseline' else 'stage ' + str(t['stage'])}] "
            f"{line} -> code {status.get((*key, t['test_id'], 'candidate'), 'not run')}, "
            f"{validity}")
    return out


def completions(chains: Iterable[Row], tests: Iterable[Row], executions: Iterable[Row],
                rewards: Iterable[Row], entry_points: Mapping[str, str], n: int = 4
                ) -> list[dict[str, Any]]:
    """Rows of the completions table: the best- and worst-rewarded samples, then one sample of
    each other problem, up to ``n``."""
    text = {(c["problem_id"], c["sample_idx"], c["stage"]): c["output_text"]
            for c in chains if c["role"] == "generator"}
    verdicts = _verdicts(tests, executions)
    scored = sorted(rewards, key=lambda r: (r["generator_reward"] is None,
                                            -(r["generator_reward"] or 0.0)))
    picked: list[Row] = []
    for r in [*scored[:1], *scored[-1:], *scored]:
        if len(picked) >= n:
            break
        if r not in picked and (len(picked) < 2 or r["problem_id"] not in
                                {p["problem_id"] for p in picked}):
            picked.append(r)
    out = []
    for r in picked:
        key = (r["problem_id"], r["sample_idx"])
        code_text = text.get((*key, CODE_STAGE), "")
        parsed = parse_code(code_text, entry_points.get(r["problem_id"], ""))
        out.append({
            "problem_id": r["problem_id"], "sample_idx": int(r["sample_idx"]),
            **{f"stage_{s}": _cut(text.get((*key, s))) for s in STAGES},
            "code": _cut(parsed.code if parsed.ok else f"(no code: {parsed.reason})"),
            "tests": _cut("\n".join(verdicts.get(key, [])) or "(no kept tests)"),
            "generator_reward": r["generator_reward"],
            "discriminator_reward": r["discriminator_reward"], "masked": bool(r.get("masked")),
        })
    return out


def chain_markdown(row: Mapping[str, Any], description: str, step: int) -> str:
    """One completions row as markdown: the problem, the five stages, the code, the tests."""
    parts = [f"# Step {step}: {row['problem_id']} (sample {row['sample_idx']})",
             f"**Problem.** {_cut(description, 1000)}"]
    parts += [f"## Stage {s}\n\n{row[f'stage_{s}'] or '(empty)'}" for s in STAGES]
    parts += [f"## Code\n\n```python\n{row['code']}\n```",
              f"## Tests\n\n```\n{row['tests']}\n```",
              f"**Rewards.** generator {row['generator_reward']}, discriminator "
              f"{row['discriminator_reward']}" + (" (masked)" if row["masked"] else "")]
    return "\n\n".join(parts)
