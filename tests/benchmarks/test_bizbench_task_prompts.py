"""BizBench prompts: golden renderings per task, the pipeline's formats, and the merge-conflict handling."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from finharness.benchmarks.bizbench import task as numeric
from finharness.benchmarks.bizbench.finknow import FinKnowTask, ll_context
from finharness.benchmarks.bizbench.formulaeval.task import FormulaEvalTask
from finharness.benchmarks.bizbench.prompts import (
    PROMPT_FILES,
    conflict_sides,
    formulaeval_messages,
    load_prompt_file,
    render_question,
    resolve_conflicts,
)
from finharness.core.types import Sample
from finharness.data.errors import DataError

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden" / "bizbench_prompts.json").read_text("utf-8"))
CASES = {case["id"]: case for case in GOLDEN["cases"]}
TASKS = {"codetatqa": numeric.CodeTatqaTask, "tatqa-e": numeric.TatqaETask, "secnum": numeric.SecNumTask,
         "fincode": numeric.FinCodeTask, "codefinqa": numeric.CodeFinQATask, "convfinqa-e": numeric.ConvFinQAETask}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("case_id", [c for c in CASES if c.split("/")[0] in TASKS])
def test_numeric_task_prompts_match_the_golden(case_id, shared_data):
    case = CASES[case_id]
    short, style = case_id.split("/")
    task = TASKS[short](**({} if style == "default" else {"style": style}))
    task.load_items = lambda data_dir: []  # only the prompt is under test
    task._data_dir = shared_data
    messages = task.messages(Sample("x", case["item"], "1"))
    assert task.prompt().name == case["prompt_file"]
    assert [m.role for m in messages] == case["roles"]
    assert messages[-1].content == case["last_user"]
    assert [sha(m.content) for m in messages] == case["sha256"]


def test_finknow_prompts_match_the_golden(shared_data):
    case = CASES["finknow/gen"]
    task = FinKnowTask(method="gen")
    task._data_dir = shared_data
    messages = task.messages(Sample("x", case["item"], "A"))
    assert [m.role for m in messages] == case["roles"]
    assert [sha(m.content) for m in messages] == case["sha256"]
    ll = CASES["finknow/ll"]
    sample = Sample("x", ll["item"], "A")
    assert ll_context(sample) == ll["context"]
    assert list(FinKnowTask(method="ll").continuations(sample)) == ll["continuations"]


def test_formulaeval_prompt_matches_the_golden():
    case = CASES["formulaeval/net_present_value"]
    sample = next(s for s in FormulaEvalTask().load(None) if s.id == case["id"])
    assert [m.content for m in formulaeval_messages(sample.input["stub"])] == case["messages"]


def test_messages_follow_the_pipeline_create_prompt(shared_data):
    """An independent rendering of prompt.py's create_prompt from the raw file."""
    raw = json.loads((shared_data / "bizbench/prompts/context_code.json").read_text("utf-8"))
    sample_q = raw["samples"][0]["question"]
    expected = [("system", raw["system_message"]),
                ("user", "Context:\n" + sample_q["context"] + "\n\nQuestion: " + sample_q["question"] + "\n"),
                ("assistant", raw["samples"][0]["answer"]),
                ("user", "Context:\nC\n\nQuestion: Q?\n")]
    prompt = load_prompt_file(shared_data / "bizbench/prompts/context_code.json")
    assert [(m.role, m.content) for m in prompt.messages({"question": "Q?", "context": "C"})] == expected


def test_render_question_formats():
    assert render_question({"question": "Q", "options": ["x", "y"]}) == "Question: Q\nA. x\nB. y"
    assert render_question({"question": "Q", "context": "C"}) == "Context:\nC\n\nQuestion: Q\n"
    assert render_question({"question": "Q"}) == "Q"


def test_every_task_prompt_file_exists_and_parses(shared_data):
    folder = shared_data / "bizbench" / "prompts"
    for styles in PROMPT_FILES.values():
        for name in styles.values():
            prompt = load_prompt_file(folder / name)
            assert prompt.system_message and len(prompt.samples) == 1 and prompt.resolution is None


# --- merge conflicts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, other_side_task", [("mc_cot.json", "FinKnow"), ("no_context_cot.json", "FinCode")])
def test_upstream_conflict_files_resolve_to_the_schema_side(shared_data, name, other_side_task):
    path = shared_data / "bizbench" / "prompts" / name
    text = path.read_text("utf-8")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # the upstream file really is broken
    sides = conflict_sides(text)
    assert json.loads(sides["ours"])["samples"][0]["question"]["task"] == other_side_task
    assert json.loads(sides["theirs"])["samples"][0]["question"]["task"] == "prompt"
    prompt = load_prompt_file(path)
    assert prompt.samples[0][0]["task"] == "prompt"
    assert "upstream/main" in prompt.resolution and other_side_task in prompt.resolution
    # the resolved file equals its clean counterpart where one exists (mc_cot -> finknow)
    if name == "mc_cot.json":
        clean = load_prompt_file(shared_data / "bizbench" / "prompts" / "finknow.json")
        assert prompt.messages({"question": "Q", "options": ["a"]}) == clean.messages({"question": "Q", "options": ["a"]})


def test_conflict_where_no_side_matches_is_an_error(tmp_path):
    text = ('{"system_message": "s", "samples": [{"question": {\n<<<<<<< HEAD\n"task": "A",\n=======\n'
            '"task": "B",\n>>>>>>> other\n"question": "q"}, "answer": "a"}]}\n')
    with pytest.raises(DataError, match="match the schema"):
        resolve_conflicts(text, tmp_path / "x.json")
    good = text.replace('"task": "B"', '"task": "prompt"')
    document, note = resolve_conflicts(good, tmp_path / "x.json")
    assert document["samples"][0]["question"]["task"] == "prompt" and "'other'" in note


def test_missing_prompt_folder_names_the_fix(tmp_path):
    task = numeric.TatqaETask()
    task._data_dir = tmp_path
    with pytest.raises(DataError, match="prompts=DIR"):
        task.prompt()
