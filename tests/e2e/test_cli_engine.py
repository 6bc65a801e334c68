"""The CLI end to end on the fake backend: run, resume after kill -9, score, list, clear errors."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

FINHARNESS = [sys.executable, "-m", "finharness"]


def cli(*args: str, cwd: Path, check: bool = False) -> subprocess.CompletedProcess:
    proc = subprocess.run([*FINHARNESS, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(proc.stdout + proc.stderr)
    return proc


def stored_calls(db: Path) -> int:
    """Calls committed so far (0 while the store is still being created by the run)."""
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    except sqlite3.OperationalError as err:  # "no such table" before the run's migration commits
        if "no such table" in str(err):
            return 0
        raise


def test_run_writes_results_samples_and_manifest(tmp_path: Path):
    cli("run", "demo", "--model", "fake", "--out", "out", "-q", cwd=tmp_path, check=True)
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["task"] == "demo" and res["model"] == "fake" and res["status"] == "complete"
    acc = res["metrics"]["accuracy"]
    assert acc["n"] == 12 and 0 <= acc["ci95"][0] <= acc["value"] <= acc["ci95"][1] <= 1
    assert set(res["groups"]["lang"]) == {"en", "zh"}
    lines = [json.loads(row) for row in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and {"id", "prompt", "response", "extraction", "score", "truncated", "tokens",
                                  "latency_s", "cache_hit"} <= set(lines[0])
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["run_key"] == res["run_key"] and "python" in manifest["versions"]


def test_kill_9_then_rerun_loses_nothing_and_recomputes_nothing(tmp_path: Path):
    args = [*FINHARNESS, "run", "demo", "--model", "fake?latency=0.4", "--concurrency", "1", "--out", "out", "-q"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = tmp_path / "out" / "store.sqlite"
    deadline = time.time() + 120
    while time.time() < deadline:
        if db.exists() and stored_calls(db) >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "out" / "results.json").exists(), "a killed run must not leave results that look complete"
    before = stored_calls(db)
    assert 3 <= before < 12
    cli("run", "demo", "--model", "fake?latency=0.4", "--concurrency", "1", "--out", "out", "-q", cwd=tmp_path, check=True)
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["counts"]["calls"] == 12 - before, "completed calls must not be made again"
    assert res["counts"]["cache_hits"] == before
    assert stored_calls(db) == 12
    # and it equals an uninterrupted run
    cli("run", "demo", "--model", "fake", "--out", "clean", "-q", cwd=tmp_path, check=True)
    clean = json.loads((tmp_path / "clean" / "results.json").read_text())
    assert clean["metrics"] == res["metrics"]


def test_score_predictions_made_elsewhere(tmp_path: Path):
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": f"demo/{i}", "prediction": "Answer: B"}) + "\n" for i in range(12)))
    proc = cli("score", "demo", "--predictions", str(preds), "--json", cwd=tmp_path, check=True)
    res = json.loads(proc.stdout)
    # 8 of the 12 demo answers are B
    assert res["metrics"]["accuracy"]["value"] == pytest.approx(8 / 12)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "demo/0", "prediction": "B"}\n{"id": "nope", "prediction": "B"}\n')
    proc = cli("score", "demo", "--predictions", str(bad), cwd=tmp_path)
    assert proc.returncode == 2 and "bad.jsonl:2" in proc.stderr


def test_list_json_names_tasks_and_backends(tmp_path: Path):
    listing = json.loads(cli("list", "--json", cwd=tmp_path, check=True).stdout)
    assert "demo" in {t["name"] for t in listing["tasks"]}
    assert {"embedded", "llamacpp", "openai", "anthropic", "fake", "replay"} <= set(listing["backends"])


@pytest.mark.parametrize("spec,needle", [("gpt4", "unknown model spec 'gpt4'"),
                                         ("llamacpp:/no/such/model.gguf", "/no/such/model.gguf"),
                                         ("fake?latency=abc", "latency")])
def test_bad_model_spec_is_a_clear_error(tmp_path: Path, spec: str, needle: str):
    proc = cli("run", "demo", "--model", spec, "--out", "o", "-q", cwd=tmp_path)
    assert proc.returncode == 2 and needle in proc.stderr
    assert not (tmp_path / "o" / "results.json").exists()


def test_unknown_task_and_option_are_clear_errors(tmp_path: Path):
    proc = cli("run", "nosuchtask", "--model", "fake", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown task 'nosuchtask'" in proc.stderr
    proc = cli("run", "demo", "--model", "fake", "--shots", "3", cwd=tmp_path)
    assert proc.returncode == 2 and "unknown option(s) ['shots']" in proc.stderr


def test_replay_answers_from_a_recorded_store(tmp_path: Path):
    cli("run", "demo", "--model", "fake", "--out", "a", "-q", cwd=tmp_path, check=True)
    cli("run", "demo", "--model", f"replay:{tmp_path / 'a' / 'store.sqlite'}", "--out", "b", "-q", cwd=tmp_path, check=True)
    a = json.loads((tmp_path / "a" / "results.json").read_text())
    b = json.loads((tmp_path / "b" / "results.json").read_text())
    assert a["metrics"] == b["metrics"] and b["counts"]["calls"] == 12


def test_compare_two_runs_on_the_same_items(tmp_path: Path):
    cli("run", "demo", "--model", "fake", "--out", "a", "-q", cwd=tmp_path, check=True)
    cli("run", "demo", "--model", "fake?name=other", "--out", "b", "-q", cwd=tmp_path, check=True)
    out = json.loads(cli("compare", "a", "b", "--json", cwd=tmp_path, check=True).stdout)
    acc = {r: json.loads((tmp_path / r / "results.json").read_text())["metrics"]["accuracy"]["value"] for r in "ab"}
    assert out["n"] == 12 and out["test"] == "mcnemar-score"
    assert out["diff"] == pytest.approx(acc["b"] - acc["a"])
    assert 0.0 <= out["p_value"] <= 1.0


def test_demo_command_says_where_the_results_are(tmp_path: Path):
    proc = cli("demo", "--model", "fake", "--out", "d", cwd=tmp_path, check=True)
    assert "results: d/results.json" in proc.stdout
    assert json.loads((tmp_path / "d" / "results.json").read_text())["status"] == "complete"
