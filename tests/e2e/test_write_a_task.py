"""docs/write-a-task.md works as written: its example task (docs/examples/my_exam.py, over the user's own
JSONL) runs from its file through the CLI on the fake backend, resumes with 0 calls, scores predictions
with `finharness score`, starts a new run key when the file is edited, and, published by entry point,
is listed with its distribution and runs by name."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "write-a-task.md"
EXAMPLE = REPO / "docs" / "examples" / "my_exam.py"
QUESTIONS = REPO / "docs" / "examples" / "my_exam.jsonl"
SPEC = f"{EXAMPLE}:MyExam"


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "finharness", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text(encoding="utf-8"))


def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(QUESTIONS, data / "my_exam.jsonl")
    return data


def test_the_page_shows_the_example_file_whole():
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert EXAMPLE.read_text(encoding="utf-8") in blocks


def test_the_example_runs_resumes_and_scores(tmp_path: Path):
    data = data_dir(tmp_path)
    cli("run", SPEC, "--model", "fake", "--data-dir", str(data), "-q", cwd=tmp_path)
    run_dir = tmp_path / "runs" / "my_exam__fake"  # named after the task, not the file
    first = results(run_dir)
    acc = first["metrics"]["accuracy"]
    assert first["task"] == "my_exam" and first["status"] == "complete" and acc["n"] == 6
    assert 0 <= acc["ci95"][0] <= acc["value"] <= acc["ci95"][1] <= 1
    assert set(first["groups"]["topic"]) == {"accounting", "bonds", "markets"}
    assert first["counts"]["calls"] == 6
    source = first["config"]["task_config"]["task_source"]
    assert source == {"file_sha256": hashlib.sha256(EXAMPLE.read_bytes()).hexdigest(), "attr": "MyExam"}

    # resume: the same command again makes no model call
    cli("run", SPEC, "--model", "fake", "--data-dir", str(data), "-q", cwd=tmp_path)
    again = results(run_dir)
    assert again["run_key"] == first["run_key"] and again["metrics"] == first["metrics"]
    assert again["counts"]["calls"] == 0 and again["counts"]["cache_hits"] == 6

    # finharness score: the gold letter for four questions, a wrong one for the fifth, none for the sixth
    samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    gold = {s["id"]: s["target"] for s in samples}
    ids = sorted(gold)
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "prediction": f"Answer: {gold[i]}"}) + "\n" for i in ids[:4])
                     + json.dumps({"id": ids[4], "prediction": "Answer: " + ("A" if gold[ids[4]] != "A" else "B")})
                     + "\n", encoding="utf-8")
    scored = json.loads(cli("score", SPEC, "--data-dir", str(data), "--predictions", str(preds), "--json",
                            cwd=tmp_path).stdout)
    assert scored["task"] == "my_exam"
    assert scored["metrics"]["accuracy"]["value"] == 0.8 and scored["metrics"]["accuracy"]["n"] == 5
    assert scored["counts"]["missing_predictions"] == 1


def test_editing_the_file_starts_a_new_run_key(tmp_path: Path):
    data = data_dir(tmp_path)
    edited = tmp_path / "my_exam.py"
    edited.write_text(EXAMPLE.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    store = tmp_path / "store.sqlite"
    cli("run", SPEC, "--model", "fake", "--data-dir", str(data), "--store", str(store), "--out", "a", "-q",
        cwd=tmp_path)
    cli("run", f"{edited}:MyExam", "--model", "fake", "--data-dir", str(data), "--store", str(store), "--out", "b",
        "-q", cwd=tmp_path)
    a, b = results(tmp_path / "a"), results(tmp_path / "b")
    assert a["run_key"] != b["run_key"]  # no sample finished by the old code is reused...
    assert b["counts"]["calls"] == 0 and b["counts"]["cache_hits"] == 6  # ...but unchanged requests are cached
    assert a["metrics"] == b["metrics"]


def test_published_by_entry_point_it_is_listed_and_runs_by_name(tmp_path: Path):
    site = tmp_path / "site"
    info = site / "my_exam_tasks-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-exam-tasks\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[finharness.tasks]\nmy-exam = my_exam:MyExam\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(EXAMPLE.parent),
                                                       os.environ.get("PYTHONPATH", "")]))
    listing = json.loads(cli("list", "--json", cwd=tmp_path, env=env).stdout)
    tasks = {t["name"]: t for t in listing["tasks"]}
    assert tasks["my-exam"]["source"] == "entry point (my-exam-tasks 0.1)"
    assert tasks["my-exam"]["description"].startswith("multiple-choice questions")
    assert tasks["demo"]["source"] == "built-in"
    cli("run", "my-exam", "--model", "fake", "--data-dir", str(data_dir(tmp_path)), "-q", cwd=tmp_path, env=env)
    res = results(tmp_path / "runs" / "my-exam__fake")
    assert res["status"] == "complete" and res["metrics"]["accuracy"]["n"] == 6
    assert res["config"]["task_config"]["task_source"]["distribution"] == "my-exam-tasks 0.1"
