"""`--dry-run` against the real thing (issue 24 item 3): a fake-backend suite's plan makes exactly the calls, prompt
tokens and completion tokens its run then makes (every kind of row: the demo, CFinBench's stand-in, a BizBench task,
UCFE's simulated user and its pairwise judging, FinTradeBench with a judge; two models); a rerun's plan finds every
call stored. On the embedded model the plan's prompt tokens (its tokenizer) are within 1 % of the run's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from .test_suite import SUITE, VERDICT, calls_made, data_root  # noqa: F401 (data_root: a fixture)


def suite_cli(*args: str) -> Any:
    from finharness.cli import app

    return CliRunner().invoke(app, ["suite", *args, "-q"], catch_exceptions=False)


def made_in(run: Path) -> tuple[int, int, int]:
    """(calls, prompt tokens, completion tokens) of the calls a run made (not those served from the store)."""
    calls = prompt = completion = 0
    for line in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        for entry in json.loads(line).get("trace", []):
            if "kind" in entry and not entry.get("cache_hit"):
                calls += 1
                if entry["kind"] == "generate":
                    prompt += entry["prompt_tokens"]
                    completion += entry["completion_tokens"]
    return calls, prompt, completion


def planned_in(entry: dict[str, Any]) -> tuple[int, int, int]:
    roles = entry["roles"]
    generated = [r for r in roles if r["completion_ceiling"]]  # FinKnow-like log-likelihood rows have none
    return (sum(r["calls"] for r in roles), sum(r["prompt_tokens"] for r in generated),
            sum(r["completion_expected"] for r in roles))


def test_a_fake_suites_plan_is_its_run_call_for_call(tmp_path: Path, data_root: Path):  # noqa: F811
    suite_file = tmp_path / "tiny.toml"
    suite_file.write_text(SUITE, encoding="utf-8")
    out = tmp_path / "suite"
    args = [str(suite_file), "--model", "fake?name=a", "--model", "fake?name=b", "--judge",
            f"fake?name=judge&reply={VERDICT}", "--user-model", "fake?name=user", "--data-dir", str(data_root),
            "--out", str(out)]
    dry = suite_cli(*args, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.stdout)
    assert not out.exists()  # a dry run writes nothing, not even the store
    assert all(e["error"] is None and e["exact"] for e in plan["tasks"])
    rows = {(e["row"], e["model"]): e for e in plan["tasks"]}
    assert {r for r, _ in rows} == {"demo", "cfinbench", "tatqa", "ucfe", "ftb"}
    assert {r["role"] for e in plan["tasks"] for r in e["roles"]} == {"model", "user", "judge"}

    real = suite_cli(*args)
    assert real.exit_code in (0, 1), real.output
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    for row in manifest["rows"]:
        for model, folder in row["runs"].items():
            assert planned_in(rows[(row["id"], model)]) == made_in(out / folder), (row["id"], model)
            counts = json.loads((out / folder / "results.json").read_text(encoding="utf-8"))["counts"]
            assert counts["calls"] == sum(r["calls"] for r in rows[(row["id"], model)]["roles"])
    judging = plan["judging"]
    ucfe = manifest["ucfe"]["cumulative"]
    assert judging["roles"][0]["calls"] == ucfe["calls"] > 0
    assert judging["roles"][0]["prompt_tokens"] == ucfe["prompt_tokens"]
    assert plan["totals"][-1]["calls"] == manifest["cumulative"]["calls"] == calls_made(out / "store.sqlite")

    again = json.loads(suite_cli(*args, "--dry-run", "--json").stdout)  # every call is stored now
    assert again["totals"][-1]["calls"] == 0 and again["store"] == str(out / "store.sqlite")
    assert again["totals"][-1]["stored_calls"] >= plan["totals"][-1]["calls"]
    assert all(e["stored_items"] == e["items"] for e in again["tasks"])


@pytest.mark.model
def test_the_embedded_models_planned_prompt_tokens_are_its_tokenizers(tmp_path: Path):
    args = [sys.executable, "-m", "finharness", "run", "demo", "--model", "embedded", "--limit", "3", "--out", "out",
            "-q"]
    dry = subprocess.run([*args, "--dry-run", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert dry.returncode == 0, dry.stderr
    (tally,) = json.loads(dry.stdout)["tasks"][0]["roles"]
    assert tally["prompt_counted"] == "tokenizer" and tally["calls"] == 3
    assert tally["completion_source"] == "ceiling (max_tokens)" and tally["completion_ceiling"] == 3 * 64
    real = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert real.returncode == 0, real.stderr
    counts = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))["counts"]
    assert counts["calls"] == tally["calls"]
    assert abs(tally["prompt_tokens"] - counts["prompt_tokens"]) <= 0.01 * counts["prompt_tokens"]
    assert counts["completion_tokens"] <= tally["completion_ceiling"]
