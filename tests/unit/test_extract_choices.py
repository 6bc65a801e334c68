"""The robust choice and verdict reader (extract/choices.py): option text matched back to its letter (any case),
hedges, the verdict words' alternation, replies read after their reasoning. The edge cases below the first
section were found by mutation testing (`make mutation`); expected values are worked out by hand."""

from __future__ import annotations

import re

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

OPTIONS = ["A. Income statement", "B. Balance sheet", "C. Cash flow statement", "D. Statement of retained earnings"]


def test_option_text_in_other_case_maps_to_its_letter():
    found = extract_choice("The statement that reports assets at a point in time is the Balance Sheet.", OPTIONS)
    assert (found.answer, found.rule) == ("B", "option_text")


def test_no_option_named_stays_unparseable():
    found = extract_choice("It depends on the accounting standard used.", OPTIONS)
    assert found.answer is None and found.rule == "unparseable"


def test_a_hedge_between_letters_is_unparseable_not_its_first_letter():
    for reply in ("A or B?", "答案：A或C", "答案是 (B) or (D)", "The answer is C, or D"):
        found = extract_choice(reply, OPTIONS)
        assert (found.answer, found.rule, found.detail) == (None, "unparseable", "hedge"), reply
    for reply, letter in (("A. Oracle filings show it", "A"), ("答案：C。或者说现金流量表", "C"), ("B ordered first", "B")):
        assert extract_choice(reply, OPTIONS).answer == letter, reply


# --- the verdict reader's alternation builder -----------------------------------------------------

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


# --- reading choices and verdicts -----------------------------------------------------------------

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
