"""One real end-to-end path through the embedded model (part of the default suite)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.model
def test_demo_on_embedded_model_runs_and_reruns_from_the_store(tmp_path: Path):
    args = [sys.executable, "-m", "finharness", "run", "demo", "--model", "embedded", "--limit", "3",
            "--out", "out", "-q"]
    first = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["status"] == "complete" and res["counts"]["calls"] == 3
    assert res["metrics"]["accuracy"]["n"] == 3
    lines = [json.loads(row) for row in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    # the prompt as sent is the GGUF chat template's rendering, and a real reply came back
    assert all("<|im_start|>user" in row["prompt"] for row in lines)
    assert all(row["response"] and row["tokens"]["completion"] > 0 for row in lines)
    second = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr
    again = json.loads((tmp_path / "out" / "results.json").read_text())
    assert again["counts"]["calls"] == 0 and again["counts"]["cache_hits"] == 3
    assert again["metrics"] == res["metrics"]
