"""`finharness suite`: a suite file run for two models on fake backends, through the command line (issue 24 item 1).

One small suite of every kind of row (the demo, CFinBench with its CPA stand-in, a BizBench task, UCFE with a
simulated user and its judging against the released GPT-4o dialogues, FinTradeBench with a judge): suite.json and
the scorecard files are written, a rerun makes no call, a model added later reuses what is stored, a bad suite file
is an error naming it, the bundled suites are all valid, and a budget stops the suite and a rerun resumes it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.suite.spec import SuiteError, bundled, load_suite

from ..unit.test_data_root import ideafinbench

SUITE = '''
name = "tiny"
description = "every kind of row, a few items"
seed = 3

[[task]]
id = "demo"
benchmark = "demo"
task = "demo"
limit = 4

[[task]]
id = "cfinbench"
benchmark = "CFinBench"
task = "cfinbench"
label = "CFinBench"
sample = 4
fallback = { exam = "standin:cpa" }

[[task]]
id = "tatqa"
benchmark = "BizBench"
task = "bizbench/tatqa-e"
label = "TAT-QA (E)"
limit = 2

[[task]]
id = "ucfe"
benchmark = "UCFE"
task = "ucfe"
options = { tasks = "0_股价预测,Financial_Knowledge_Consulting", max_rounds = 2 }
sample = 3

[[task]]
id = "ftb"
benchmark = "FinTradeBench"
task = "fintradebench"
label = "FinTradeBench No-RAG"
options = { mode = "norag", per_category = 1, levels = "L1", select = false, max_tokens = 64 }
'''

VERDICT = ("Correctness: 3/5\nReasoning Depth: 3/5\nSignal Integration: 2/5\nFundamental Integration: 2/5\n"
           "Golden indicators mentioned: none\n[[1]]")
"""One judge reply for both judged benchmarks: FinTradeBench reads the rubric, UCFE the last [[n]] (the first dialogue
shown, in both orders: a tie)."""


def suite_cli(*args: str):
    from finharness.cli import app

    return CliRunner().invoke(app, ["suite", *args, "-q"], catch_exceptions=False)


@pytest.fixture
def data_root(tmp_path: Path, shared_data: Path, monkeypatch) -> Path:
    """The shared data without CFinBench's questions (so the stand-in runs) and a small IDEAFinBench CPA copy."""
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    root = ideafinbench(tmp_path / "data")
    for name in ("fintradebench", "tatqa", "nasdaq100_ohlcv", "bizbench", "ucfe"):
        (root / name).symlink_to(shared_data / name)
    return root


def calls_made(store: Path) -> int:
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0]


def test_a_suite_runs_every_row_for_each_model_resumes_and_reuses(tmp_path: Path, data_root: Path):
    suite_file = tmp_path / "tiny.toml"
    suite_file.write_text(SUITE, encoding="utf-8")
    out = tmp_path / "suite"
    judge = f"fake?name=judge&reply={VERDICT}"
    common = [str(suite_file), "--judge", judge, "--user-model", "fake?name=user&reply=好的，谢谢。",
              "--data-dir", str(data_root), "--out", str(out)]
    first = suite_cli("--model", "fake?name=a", *common)
    assert first.exit_code in (0, 1), first.output
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert manifest["suite"] == "tiny" and manifest["models"] == ["fake?name=a"]
    rows = {row["id"]: row for row in manifest["rows"]}
    assert rows["cfinbench"]["standin"] == "cpa" and "stand-in" in rows["cfinbench"]["label"]
    assert rows["ftb"]["judged"] and rows["ucfe"]["judged"] and not rows["demo"]["judged"]
    for row in rows.values():  # each row's run, where a run of it alone would write it
        results = json.loads((out / row["runs"]["fake?name=a"] / "results.json").read_text(encoding="utf-8"))
        assert results["task"] == row["task"].split(":")[0] or results["task"] == row["task"]
        assert results["cumulative"]["invocations"] == 1
    assert json.loads((out / rows["demo"]["runs"]["fake?name=a"] / "results.json").read_text())["counts"][
        "samples"] == 4
    ucfe = manifest["ucfe"]
    matches = [json.loads(line) for line in (out / ucfe["matches"]).read_text(encoding="utf-8").splitlines()]
    assert matches and {m["model_b"] for m in matches} == {"gpt-4o (released)"}
    for name in ("scorecard.html", "scorecard.md", "scorecard.csv", "scorecard.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0
    assert "CFinBench" in first.output and "stand-in" in first.output
    made = calls_made(out / "store.sqlite")
    assert made == manifest["cumulative"]["calls"]

    again = suite_cli("--model", "fake?name=a", *common)  # resume: every call is stored
    assert again.exit_code == first.exit_code, again.output
    assert calls_made(out / "store.sqlite") == made
    resumed = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert resumed["by_model"]["fake?name=a"]["calls"] == manifest["by_model"]["fake?name=a"]["calls"]

    both = suite_cli("--model", "fake?name=a", "--model", "fake?name=b", *common)  # a model added later
    assert both.exit_code in (0, 1), both.output
    grown = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert grown["models"] == ["fake?name=a", "fake?name=b"]
    for row in grown["rows"]:
        first_model = json.loads((out / row["runs"]["fake?name=a"] / "results.json").read_text(encoding="utf-8"))
        assert first_model["counts"]["calls"] == 0  # model a: nothing asked again
    pairs = {(m["model_a"], m["model_b"]) for m in
             map(json.loads, (out / grown["ucfe"]["matches"]).read_text(encoding="utf-8").splitlines())}
    assert ("fake?name=a", "fake?name=b") in pairs and ("fake?name=b", "gpt-4o (released)") in pairs
    card = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    assert card["models"] == ["fake?name=a", "fake?name=b"]
    assert {(c["row"], c["model"]) for c in card["cells"]} >= {(r, m) for r in ("demo", "cfinbench", "tatqa", "ftb")
                                                             for m in ("fake?name=a", "fake?name=b")}


def test_a_budget_stops_the_suite_and_a_rerun_resumes(tmp_path: Path, data_root: Path):
    suite_file = tmp_path / "tiny.toml"
    suite_file.write_text(SUITE, encoding="utf-8")
    out = tmp_path / "suite"
    args = [str(suite_file), "--model", "fake?name=a", "--judge", f"fake?name=judge&reply={VERDICT}",
            "--user-model", "fake?name=user", "--data-dir", str(data_root), "--out", str(out)]
    stopped = suite_cli(*args, "--budget-tokens", "1500")
    assert stopped.exit_code == 3, stopped.output
    assert "budget reached after" in stopped.output and "rerun the same command to resume" in stopped.output
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "budget"
    spent = calls_made(out / "store.sqlite")
    assert 0 < spent < 60
    resumed = suite_cli(*args)
    assert resumed.exit_code in (0, 1), resumed.output
    assert json.loads((out / "suite.json").read_text(encoding="utf-8"))["status"] != "budget"
    assert calls_made(out / "store.sqlite") > spent


def test_every_bundled_suite_reads_and_names_real_tasks_and_options():
    assert {"quick", "standard", "full"} <= set(bundled())
    from finharness.benchmarks.registry import make_task, resolve_task

    for name in bundled():
        suite = load_suite(name)
        assert suite.tasks
        for row in suite.tasks:
            ref = resolve_task(row.task)
            make_task(ref.cls, dict(row.options))  # every option is one the task takes
            if row.fallback:
                make_task(ref.cls, {**row.options, **row.fallback})
    quick = load_suite("quick")
    benchmarks = {row.benchmark for row in quick.tasks}
    assert benchmarks == {"demo", "CFinBench", "BizBench", "UCFE", "FinTradeBench", "FinanceBench"}
    assert sum(row.benchmark == "BizBench" for row in quick.tasks) == 8
    assert {row.options.get("mode") for row in quick.tasks if row.benchmark == "FinTradeBench"} == {"norag", "rag"}


@pytest.mark.parametrize("text, message", [
    ('[[task]]\ntask = "demo"\nsampel = 3\n', "did you mean 'sample'"),
    ('[[task]]\ntask = "nosuchtask"\n', "unknown task 'nosuchtask'"),
    ('[[task]]\ntask = "demo"\noptions = { shot = 3 }\n', "unknown option(s) ['shot']"),
    ('[[task]]\ntask = "demo"\n[[task]]\ntask = "demo"\n', "used twice"),
    ('[[task]]\ntask = "demo"\nlimit = 2\nsample = 3\n', "not both"),
    ('task = [\n', "not valid TOML"),
])
def test_a_bad_suite_file_is_an_error_naming_it(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    result = suite_cli(str(path), "--model", "fake", "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and str(path) in result.output and message in result.output, result.output
    assert not (tmp_path / "out" / "store.sqlite").exists()


def test_an_unknown_suite_name_says_the_known_ones():
    with pytest.raises(SuiteError, match="did you mean 'quick'"):
        load_suite("quik")
