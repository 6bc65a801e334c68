"""`finharness plan` (commands/plan.py plan_command): the spread read from stored runs, a matches file or flags."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from finharness.benchmarks.cfinbench.scoring import item_weights
from finharness.commands.plan import TIE_SHARE, plan_command
from finharness.data.io import write_jsonl
from finharness.rating.matches import Match, write_matches
from finharness.stats.power import (
    binary_difference_sd,
    difference_sd,
    difference_sd_from_one,
    effective_n,
    plan_comparison,
)


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("plan")(plan_command)
    app.command("other")(lambda: None)  # two commands: typer keeps `plan` as a subcommand
    return app


def _run(tmp_path, name, scores, task="demo", meta=None):
    run = tmp_path / name
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"task": task}))
    write_jsonl(run / "samples.jsonl", [{"id": i, "score": {"value": v, "values": {}},
                                         "metadata": (meta or {}).get(i, {})} for i, v in scores.items()])
    return run


def _plan(*args):
    result = CliRunner().invoke(_app(), ["plan", *map(str, args), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_two_runs_give_the_spread_of_their_differences(tmp_path):
    a = {str(i): float(i % 2) for i in range(40)}
    b = {str(i): float(i % 3 == 0) for i in range(40)}
    out = _plan(_run(tmp_path, "a", a), _run(tmp_path, "b", b), "--n", 500)
    expected = plan_comparison(difference_sd(a, b), n=500)
    assert out["sd"] == expected.sd and out["detectable"] == expected.detectable and out["n"] == 500


def test_one_run_assumes_a_correlation_and_defaults_to_its_own_size(tmp_path):
    scores = {str(i): float(i % 4 != 0) for i in range(120)}
    out = _plan(_run(tmp_path, "a", scores), "--correlation", 0.3)
    expected = plan_comparison(difference_sd_from_one(list(scores.values()), 0.3), n=120)
    assert out["n"] == 120 and out["detectable"] == expected.detectable


def test_a_cfinbench_run_counts_its_items_by_their_weight(tmp_path):
    cells = {str(i): ("single_choice" if i < 30 else "judgment", f"1-{i % 3 + 1}") for i in range(40)}
    meta = {i: {"type": t, "category": c} for i, (t, c) in cells.items()}
    scores = {i: float(int(i) % 2) for i in cells}
    out = _plan(_run(tmp_path, "a", scores, "cfinbench", meta), "--n", 1000)
    ratio = effective_n(item_weights([cells[i] for i in sorted(scores)])) / 40
    assert ratio < 1 and out["effective_n"] == pytest.approx(1000 * ratio)


def test_flags_without_runs_and_pairwise_points(tmp_path):
    out = _plan("--accuracy", 0.7, "--n", 2000)
    assert out["sd"] == binary_difference_sd(0.7, 0.5)
    pairwise = _plan("--pairwise", "--n", 330)
    expected = plan_comparison(((1 - TIE_SHARE) / 4) ** 0.5, n=330, pairwise_scale=(400.0, 10.0))
    assert pairwise["rating_points"] == expected.rating_points
    matches = tmp_path / "m.jsonl"
    write_matches([Match("t", "x", "y", w) for w in ("model_a", "tie", "model_b", "model_a")]
                  + [Match("t", "y", "x", "model_b")], matches)
    from_file = _plan("--matches", matches, "--diff", 0.1)
    outcomes = [1.0, 0.5, 0.0, 1.0, 1.0]  # x's score in each match
    mean = sum(outcomes) / 5
    sd = (sum((o - mean) ** 2 for o in outcomes) / 4) ** 0.5
    assert from_file["sd"] == sd and from_file["n"] == plan_comparison(sd, difference=0.1).n


def test_without_a_source_the_largest_spread_of_a_0_1_score_is_assumed_and_said():
    out = _plan("--n", 100)
    assert out["sd"] == binary_difference_sd(0.5, 0.5) and out["source"].startswith("default: 0/1 scores at")
    assert out["detectable"] == plan_comparison(binary_difference_sd(0.5, 0.5), n=100).detectable


def test_parts_of_a_weighted_score_count_their_items_by_weight():
    out = _plan("--parts", "0.4=3000,0.4=2000,0.2=1000")
    weights = [0.4 / 3000] * 3000 + [0.4 / 2000] * 2000 + [0.2 / 1000] * 1000
    assert out["n"] == 6000 and out["effective_n"] == pytest.approx(effective_n(weights))
    assert out["effective_n"] == pytest.approx(1 / (0.4 ** 2 / 3000 + 0.4 ** 2 / 2000 + 0.2 ** 2 / 1000))
    needed = _plan("--parts", "0.4=3000,0.4=2000,0.2=1000", "--diff", 0.05, "--accuracy", 0.6)
    assert needed["effective_n"] == pytest.approx(needed["n"] * effective_n(weights) / 6000)
    assert needed["detectable"] <= 0.05


def test_user_errors_say_what_to_give():
    result = CliRunner().invoke(_app(), ["plan", "--parts", "0.4=10,x"])
    assert result.exit_code == 2 and "WEIGHT=ITEMS" in result.output
    result = CliRunner().invoke(_app(), ["plan", "--sd", "0.5"])
    assert result.exit_code == 2 and "--n" in result.output
