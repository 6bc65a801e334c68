"""finharness.evaluate (api.py): what `finharness run` does, from Python, with typed results; the command line
stands on the same prepare/execute."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import finharness
from finharness.backends.fake import FakeBackend

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"


def test_one_task_gives_its_metrics_with_intervals_and_resumes(tmp_path):
    fake = FakeBackend(reply="答案：B", name="api")
    first = finharness.evaluate("demo", model=fake, out=tmp_path / "demo")
    run = first["demo"]
    accuracy = run.metric("accuracy")
    assert run.status == "complete" and accuracy.n == 12 and accuracy.ci95[0] <= accuracy.value <= accuracy.ci95[1]
    assert len(run.records) == 12 and (tmp_path / "demo" / "results.json").is_file()
    assert json.loads((tmp_path / "demo" / "results.json").read_text())["metrics"]["accuracy"]["value"] == accuracy.value
    calls = fake.calls
    again = finharness.evaluate("demo", model=fake, out=tmp_path / "demo")
    assert fake.calls == calls and again["demo"].metric() == accuracy  # everything from the run store


def test_several_tasks_pool_and_each_option_goes_to_the_task_that_takes_it(tmp_path):
    result = finharness.evaluate(["demo", str(EXAMPLES / "my_exam.toml")], model=FakeBackend(reply="Answer: B"),
                                 data_dir=EXAMPLES, options={"max_tokens": 16}, out=tmp_path / "pool")
    assert set(result.runs) == {"demo", "my_exam"} and result.complete
    assert result["my_exam"].out_dir == tmp_path / "pool" / "my_exam"
    with pytest.raises(ValueError, match="no task of this run takes option"):
        finharness.evaluate(["demo", "demo"], model=FakeBackend(), options={"max_tokenz": 1}, out=tmp_path / "x")


def test_bad_input_is_raised_not_printed(tmp_path):
    with pytest.raises(KeyError, match="unknown task"):
        finharness.evaluate("no-such-task", model=FakeBackend(), out=tmp_path)
    with pytest.raises(ValueError, match="model spec"):
        finharness.evaluate("demo", model="nonsense:model", out=tmp_path)
    with pytest.raises(KeyError, match="no metric 'f1'"):
        finharness.evaluate("demo", model=FakeBackend(), out=tmp_path / "d")["demo"].metric("f1")
    for wrong, said in (({"executor": "ray", "tasks": ["demo", "cfinbench"]}, "one task at a time"),
                        ({"executor": "ray", "model": FakeBackend()}, "give them as specs"),
                        ({"executor": "gpu"}, "executor must be local or ray"),
                        ({"shards": 4}, "need the Ray executor"),
                        ({"draws": 2, "temperature": 0.0}, "identical draws")):
        given = {"tasks": "demo", "model": "fake", "out": tmp_path / "e", **wrong}
        with pytest.raises(ValueError, match=said):
            finharness.evaluate(given.pop("tasks"), **given)
    assert not (tmp_path / "e").exists()  # refused before anything was written


def test_a_budget_stop_is_in_the_result(tmp_path):
    result = finharness.evaluate("demo", model=FakeBackend(reply="答案：A", name="budget"), budget_tokens=60,
                                 out=tmp_path / "b")
    assert result["demo"].status == "incomplete" and result.spending.reached  # stopped, everything made stored


def test_the_example_script_runs(tmp_path):
    import os
    import shutil

    shutil.copytree(EXAMPLES, tmp_path / "docs" / "examples")  # the script names its files from the repo root
    done = subprocess.run([sys.executable, str(EXAMPLES / "evaluate.py"), "fake?reply=Answer: B"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("demo: accuracy ") and lines[1].startswith("my_exam: accuracy ")
    assert "n=12" in lines[0] and "(complete; 12 samples in runs/evaluate/demo)" in lines[0]


def test_a_suite_gives_its_scorecard_as_data_and_resumes(tmp_path, monkeypatch):
    """finharness.evaluate_suite: the rows run for every model, the scorecard comes back as data (its cells with
    interval and n) and as files; data that is not here is a DataError naming the pull, or a row left out with
    skip_missing; the same call again makes no call."""
    from finharness.data.errors import DataError

    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    suite = tmp_path / "s.toml"
    suite.write_text('name = "s"\n[[task]]\ntask = "demo"\n[[task]]\ntask = "bizbench/finknow"\nlimit = 3\n',
                     encoding="utf-8")
    empty = tmp_path / "data"
    empty.mkdir()
    models = ["fake?reply=答案：B", "fake?name=other&reply=答案：A"]
    with pytest.raises(DataError, match="finharness data pull"):
        finharness.evaluate_suite(suite, models, data_dir=empty, out=tmp_path / "out")
    card = finharness.evaluate_suite(suite, models, data_dir=empty, out=tmp_path / "out", skip_missing=True)
    assert card.complete and card.name == "s" and list(card.left_out) == ["bizbench_finknow"]
    first = card.value("demo", models[0])
    assert first.n == 12 and first.ci95[0] <= first.value <= first.ci95[1]
    assert card.value("demo", models[1]).n == 12 and {p.suffix for p in card.files} == {".json", ".md", ".csv", ".html"}
    assert json.loads((tmp_path / "out" / "suite.json").read_text(encoding="utf-8"))["status"] == "complete"
    with pytest.raises(KeyError, match="rows: bizbench_finknow, demo"):
        card.value("nope", models[0])
    again = finharness.evaluate_suite(suite, models, data_dir=empty, out=tmp_path / "out", skip_missing=True)
    usage = again.manifest["by_model"][models[0]]  # over both invocations: the second made none, read 12 stored
    assert again.value("demo", models[0]) == first
    assert usage["invocations"] == 2 and usage["calls"] == 12 and usage["cache_hits"] == 12, usage
