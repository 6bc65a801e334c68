"""The `rate` command, through the real command line (mounted as a plug-in: cli_plugins.py)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from finharness.rating import Match, write_matches


@pytest.fixture()
def app() -> typer.Typer:
    from finharness.cli import app

    return app


@pytest.fixture()
def matches_file(tmp_path):
    matches = []
    for task in ("0_股价预测", "Analyst", "Credit_Risk_Evaluation"):
        for i in range(6):
            matches += [Match(task, "strong", "weak", "model_a" if i else "tie", item_id=str(i)),
                        Match(task, "mid", "weak", "model_a" if i % 2 else "model_b", item_id=str(i)),
                        Match(task, "strong", "mid", "model_a" if i % 3 else "model_b", item_id=str(i))]
    path = tmp_path / "matches.jsonl"
    write_matches(matches, path)
    return path


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("method", ["elo", "bt"])
def test_rate_json_by_task(app, matches_file, method):
    out = _json(CliRunner().invoke(app, ["rate", str(matches_file), "--method", method, "--by", "task",
                                         "--bootstrap", "50", "--json"]))
    assert out["method"] == method
    overall = out["overall"]["ratings"]
    assert list(overall) == ["strong", "mid", "weak"]
    strong = overall["strong"]
    assert (strong["wins"], strong["ties"], strong["losses"]) == (27, 3, 6)
    assert strong["ci95"][0] <= strong["ci95"][1]
    assert set(out["by_task"]) == {"0_股价预测", "Analyst", "Credit_Risk_Evaluation"}
    assert out["groups"]["zero_shot"]["n_matches"] == 18
    assert out["groups"]["few_shot"]["n_matches"] == 36


def test_rate_options_reach_the_numbers(app, tmp_path):
    path = tmp_path / "one.jsonl"
    write_matches([Match("t", "a", "b", "model_a")], path)
    out = _json(CliRunner().invoke(app, ["rate", str(path), "--k", "32", "--init", "1500",
                                         "--bootstrap", "0", "--json"]))
    assert out["overall"]["ratings"]["a"]["rating"] == pytest.approx(1516.0)
    assert out["overall"]["ratings"]["a"]["ci95"] is None
    assert out["by_task"] is None and out["options"]["k"] == 32


def test_rate_table_output(app, matches_file):
    result = CliRunner().invoke(app, ["rate", str(matches_file), "--bootstrap", "20"])
    assert result.exit_code == 0, result.output
    assert "strong" in result.stdout and "95% CI" in result.stdout


def test_malformed_file_exits_with_file_and_line(app, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"task": "t", "model_a": "a", "model_b": "b", "winner": "model_a"}\n'
                    '{"task": "t", "model_a": "a", "model_b": "b", "winner": "draw"}\n')
    result = CliRunner().invoke(app, ["rate", str(path)])
    assert result.exit_code == 2
    assert f"{path}:2:" in result.stderr and "draw" in result.stderr


def test_compare_two_outputs(app, matches_file, tmp_path):
    runner = CliRunner()
    paths = []
    for method in ("elo", "bt"):
        result = runner.invoke(app, ["rate", str(matches_file), "--method", method, "--bootstrap", "0", "--json"])
        paths.append(tmp_path / f"{method}.json")
        paths[-1].write_text(result.stdout)
    out = _json(runner.invoke(app, ["rate", "--compare", *map(str, paths), "--json"]))
    assert out["n"] == 3
    assert out["spearman"]["rho"] == pytest.approx(1.0)
    assert 0 <= out["pearson"]["p"] <= 1
    assert out["mae"] >= 0
    table = runner.invoke(app, ["rate", "--compare", *map(str, paths)])
    assert table.exit_code == 0 and "Spearman" in table.stdout


def test_needs_matches_or_compare(app):
    result = CliRunner().invoke(app, ["rate"])
    assert result.exit_code == 2 and "MATCHES.jsonl" in result.stderr


def test_all_ties_are_flagged_as_ranking_nothing(app, tmp_path, matches_file):
    ties = tmp_path / "ties.jsonl"
    write_matches([Match("0_股价预测", "a", "b", "tie", item_id=str(i)) for i in range(20)], ties)
    for method in ("elo", "bt"):
        out = _json(CliRunner().invoke(app, ["rate", str(ties), "--method", method, "--json"]))
        assert out["overall"]["ratings"]["a"]["ci95"] == [1000.0, 1000.0]
        assert len(out["notes"]) == 1 and "all 20 matches are ties" in out["notes"][0]
    table = CliRunner().invoke(app, ["rate", str(ties)])
    assert "rank nothing" in table.output.replace("\n", " ")
    assert _json(CliRunner().invoke(app, ["rate", str(matches_file), "--json"]))["notes"] == []
