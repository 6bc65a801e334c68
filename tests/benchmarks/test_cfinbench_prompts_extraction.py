"""CFinBench prompts (golden strings) and the two extraction modes (official quirks, robust cascade)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from finharness.benchmarks.cfinbench.extraction import official_postprocess, read_gold, read_reply
from finharness.benchmarks.cfinbench.prompts import (
    FEW_SHOT_NOTE,
    TEMPLATES,
    instruction,
    loglikelihood_continuation,
    official_loglikelihood_string,
    right_truncate,
)
from finharness.benchmarks.cfinbench.task import CFinBenchTask

from .test_cfinbench_task import write_exam

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
PROMPTS = json.loads((GOLDEN / "cfinbench_prompts.json").read_text(encoding="utf-8"))["cases"]
EXTRACTION = json.loads((GOLDEN / "cfinbench_extraction_cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", PROMPTS, ids=lambda c: f"{c['id']}-{c['method']}-{c['shots']}shot")
def test_prompt_is_the_official_string(case, tmp_path):
    task = CFinBenchTask(shots=case["shots"], method=case["method"],
                         **({"types": case["id"].split("/")[1]} if case["method"] == "ll" else {}))
    samples = {s.id: s for s in task.load(write_exam(tmp_path))}
    prompt = task.prompt(samples[case["id"]])
    assert prompt == case["prompt"]
    for letter, official in case.get("official_strings", {}).items():
        # one shared context + ' X' is exactly the official PPL string for option X
        assert prompt + loglikelihood_continuation(letter) == official


def test_few_shot_note_placement():
    for question_type, template in TEMPLATES.items():
        plain = instruction(question_type, "金融学")
        few = instruction(question_type, "金融学", few_shot=True)
        assert few.replace(FEW_SHOT_NOTE, "") == plain
        anchor = "题目如下：" if question_type == "judgment" else "\n题目如下："
        assert few.endswith(FEW_SHOT_NOTE + anchor)
    # the release PPL template is a raw f-string: a literal backslash-n after the instruction
    assert official_loglikelihood_string("single_choice", "金融学", "Q", "C").endswith("题目如下：\\nQ\n答案: C")


def test_right_truncate_keeps_the_longest_fitting_prefix():
    count = len  # one token per character
    assert right_truncate("abcdef", 10, count) == "abcdef"
    assert right_truncate("abcdef", 4, count) == "abcd"
    assert right_truncate("abcdef", 4, lambda text: None) is None
    # a tokenizer that counts pairs of characters: 5 tokens fit 10 characters
    assert right_truncate("x" * 25, 5, lambda text: (len(text) + 1) // 2) == "x" * 10


# --- official extraction: the quirks, reproduced ---------------------------------------------

@pytest.mark.parametrize("reply, question_type, expected", [
    ("The answer is B", "single_choice", "T"),
    ("答案：B。", "single_choice", "B"),
    ("我不知道", "single_choice", ""),
    ("不正确", "judgment", "正确"),
    ("答案：错误", "judgment", "错误"),
    ("答案：A、C", "multi_choice", "AC"),
    ("答案: A D", "multi_choice", "AD"),
    ("Answer: ACD", "multi_choice", "A"),  # 'Answer' -> 'A' is the first [A-E]+ run
])
def test_official_postprocess_quirks(reply, question_type, expected):
    assert official_postprocess(reply, question_type) == expected


def test_gold_answers_go_through_the_same_steps():
    assert read_gold("A,C,D", "multi_choice", "official") == "ACD"
    assert read_gold("DCA", "multi_choice", "official") == "DCA"
    assert read_gold("DCA", "multi_choice", "robust") == "ACD"
    assert read_gold("正确", "judgment", "official") == "正确"


# --- both modes on the golden cases -----------------------------------------------------------

def test_golden_has_enough_cases_of_every_type():
    cases = EXTRACTION["cases"]
    assert len(cases) >= 30
    assert {c["type"] for c in cases} == {"single_choice", "multi_choice", "judgment"}
    assert any(c["robust"] is None for c in cases)


@pytest.mark.parametrize("case", EXTRACTION["cases"], ids=lambda c: f"{c['type']}:{c['reply'][:24]}")
def test_golden_extraction(case):
    options = EXTRACTION["options"] if case["type"] != "judgment" else []
    robust = read_reply(case["reply"], case["type"], options, "robust")
    official = read_reply(case["reply"], case["type"], options, "official")
    assert (robust.answer or None, robust.rule) == (case["robust"], case["rule"])
    assert official.answer == case["official"]
    assert official.rule == ("official" if case["official"] else "unparseable")


def test_unknown_question_type_and_extraction_mode_are_named():
    with pytest.raises(ValueError, match=r"unknown question type 'essay'"):
        official_postprocess("A", "essay")
    with pytest.raises(ValueError, match=r"unknown extraction mode 'lenient'"):
        read_reply("A", "single_choice", ["A. 甲"], "lenient")
