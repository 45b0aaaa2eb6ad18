"""The completions table: which samples, which columns, verdict lines, cut cells."""

from __future__ import annotations

from pipeline.completions import CELL_MAX, chain_markdown, completions


def _step():
    chains = [{"problem_id": p, "sample_idx": j, "stage": s, "role": "generator",
               "output_text": (f"```python\ndef f(x):\n    return x + {j}\n```" if s == 5
                               else ("y" * (CELL_MAX + 50) if s == 1 else f"stage {s}"))}
              for p in ("a", "b", "c") for j in (0, 1) for s in range(1, 6)]
    tests = [{"problem_id": "a", "sample_idx": 1, "stage": 2, "test_idx": 0, "test_id": "s2.0",
              "origin": "discriminator", "snippet": "assert f(1) == 2\n# more",
              "parse_status": "ok", "is_duplicate": False},
             {"problem_id": "a", "sample_idx": 1, "stage": 3, "test_idx": 0, "test_id": "s3.0",
              "origin": "discriminator", "snippet": "assert f(1) == 2",
              "parse_status": "ok", "is_duplicate": True}]
    executions = [{"problem_id": "a", "sample_idx": 1, "test_id": "s2.0", "target_kind": k,
                   "status": v} for k, v in (("candidate", "passed"), ("reference", "failed"))]
    rewards = [{"problem_id": p, "sample_idx": j, "generator_reward": r,
                "discriminator_reward": 0.5, "masked": False}
               for (p, j), r in zip([(p, j) for p in "abc" for j in (0, 1)],
                                    (0.2, 0.9, 0.1, 0.4, 0.3, 0.3), strict=True)]
    return chains, tests, executions, rewards


def test_the_table_shows_best_worst_and_other_problems_with_verdicts():
    rows = completions(*_step(), {"a": "f", "b": "f", "c": "f"}, n=3)
    assert [(r["problem_id"], r["sample_idx"]) for r in rows] == [("a", 1), ("b", 0), ("c", 0)]
    assert set(rows[0]) == {"problem_id", "sample_idx", "stage_1", "stage_2", "stage_3",
                            "stage_4", "stage_5", "code", "tests", "generator_reward",
                            "discriminator_reward", "masked"}
    assert rows[0]["code"].startswith("def f(x):")
    assert rows[0]["tests"] == "[stage 2] assert f(1) == 2 -> code passed, invalid"  # dup out
    assert rows[0]["stage_1"].endswith(f"[cut: {CELL_MAX + 50} chars]")
    assert rows[1]["tests"] == "(no kept tests)"
    text = chain_markdown(rows[0], "add one", step=7)
    assert text.startswith("# Step 7: a (sample 1)") and "## Stage 5" in text
    assert "```python\ndef f(x):" in text
