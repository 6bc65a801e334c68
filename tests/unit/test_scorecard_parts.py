"""Parts of the scorecard that the end-to-end suite (tests/e2e/test_scorecard.py) does not reach: a UCFE pair that
is not neighbours in the rating table, the judge's health read from matches alone, an incomplete run's cell, the
and the errors of a bad suite folder
(the terminal width rule: tests/unit/test_terminal_output.py)."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.registry import make_task, task_class
from finharness.benchmarks.ucfe.suite_step import judging_health
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.data.errors import DataError
from finharness.rating import Match
from finharness.suite import scorecard_views
from finharness.suite.scorecard import (
    Difference,
    Player,
    build_scorecard,
    model_gaps,
    scorecard_from_runs,
)


def player(name: str, rating: float, model: str | None) -> Player:
    return Player(name, model, rating, (rating - 50, rating + 50), 1, 1, 1)


def gap(higher: str, lower: str, diff: float, separable: bool) -> Difference:
    low = 10.0 if separable else -10.0
    return Difference("ucfe", higher, lower, diff, (low, diff + 40), None, "bootstrap", 20, separable)


@pytest.mark.parametrize("separable", [(True, True), (True, False)])
def test_models_apart_in_the_rating_table_are_separable_only_through_every_gap(separable):
    players = [player("a", 1100, "a"), player("ref", 1000, None), player("b", 900, "b")]
    gaps = [gap("a", "ref", 100, separable[0]), gap("ref", "b", 100, separable[1])]
    (d,) = model_gaps("ucfe", players, gaps)
    assert (d.ahead, d.behind, d.diff, d.ci95, d.test) == ("a", "b", 200, None, "gap-chain")
    assert d.separable == all(separable) and "ref between" in d.warning


def test_neighbours_take_the_tables_own_gap():
    players = [player("a", 1100, "a"), player("b", 1000, "b"), player("ref", 900, None)]
    gaps = [gap("a", "b", 100, True), gap("b", "ref", 100, False)]
    (d,) = model_gaps("ucfe", players, gaps)
    assert d == gaps[0]


def test_ucfe_judge_health_from_the_matches_when_no_summary_exists(tmp_path: Path):
    matches = [Match("Analyst", "a", "b", "tie", item_id="1", judge="j", order="ab"),
               Match("Analyst", "a", "b", "model_a", item_id="2", judge="j", order="ab"),  # shown first, won
               Match("Analyst", "a", "b", "model_a", item_id="3", judge="j", order="ba"),  # shown second, won
               Match("Analyst", "a", "b", "model_b", item_id="4", judge="j", order="ab")]  # shown second, won
    health = judging_health(tmp_path, {"summaries": ["absent.summary.json"], "judge": "j"}, matches)
    rates = {r.name: (r.hits, r.n) for r in health.rates}
    assert rates["tie"] == (1, 4) and rates["first-position win"] == (1, 3)
    assert any("no judge summaries" in n for n in health.notes)


def test_an_incomplete_run_is_an_incomplete_cell_with_why(tmp_path: Path):
    store = RunStore(tmp_path / "store.sqlite")
    try:
        for name, script in (("a", [{"match": "", "fail": "injected: refused", "times": 1}]), ("b", [])):
            backend = FakeBackend(f"fake?name={name}", name=name, script=script, reply="Answer: B")
            asyncio.run(run_task(make_task(task_class("demo"), {}), {"model": backend}, store,
                                 RunOptions(concurrency=1), out_dir=tmp_path / name))
    finally:
        store.close()
    view = scorecard_from_runs([tmp_path / "a", tmp_path / "b"])
    a, b = view.cell("demo", "fake?name=a"), view.cell("demo", "fake?name=b")
    assert a.status == "incomplete" and a.why == "1 of 12 samples failed (error ×1)" and a.n == 11
    assert b.status == "complete" and b.why is None and b.n == 12
    (d,) = view.differences
    assert d.n == 11  # paired on the items both scored


def test_a_bad_suite_folder_is_an_error_naming_the_file(tmp_path: Path):
    with pytest.raises(DataError, match="no suite.json here"):
        build_scorecard(tmp_path)
    (tmp_path / "suite.json").write_text(json.dumps({"models": ["m"], "rows": [{"id": "x"}]}), encoding="utf-8")
    with pytest.raises(DataError, match=r"suite.json: rows\[0\] needs an 'id' and a 'task'"):
        build_scorecard(tmp_path)
    (tmp_path / "suite.json").write_text(json.dumps({"models": ["m"], "rows": [{"id": "x", "task": "demo"}]}),
                                         encoding="utf-8")
    card = build_scorecard(tmp_path)
    assert card.cell("x", "m").status == "missing" and "no run of this row" in card.cell("x", "m").why


def test_a_suite_whose_ucfe_judging_did_not_run_says_so_in_the_cells(tmp_path: Path):
    suite = {"models": ["m"], "rows": [{"id": "ucfe", "task": "ucfe", "runs": {}}], "status": "interrupted",
             "ucfe": {"row": "ucfe", "matches": "ucfe/matches.jsonl", "reference": "gpt-4o (released)",
                      "summaries": []}}
    (tmp_path / "suite.json").write_text(json.dumps(suite), encoding="utf-8")
    card = build_scorecard(tmp_path)
    cell = card.cell("ucfe", "m")
    assert cell.status == "missing" and "ucfe/matches.jsonl absent" in cell.why
    assert card.ratings is not None and card.ratings.players == ()


def test_two_runs_of_one_task_and_model_with_the_same_options_are_told_apart_by_folder(tmp_path: Path):
    store = RunStore(tmp_path / "store.sqlite")
    try:
        for folder in ("first", "again"):
            asyncio.run(run_task(make_task(task_class("demo"), {}), {"model": FakeBackend(reply="Answer: B")}, store,
                                 RunOptions(), out_dir=tmp_path / folder))
    finally:
        store.close()
    view = scorecard_from_runs([tmp_path / "first", tmp_path / "again"])
    assert [(r.id, r.run_label) for r in view.rows] == [("demo · first", "first"), ("demo · again", "again")]
    assert view.models == ("fake",) and view.cell("demo · again", "fake").value == view.cell("demo · first", "fake").value


def test_one_data_error_that_stopped_several_rows_is_one_footnote_and_one_note(tmp_path: Path):
    """A long reason (a data error) becomes a footnote printed once however many cells it explains; the card's
    notes name the rows it stopped together; a short reason stays in its cell."""
    error = ("DataError: the Hub cannot be reached, and kensho/bizbench@18e0759221aa: data/test.parquet is not in "
             "the Hub cache (copy from a mirror: `finharness data pull NAME --from DIR`)")
    rows = [{"id": i, "task": f"bizbench/{i}", "runs": {}} for i in ("fincode", "codefinqa", "secnum")]
    suite = {"models": ["m"], "rows": rows, "status": "incomplete",
             "errors": {"m": {"fincode": error, "codefinqa": error, "secnum": "budget reached before this row"}}}
    (tmp_path / "suite.json").write_text(json.dumps(suite), encoding="utf-8")
    card = build_scorecard(tmp_path)
    assert card.notes == (f"m · fincode, codefinqa: did not run ({error})",
                          "m · secnum: did not run (budget reached before this row)")
    buffer = io.StringIO()
    scorecard_views.print_scorecard(card, file=buffer, width=200)
    text = buffer.getvalue()
    grid = text[:text.index("\n[1] ")]
    assert grid.count("missing [1]") == 2 and "Hub cannot" not in grid, "the long reason is not in the cells"
    assert "missing: budget reached before this row" in grid, "a short reason stays in its cell"
    assert text.count(f"\n[1] {error}") == 1
    markdown = scorecard_views.render_markdown(card)
    assert markdown.count("missing [1]") == 2 and markdown.count(f"[1] {error}") == 1
    html = scorecard_views.render_html(card)
    assert html.count("missing [1] see below") == 2 and html.count(f"[1] {error}") == 1
