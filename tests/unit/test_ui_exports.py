"""Exports (matches JSONL, rubric CSV), human–judge agreement, and the `ui` commands end to end."""

from __future__ import annotations

import csv
import json

import pytest
import typer
from typer.testing import CliRunner

from finharness.rating import Match, cohen_kappa, compare_ratings, read_matches, write_matches
from finharness.rating.rate import RatingOptions, rate_table
from finharness.ui.exports import agreement, export_matches, export_rubric
from finharness.ui.queue import load_pairs, load_rubric
from finharness.ui.storage import RaterStore

from .ui_fixtures import MODELS, quality_of, write_dialogue_run, write_qa_run


def test_export_writes_arena_matches_with_human_judge_and_order(tmp_path):
    store = RaterStore(tmp_path / "s.sqlite")
    alice, *_ = store.add_rater("alice")
    load_pairs(store, *(write_dialogue_run(tmp_path, m) for m in MODELS[:2]))
    load_rubric(store, write_qa_run(tmp_path, MODELS[2], {"q1": "x"}))
    queue = store.queue(alice)
    pairs = [w for w in queue if w.kind == "pair"]
    for item, choice in zip(pairs, ("1", "2", "tie")):
        store.put_verdict(item, choice, "")
    store.put_rubric(next(w for w in queue if w.kind == "rubric"),
                     {"accuracy": 5, "completeness": 4, "relevance": 3, "clarity": 4}, "fine, \"quoted\"")
    assert export_matches(store, tmp_path / "h.jsonl") == 3
    matches = read_matches(tmp_path / "h.jsonl")
    for item, choice, m in zip(pairs, ("1", "2", "tie"), matches):
        shown = ("a", "b") if item.first == "a" else ("b", "a")
        expected = "tie" if choice == "tie" else f"model_{shown[int(choice) - 1]}"
        assert (m.task, m.item_id, m.judge, m.winner) == (item.task, item.item_id, "human:alice", expected)
        assert (m.model_a, m.model_b) == MODELS[:2] and m.order == ("ab" if item.first == "a" else "ba")
    assert export_rubric(store, tmp_path / "r.csv") == 1
    row, = csv.DictReader((tmp_path / "r.csv").open(encoding="utf-8"))
    assert (row["model"], row["accuracy"], row["mean"], row["comment"]) == (MODELS[2], "5", "4.0", 'fine, "quoted"')
    store.close()


def _match(task, item, a, b, winner, judge="j"):
    return Match(task=task, model_a=a, model_b=b, winner=winner, item_id=item, judge=judge)


def test_agreement_matches_items_whichever_way_round_and_reuses_rating_compare(tmp_path):
    x, y, z = "mx", "my", "mz"
    human = [_match("T", "1", x, y, "model_a"), _match("T", "2", x, y, "model_b"), _match("T", "3", y, z, "model_a"),
             _match("T", "4", x, z, "tie"), _match("T", "5", x, z, "model_a"), _match("T", "9", y, z, "model_b")]
    # the judge records some pairs the other way round; item 9 it never judged; item 8 humans never judged
    judge = [_match("T", "1", y, x, "model_b"), _match("T", "2", x, y, "model_a"), _match("T", "3", z, y, "model_b"),
             _match("T", "4", x, z, "model_a"), _match("T", "5", z, x, "model_b"), _match("T", "8", x, y, "model_b")]
    write_matches(human, tmp_path / "h.jsonl")
    write_matches(judge, tmp_path / "j.jsonl")
    report = agreement(tmp_path / "h.jsonl", tmp_path / "j.jsonl")
    # outcomes per item (winner's name or tie): human x,y,y,tie,x ; judge x,x,y,x,x
    assert report.items_compared == 5 and report.human_only == 1
    assert report.exact_agreement == pytest.approx(3 / 5)
    assert report.kappa == pytest.approx(cohen_kappa([x, y, y, "tie", x], [x, x, y, x, x]))
    # score of the alphabetically first model (mx < my < mz): human 1,0,1,.5,1 ; judge 1,1,1,1,1
    assert report.item_mae == pytest.approx((0 + 1 + 0 + 0.5 + 0) / 5)
    assert report.judge_matches == 5  # item 8 is left out: humans did not judge it
    options = RatingOptions(method="elo", bootstrap=0)
    expected = compare_ratings(rate_table(human, options).values(), rate_table(judge[:5], options).values())
    assert report.ratings == expected and report.ratings.n == 3
    everything = agreement(tmp_path / "h.jsonl", tmp_path / "j.jsonl", shared_items_only=False, method="bt")
    assert everything.judge_matches == 6 and everything.method == "bt"
    assert json.loads(json.dumps(report.to_json()))["items"]["compared"] == 5


def test_agreement_refuses_a_judge_with_two_verdicts_on_one_item(tmp_path):
    write_matches([_match("T", "1", "a", "b", "tie")], tmp_path / "h.jsonl")
    write_matches([_match("T", "1", "a", "b", "tie"), _match("T", "1", "b", "a", "model_a")], tmp_path / "j.jsonl")
    with pytest.raises(ValueError, match=r"j\.jsonl: match 2 .* a second time"):
        agreement(tmp_path / "h.jsonl", tmp_path / "j.jsonl")


def _cli() -> typer.Typer:
    from finharness.cli import app

    return app


def test_ui_commands_from_adding_a_rater_to_agreement(tmp_path):
    app, runner = _cli(), CliRunner()
    store = str(tmp_path / "s.sqlite")
    added = runner.invoke(app, ["ui", "add-rater", "alice", "--store", store])
    assert added.exit_code == 0
    token = added.stdout.strip().splitlines()[-1]
    assert RaterStore(store).rater_by_token(token).name == "alice"
    runs = [write_dialogue_run(tmp_path, m) for m in MODELS]
    for a, b in ((0, 1), (1, 2), (0, 2)):
        result = runner.invoke(app, ["ui", "--store", store, "load-pairs", str(runs[a]), str(runs[b])])
        assert result.exit_code == 0 and "added 3 work item(s)" in result.output
    rater_store = RaterStore(store)
    alice = rater_store.raters()[0]
    for item in rater_store.queue(alice):  # the rater prefers the answer stating the higher quality
        first, second = (quality_of(str(item.content[side])) for side in item.shown_order)
        rater_store.put_verdict(item, "tie" if first == second else ("1" if first > second else "2"), "")
    rater_store.close()
    assert runner.invoke(app, ["ui", "export", "--store", store, "--matches", str(tmp_path / "h.jsonl")]).exit_code == 0
    human = read_matches(tmp_path / "h.jsonl")
    assert len(human) == 9
    judge = [Match(m.task, m.model_a, m.model_b, m.winner, m.item_id, "judge") for m in human]
    write_matches(judge, tmp_path / "j.jsonl")  # a judge that agrees on every item
    result = runner.invoke(app, ["ui", "agreement", "--human", str(tmp_path / "h.jsonl"),
                                 "--judge", str(tmp_path / "j.jsonl"), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["items"] == {"compared": 9, "kappa": pytest.approx(1.0), "mae": 0.0, "exact_agreement": 1.0,
                            "human_only": 0}
    assert out["human_ratings"] == out["judge_ratings"]
    assert out["ratings"]["pearson"]["r"] == pytest.approx(1.0) and out["ratings"]["mae"] == 0.0
    assert out["human_ratings"][MODELS[0]] > out["human_ratings"][MODELS[1]] > out["human_ratings"][MODELS[2]]
    missing = runner.invoke(app, ["ui", "raters"], env={"FINHARNESS_STORE": ""})
    assert missing.exit_code == 2 and "--store" in missing.output
