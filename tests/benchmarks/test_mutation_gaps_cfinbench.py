"""Gaps found by mutation testing (`make mutation`, issue 19) in CFinBench scoring and extraction and in
the robust choice and verdict reader (extract/choices.py). Expected values are worked out by hand."""

from __future__ import annotations

import re

import pytest

from finharness.benchmarks.cfinbench.extraction import official_postprocess, read_reply
from finharness.benchmarks.cfinbench.scoring import ScoredItem, _metric, present_types, score_answer, summarise
from finharness.extract.choices import (
    FALSE,
    TRUE,
    UNPARSEABLE,
    Extraction,
    _alternation,
    extract_choice,
    extract_judgment,
    parse_options,
    prepare_reply,
)
from finharness.stats import Estimate

KEYS = [f"{e}.{s}" for e in ("official", "robust") for s in ("strict", "paper", "opencompass")]


def _item(question_type: str, category: str, value: float) -> ScoredItem:
    return ScoredItem(question_type, category, dict.fromkeys(KEYS, value), {"official": True, "robust": True})


def test_an_unknown_scoring_mode_is_named_in_the_error():
    with pytest.raises(ValueError, match=r"unknown scoring mode 'partial'; choose one of \('strict'"):
        score_answer("AB", "AB", "multi_choice", "partial")


def test_present_types_lists_the_types_found_in_the_official_order():
    items = [_item("judgment", "c1", 1.0), _item("single_choice", "c2", 0.0), _item("judgment", "c3", 0.0)]
    assert present_types(items) == ["single_choice", "judgment"]
    assert present_types([]) == []


def test_six_equal_category_weights_sum_to_exactly_one():
    # six categories, each 1/1 correct: 1/6 added six times is 0.9999999999999999 in floating point;
    # the published value is rounded to 12 decimals and reads 1.0
    items = [_item("single_choice", f"c{i}", 1.0) for i in range(6)]
    metrics = summarise(items, "official")
    assert metrics["strict.single"].value == 1.0
    assert metrics["strict.score"].value == 1.0


def test_metric_values_and_bounds_are_rounded_to_twelve_decimals():
    # one category, 3 of 7 correct: 3/7 = 0.428571428571428571... -> 0.428571428571
    items = [_item("single_choice", "c", float(i < 3)) for i in range(7)]
    metric = summarise(items, "official")["strict.single"]
    assert metric.value == 0.428571428571
    low, high = metric.ci95
    assert 0.0 < low < metric.value < high < 1.0  # a real interval, not rounded to whole numbers
    assert low == round(low, 12) and high == round(high, 12)
    assert (low, high) != (round(low, 11), round(high, 11))  # ...and not to fewer places either


def test_metric_keeps_the_estimates_variance():
    metric = _metric(Estimate(0.5, (0.4, 0.6), 10, 0.0025))
    assert (metric.value, metric.ci95, metric.n, metric.variance) == (0.5, (0.4, 0.6), 10, 0.0025)


def test_the_headline_extraction_mode_comes_first_unprefixed():
    items = [_item("single_choice", "c", 1.0)]
    for headline, other in (("robust", "official"), ("official", "robust")):
        names = list(summarise(items, headline))
        first_other = next(i for i, name in enumerate(names) if name.startswith(other + "."))
        assert names[0] == "strict.score"
        assert all("." not in name or name.split(".")[0] in ("strict", "paper", "opencompass")
                   for name in names[:first_other])
        assert all(name.startswith(other + ".") for name in names[first_other:])


# --- the verdict reader's alternation builder (extract/choices.py) --------------------------------

def _first(words: list[str], text: str) -> str | None:
    found = re.search(_alternation(words), text)
    return None if found is None else found.group(0)


def test_alternation_tries_longer_words_first():
    assert _first(["1", "12"], "12") == "12"
    assert _first(["yes", "no"], "no") == "no"  # several words: a plain '|' between them


def test_alternation_keeps_ascii_words_whole():
    assert _first(["true"], "is true.") == "true"
    assert _first(["true"], "untrue") is None
    assert _first(["true"], "trueness") is None


def test_alternation_keeps_one_character_cjk_verdicts_off_longer_words():
    assert _first(["对"], "对。") == "对"
    assert _first(["对"], "对于") is None  # '对' but not '对于'
    assert _first(["对"], "好") is None
    # the guard covers the whole CJK block, first and last code point included
    assert _first(["\u4e00"], "\u4e00\u4e2a") is None
    assert _first(["\u9fff"], "\u9fff\u4e00") is None
    # a one-character sign that is not CJK gets no such guard
    assert _first(["×"], "×错") == "×"


def test_alternation_does_not_read_correct_answer_phrases_as_verdicts():
    assert _first(["正确"], "正确。") == "正确"
    assert _first(["正确"], "正确的说法是") is None
    assert _first(["错误"], "错误答案") is None
    assert _first(["正确"], "好") is None
    assert _first(["不正确"], "不正确的说法") == "不正确"  # only the bare words carry the guard


# --- reading choices and verdicts (extract/choices.py, cfinbench/extraction.py) ----------------------

def test_options_without_a_letter_take_their_positions_letter():
    assert parse_options(["甲", "B. 乙", "  丙 "]) == {"A": "甲", "B": "乙", "C": "丙"}


def test_a_reply_is_read_after_its_last_reasoning_block():
    assert prepare_reply("<think>maybe A</think> The answer is Ｂ.") == "The answer is B."
    assert prepare_reply("<think>A</think>draft B</think> Ｃ ") == "C"
    assert prepare_reply("No reasoning: Ｄ") == "No reasoning: D"


def test_option_text_is_matched_without_its_final_full_stop():
    options = ["A. 利润表。", "B. 资产负债表。"]
    assert extract_choice("应编制资产负债表", options) == Extraction("B", "option_text")


def test_option_text_of_two_characters_counts_one_character_does_not():
    assert extract_choice("现金", ["A. 现金", "B. 存货"]) == Extraction("A", "option_text")
    assert extract_choice("是的", ["A. 是", "B. 否"]).answer is None


def test_option_text_naming_no_option_is_unparseable_for_multiple_choice_too():
    assert extract_choice("完全无关的回答", ["A. 甲乙", "B. 丙丁"], multiple=True) == Extraction(None, UNPARSEABLE)


def test_single_choice_is_the_default_and_takes_the_first_letter():
    assert extract_choice("答案：AC", ["A. 甲", "B. 乙", "C. 丙"]) == Extraction("A", "answer_cue/first")


def test_only_the_questions_letters_count():
    assert extract_choice("X", ["A. 甲", "B. 乙"]).answer is None
    assert extract_choice("答案：E", {}) == Extraction("E", "answer_cue")  # no options: A-E
    assert extract_choice("X", {}).answer is None


def test_a_bracketed_bare_verdict_is_read():
    assert extract_judgment("（对）") == Extraction(TRUE, "bare_verdict")
    assert extract_judgment("错。") == Extraction(FALSE, "bare_verdict")


def test_unknown_question_type_and_extraction_mode_are_named():
    with pytest.raises(ValueError, match=r"unknown question type 'essay'"):
        official_postprocess("A", "essay")
    with pytest.raises(ValueError, match=r"unknown extraction mode 'lenient'"):
        read_reply("A", "single_choice", ["A. 甲"], "lenient")
