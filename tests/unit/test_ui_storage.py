"""Rater store and work-item loading: tokens kept as hashes, queues per rater, verdicts final and translated."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import pytest

from finharness.core.store import MIGRATIONS, RunStore
from finharness.data.errors import DataError
from finharness.ui.queue import load_pairs, load_rubric, load_run, shared_opening, shown_first
from finharness.ui.storage import UI_MIGRATIONS, AlreadyJudged, RaterStore

from .ui_fixtures import ITEMS, MODELS, write_dialogue_run, write_qa_run


@pytest.fixture
def store(tmp_path):
    s = RaterStore(tmp_path / "store.sqlite")
    yield s
    s.close()


def test_tables_live_beside_the_engine_schema_without_bumping_it(tmp_path):
    path = tmp_path / "store.sqlite"
    RaterStore(path).close()
    RaterStore(path).close()  # reopening migrates nothing twice
    RunStore(path).close()  # the engine still opens the file
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert conn.execute("SELECT version FROM ui_schema").fetchall() == [(len(UI_MIGRATIONS),)]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"calls", "samples", "ui_raters", "ui_tokens", "ui_work_items", "ui_verdicts"} <= tables


def test_tokens_are_stored_only_as_hashes_and_reissuing_revokes(store):
    rater, token, created = store.add_rater("alice")
    assert created and store.rater_by_token(token) == rater
    dump = "\n".join(sqlite3.connect(store.path).iterdump())
    assert token not in dump
    session_id, _ = store.open_session(rater)
    assert session_id not in dump and store.session(session_id).rater == rater
    _, new_token, created_again = store.add_rater("alice")
    assert not created_again
    assert store.rater_by_token(token) is None and store.rater_by_token(new_token) == rater
    assert store.session(session_id) is None  # a revoked token ends the sessions opened with it
    with pytest.raises(ValueError, match="without spaces"):
        store.add_rater("bad name")


def test_load_run_reads_dialogues_and_plain_answers(tmp_path):
    run = load_run(write_dialogue_run(tmp_path, MODELS[0]))
    assert run.model == MODELS[0] and list(run.items) == list(ITEMS)
    item = run.items["Credit_Risk_Evaluation/4"]
    assert (item.task, item.item_id, item.context) == ("Credit_Risk_Evaluation", "4", ())
    assert [t["role"] for t in item.answer] == ["user", "assistant", "user"]
    qa = load_run(write_qa_run(tmp_path, "m1", {"q1": "Margins rose."}), name="renamed")
    assert qa.model == "renamed" and qa.skipped == ("failed-1",)
    q1 = qa.items["q1"]
    assert (q1.task, q1.item_id) == ("fintradebench", "q1")
    assert [t["role"] for t in q1.context] == ["system", "user"]
    assert q1.answer == ({"role": "assistant", "content": "Margins rose."},)


def test_load_run_errors_name_file_and_line(tmp_path):
    run = write_qa_run(tmp_path, "m1", {"q1": "a"})
    lines = (run / "samples.jsonl").read_text().splitlines()
    (run / "samples.jsonl").write_text("\n".join([lines[0], lines[0]]) + "\n")
    with pytest.raises(DataError, match=r"samples\.jsonl:2: duplicate sample id 'q1'"):
        load_run(run)
    with pytest.raises(DataError, match="no samples.jsonl"):
        load_run(tmp_path / "nowhere")


def test_shared_opening_stops_at_the_first_difference_and_keeps_an_answer_per_side():
    user, other = {"role": "user", "content": "Q"}, {"role": "user", "content": "Q2"}
    reply = {"role": "assistant", "content": "A"}
    assert shared_opening([user, reply], [user, reply]) == 1  # identical answers stay on both sides
    assert shared_opening([user, reply], [other, reply]) == 0
    assert shared_opening([user], [user]) == 0


def test_order_is_stable_per_rater_and_item_and_balanced():
    draws = [shown_first(0, "alice", "t", str(i), ["x", "y"]) for i in range(400)]
    assert draws == [shown_first(0, "alice", "t", str(i), ["x", "y"]) for i in range(400)]
    assert 0.4 < Counter(draws)["a"] / len(draws) < 0.6
    other_rater = [shown_first(0, "bob", "t", str(i), ["x", "y"]) for i in range(400)]
    assert draws != other_rater


def test_load_pairs_queues_each_rater_once_and_samples_per_rater(store, tmp_path):
    alice, *_ = store.add_rater("alice")
    bob, *_ = store.add_rater("bob")
    run_a, run_b = (write_dialogue_run(tmp_path, m) for m in MODELS[:2])
    report = load_pairs(store, run_a, run_b)
    assert (report.added, report.already_queued) == (6, 0)
    assert load_pairs(store, run_b, run_a).added == 0  # the same pair the other way round is not queued twice
    queue = store.queue(alice)
    assert sorted(w.sample_id for w in queue) == sorted(ITEMS)
    assert [w.position for w in queue] == [1, 2, 3]
    assert all(w.kind == "pair" and {w.model_a, w.model_b} == set(MODELS[:2]) for w in queue)
    assert all(w.first == shown_first(0, "alice", w.task, w.item_id, [MODELS[0], MODELS[1]]) for w in queue)
    # the user's identical opening is shown once as context; each side starts at its model's first answer
    assert all([t["role"] for t in w.content["context"]] == ["user"] for w in queue)
    assert all(w.content["a"][0]["role"] == w.content["b"][0]["role"] == "assistant" for w in queue)
    gamma = write_dialogue_run(tmp_path, MODELS[2])
    assert load_pairs(store, run_a, gamma, raters="bob", per_rater=2).per_rater == {"bob": 2}
    assert len(store.queue(bob)) == 5 and len(store.queue(alice)) == 3
    with pytest.raises(ValueError, match="unknown rater"):
        load_pairs(store, run_a, gamma, raters="carol")
    with pytest.raises(ValueError, match="--name-a / --name-b"):
        load_pairs(store, run_a, run_a)


def test_verdicts_are_translated_from_shown_order_and_final(store, tmp_path):
    alice, *_ = store.add_rater("alice")
    load_pairs(store, *(write_dialogue_run(tmp_path, m) for m in MODELS[:2]))
    for item in store.queue(alice):
        store.put_verdict(item, "1", "first shown is better")
        stored = store.work_item(alice, item.id)
        assert stored.verdict["winner"] == f"model_{item.first}"
        with pytest.raises(AlreadyJudged):
            store.put_verdict(stored, "2", "")
    judged = store.judged_pairs()
    assert [r.name for r, _ in judged] == ["alice"] * 3
    load_rubric(store, write_qa_run(tmp_path, "m1", {"q1": "a"}))
    with pytest.raises(ValueError, match="rubric item"):
        store.put_verdict(store.queue(alice)[-1], "1", "")


def test_rubric_scores_are_validated(store, tmp_path):
    alice, *_ = store.add_rater("alice")
    report = load_rubric(store, write_qa_run(tmp_path, "m1", {"q1": "a", "q2": "b"}))
    assert report.added == 2 and "1 failed sample(s)" in report.notes[0]
    item = store.queue(alice)[0]
    with pytest.raises(ValueError, match="integer 1–5"):
        store.put_rubric(item, {"accuracy": 6, "completeness": 3, "relevance": 3, "clarity": 3}, "")
    store.put_rubric(item, {"accuracy": 5, "completeness": 3, "relevance": 4, "clarity": 2}, "ok")
    (rater, judged), = store.judged_rubrics()
    assert rater.name == "alice" and judged.verdict["scores"]["relevance"] == 4
    assert json.loads(json.dumps(judged.content))["context"][1]["content"].startswith("Question")
