"""FinanceBench's task on the real open sample with the fake model: every mode's prompt, the filings' absent
documents, a filing that does not fit, retrieval from the right filing, grading, and `score` in the release's
layout."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.financebench import prompts
from finharness.benchmarks.financebench.data import absent_documents, read_questions
from finharness.benchmarks.financebench.task import MODES, FinanceBenchTask
from finharness.benchmarks.registry import make_task
from finharness.core.backend import CallFailed
from tests.fakes import fake_models

ID_3M = "financebench_id_03029"  # 3M FY2018 capex, gold $1577.00, evidence on page 59 of 3M_2018_10K


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finharness", *args], capture_output=True, text=True, timeout=300)


def task(**options) -> FinanceBenchTask:
    return make_task(FinanceBenchTask, options)  # type: ignore[return-value]


def sample_of(t: FinanceBenchTask, root: Path, sid: str = ID_3M):
    return next(s for s in t.load(root) if s.id == sid)


def test_loads_the_150_questions_with_their_groups(shared_data):
    samples = task().load(shared_data)
    assert len(samples) == 150 and len({s.id for s in samples}) == 150
    assert {s.metadata["question_type"] for s in samples} == {"metrics-generated", "domain-relevant",
                                                              "novel-generated"}
    first = next(s for s in samples if s.id == ID_3M)
    assert first.target == "$1577.00" and first.input["doc_name"] == "3M_2018_10K"


def test_modes_that_read_filings_leave_out_the_absent_ones_and_name_them(shared_data):
    questions = read_questions(shared_data)
    absent = absent_documents(shared_data, questions)
    assert len(absent) == 10 and "AES_2022_10K" in absent  # the shared copy lacks 10 of the 84 cited filings
    t = task(mode="single-store")
    samples = t.load(shared_data)
    on_absent = sum(q.doc_name in absent for q in questions)
    assert len(samples) == 150 - on_absent and all(s.input["doc_name"] not in absent for s in samples)
    notes = t.aggregate(samples, []).notes
    assert any("AES_2022_10K" in n and f"{on_absent} questions" in n for n in notes)


def test_closed_book_sends_the_papers_prompt(shared_data, tmp_path):
    t = task()
    sample = sample_of(t, shared_data)
    models = fake_models(tmp_path, model="The capital expenditure was $1,577 million.")
    prediction = asyncio.run(t.solve(sample, models))
    sent = models.model.backend.requests[0]
    assert [m.role for m in sent.messages] == ["user"]
    assert sent.messages[0].content == "Answer this question: " + sample.input["question"]
    assert sent.params.max_tokens == 2048
    assert t.score(sample, prediction).extracted == "correct"


@pytest.mark.parametrize("mode", ["oracle", "oracle-reverse"])
def test_oracle_prompts_hold_the_evidence_pages_in_the_papers_order(shared_data, tmp_path, mode):
    t = task(mode=mode)
    sample = sample_of(t, shared_data)
    question = t.question(sample)
    models = fake_models(tmp_path, model="$1,577 million")
    asyncio.run(t.solve(sample, models))
    text = models.model.backend.requests[0].messages[0].content
    evidence = "\n\n".join(e.full_page for e in question.evidence)
    if mode == "oracle":
        assert text.startswith(f"Answer this question: {question.question} \nHere is the relevant evidence")
        assert text.endswith(f"[START OF FILING] {evidence} [END OF FILING]")
    else:  # context first; the release's prompt closes the filing without its bracket
        assert text == f"Context:\n[START OF FILING] {evidence} [END OF FILING\n\n Answer this question: {question.question} \n"


def test_in_context_does_not_fit_a_small_window_and_says_so(shared_data, tmp_path):
    t = task(mode="in-context")
    sample = sample_of(t, shared_data)
    models = fake_models(tmp_path, model=FakeBackend(reply="x", context_length=8192))
    with pytest.raises(CallFailed) as info:
        asyncio.run(t.solve(sample, models))
    assert info.value.kind == "prompt-too-long" and "does not fit" in str(info.value)
    assert "3M_2018_10K" in str(info.value) and models.model.backend.requests == []


def test_in_context_cut_keeps_the_start_of_the_filing_and_the_question(shared_data, tmp_path):
    t = task(mode="in-context-reverse", fit="cut", max_tokens=256)
    sample = sample_of(t, shared_data)
    models = fake_models(tmp_path, model=FakeBackend(reply="$1,577 million", context_length=8192))
    prediction = asyncio.run(t.solve(sample, models))
    text = models.model.backend.requests[0].messages[0].content
    assert text.startswith("Context:\n[START OF FILING] ") and text.endswith(
        f"[END OF FILING]\n\n Answer this question: {sample.input['question']}\n")
    kept, whole = prediction["filing_chars"]
    assert 0 < kept < whole
    assert models.model.fits(models.model.backend.requests[0].messages, 256)
    assert any(e.get("event") == "truncation" for e in models.model.trace)


def test_in_context_sends_the_whole_filing_when_it_fits(shared_data, tmp_path):
    t = task(mode="in-context")
    sample = sample_of(t, shared_data)
    models = fake_models(tmp_path, model=FakeBackend(reply="$1,577 million", context_length=2_000_000))
    asyncio.run(t.solve(sample, models))
    text = models.model.backend.requests[0].messages[0].content
    evidence_page = t.question(sample).evidence[0].full_page
    assert "Purchases of property, plant and equipment" in text and len(text) > 100 * len(evidence_page)


def test_single_store_retrieves_chunks_of_the_questions_own_filing(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    t = task(mode="single-store", dense="off")
    sample = sample_of(t, shared_data)
    models = fake_models(tmp_path, model="$1,577 million")
    prediction = asyncio.run(t.solve(sample, models))
    sent = models.model.backend.requests[0].messages
    assert [m.role for m in sent] == ["system", "user"] and sent[1].content == sample.input["question"]
    assert sent[0].content.startswith("Use the following pieces of context to answer the user's question. \n")
    assert len(prediction["retrieved"]) == 4 and {r["doc"] for r in prediction["retrieved"]} == {"3M_2018_10K"}


def test_every_mode_is_a_known_option_and_an_unknown_one_is_refused():
    assert set(MODES) == {*prompts.TEMPLATES, "single-store", "shared-store", "agent"}
    with pytest.raises(ValueError, match="mode"):
        task(mode="long-context")


def test_judge_grader_asks_the_judge_only_when_the_rules_are_not_sure(shared_data, tmp_path):
    t = task(grader="judge")
    assert t.roles == ("model", "judge")
    samples = {s.id: s for s in t.load(shared_data)}
    numeric = samples[ID_3M]
    judge = FakeBackend(reply="correct", name="judge")
    models = fake_models(tmp_path, model="The FY2018 capital expenditure was $1,577 million.", judge=judge)
    prediction = asyncio.run(t.solve(numeric, models))
    assert prediction["judge"] is None and judge.requests == []
    assert t.score(numeric, prediction).extracted == "correct"


def test_score_reads_the_released_layout_and_prints_each_rows_grade(shared_data):
    released = shared_data / "financebench" / "results" / "gpt-4_closedBook.jsonl"
    rows = [json.loads(line) for line in released.read_text(encoding="utf-8").splitlines()]
    done = run_cli("score", "financebench", "--predictions", str(released), "--grader", "rules",
                   "--data-dir", str(shared_data), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    graded = {r["financebench_id"]: r["grade"] for r in out["rows"]}
    assert set(graded) == {r["financebench_id"] for r in rows}
    assert set(graded.values()) <= {"correct", "incorrect", "refusal"}
    assert out["metrics"]["accuracy"]["n"] == 150


def test_answers_option_grades_given_answers_without_a_model(shared_data, tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"financebench_id": ID_3M, "model_answer": "(1,577)"}) + "\n", encoding="utf-8")
    t = task(answers=str(answers))
    assert t.roles == ()
    samples = t.load(shared_data)
    assert [s.id for s in samples] == [ID_3M]
    prediction = asyncio.run(t.solve(samples[0], fake_models(tmp_path)))
    assert prediction["answer"] == "(1,577)"


def test_the_data_root_is_pulled_when_the_sample_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_NO_PULL", "1")
    with pytest.raises(Exception, match="financebench"):
        task().load(tmp_path)


def test_a_broken_line_is_named(shared_data, tmp_path):
    root = tmp_path / "data"
    (root / "financebench" / "data").mkdir(parents=True)
    source = shared_data / "financebench" / "data" / "financebench_open_source.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()[:3]
    broken = json.loads(lines[1])
    del broken["answer"]
    (root / "financebench" / "data" / "financebench_open_source.jsonl").write_text(
        "\n".join([lines[0], json.dumps(broken), lines[2]]) + "\n", encoding="utf-8")
    shutil.copy(shared_data / "financebench" / "data" / "financebench_document_information.jsonl",
                root / "financebench" / "data")
    with pytest.raises(Exception, match=r"financebench_open_source\.jsonl:2: .*answer"):
        task().load(root)


def test_grade_check_gives_the_papers_accuracy_beside_the_graders(shared_data):
    released = shared_data / "financebench" / "results" / "gpt-4_sharedStore.jsonl"
    rows = [json.loads(line) for line in released.read_text(encoding="utf-8").splitlines()]
    done = run_cli("financebench", "grade-check", "--results", str(released), "--data-dir", str(shared_data), "--json")
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    (only,) = figures["files"]
    correct = sum(r["label"] == "Correct Answer" for r in rows)
    assert only["human_accuracy"]["value"] == pytest.approx(correct / 150)  # the paper's table, from the labels
    assert only["n"] == 150 and 0 <= only["agreement"]["ci95"][0] <= only["agreement"]["value"]
    assert sum(map(sum, figures["pooled"]["confusion"]["matrix"])) == 150


def test_grade_check_with_a_judge_stores_its_calls(shared_data, tmp_path):
    released = shared_data / "financebench" / "results" / "gpt-4_sharedStore.jsonl"
    args = ["financebench", "grade-check", "--results", str(released), "--data-dir", str(shared_data),
            "--judge", "fake?name=judge&reply=VERDICT: incorrect", "--out", str(tmp_path / "gc"), "--json"]
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr
    again = run_cli(*args)
    assert json.loads(again.stdout) == json.loads(first.stdout)
    assert "0 judge calls made" in again.stderr.splitlines()[-1]  # every verdict from the store
    rules = json.loads(first.stdout)["pooled"]["rules"]
    assert "judge" in rules  # the undecided answers were graded by the judge


def test_an_agent_run_end_to_end_on_the_scripted_fake_and_its_episodes_in_the_report(shared_data, tmp_path):
    rules = [{"match": "page 59 of", "tool_calls": [{"name": "calculator", "arguments": {"expression": "1577 + 0"}}]},
             {"match": "1577", "reply": "The FY2018 capital expenditure was $1,577 million."},
             {"match": "", "tool_calls": [{"name": "read_page", "arguments": {"document": "3M_2018_10K", "page": 59}}]}]
    script = tmp_path / "agent.jsonl"
    script.write_text("".join(json.dumps(rule) + "\n" for rule in rules), encoding="utf-8")
    out = tmp_path / "run"
    done = run_cli("run", "financebench", "-o", "mode=agent", "-o", "dense=off", "--limit", "1", "--data-dir",
                   str(shared_data), "--model", f"fake?name=agent&script={script}", "--out", str(out), "-q")
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["metrics"]["accuracy"]["value"] == 1.0
    assert results["metrics"]["agent.steps"]["value"] == 3 and results["metrics"]["agent.tool_calls"]["value"] == 2
    assert results["extra"]["agent"] == {"stops": {"answer": 1}, "calls_by_tool": {"read_page": 1, "calculator": 1}}
    assert results["counts"]["tool_calls"] == 2
    html = tmp_path / "report.html"
    assert run_cli("report", str(out), "--html", str(html)).returncode == 0
    page = html.read_text(encoding="utf-8")
    assert "Episodes of run" in page and "<b>read_page</b>" in page and "[3M_2018_10K page 59 of 160]" in page
    assert "$1,577 million" in page


def test_a_score_resting_on_the_rules_guesses_is_flagged_on_every_view(shared_data, tmp_path):
    """gpt-4-1106-preview's oracle answers: many open answers graded correct by word overlap only. The run says how
    many, gives the sure lower bound beside the accuracy, and the flag reaches the views through run_flags."""
    from finharness.report.runs import run_flags

    released = shared_data / "financebench" / "results" / "gpt-4-1106-preview_oracle.jsonl"
    done = run_cli("score", "financebench", "--predictions", str(released), "--grader", "rules",
                   "--data-dir", str(shared_data), "--out", str(tmp_path / "scored"), "--json")
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "scored" / "results.json").read_text(encoding="utf-8"))
    metrics = results["metrics"]
    guessed_correct = round((metrics["accuracy"]["value"] - metrics["sure_correct"]["value"]) * 150)
    assert guessed_correct >= 8 and 0 < metrics["guessed"]["value"] < 1
    flags = run_flags(results)
    assert any(f.startswith(f"guessed grades: {guessed_correct} of 150 'correct' grades") for f in flags), flags
    closed = run_cli("score", "financebench", "--predictions",
                     str(shared_data / "financebench" / "results" / "gpt-4_closedBook.jsonl"), "--grader", "rules",
                     "--data-dir", str(shared_data), "--out", str(tmp_path / "closed"), "--json")
    assert closed.returncode == 0, closed.stderr
    closed_results = json.loads((tmp_path / "closed" / "results.json").read_text(encoding="utf-8"))
    assert not any(f.startswith("guessed grades") for f in run_flags(closed_results))  # few correct, none by guess
