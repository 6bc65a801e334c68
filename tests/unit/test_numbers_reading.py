"""finharness.extract.numbers: the golden cases, and the properties a scorer relies on."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from finharness.extract.numbers import (
    UNPARSEABLE,
    NumberReading,
    exact_round5,
    find_numbers,
    match_number,
    parse_number,
    read_number,
    read_official,
    read_robust,
    within_relative,
)

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "bizbench_numbers.json").read_text(encoding="utf-8"))
CASES = GOLDEN["cases"]


def _case_id(case: dict) -> str:
    return f"{case['kind']}-{case.get('mode', '')}-{case.get('text', case.get('reply'))!r}"


def test_golden_file_covers_the_required_cases():
    texts = {c.get("text") for c in CASES} | {c.get("reply") for c in CASES}
    for required in ("(1,234)", "−5.2%", "$3.4bn", "1.2万", "3亿", "12 million", "USD 1,000"):
        assert required in texts
    assert len(CASES) >= 40
    assert any(c["kind"] == "read" and c["mode"] == "official" and c["reply"].count("[[") == 2 for c in CASES)


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "parse"], ids=_case_id)
def test_parse_number_golden(case):
    reading = parse_number(case["text"])
    assert reading.value == case["value"]
    assert reading.parsed == (case["value"] is not None)


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "read"], ids=_case_id)
def test_read_number_golden(case):
    reading = read_number(case["reply"], case["mode"])
    assert reading.value == case["value"]
    assert reading.rule == case["rule"]


@pytest.mark.parametrize("case", [c for c in CASES if c["kind"] == "match"], ids=_case_id)
def test_match_number_golden(case):
    result = match_number(read_number(case["reply"], case["mode"]), case["gold"], mode=case["mode"],
                          gold_scale=case["gold_scale"])
    assert (result.correct, result.rule) == (case["correct"], case["rule"])


def test_readings_record_the_normalisations_applied():
    reading = parse_number("($1,234.5)")
    assert reading.value == -1234.5
    assert {"currency:$", "thousands_separator", "parenthesised_negative"} <= set(reading.notes)
    scaled = parse_number("−3.4 bn")
    assert scaled.value == pytest.approx(-3.4e9) and scaled.mantissa == -3.4 and scaled.multiplier == 1e9
    assert {"unicode_minus", "scale:bn"} <= set(scaled.notes)
    assert parse_number("45%").percent and not parse_number("45").percent


def test_unparseable_readings_say_why_and_carry_no_value():
    for reply, detail in (("[[1]]\n[[2]]", "multiple_brackets"), ("no brackets", "no_brackets"),
                          ("[[abc]]", "not_a_float")):
        reading = read_official(reply)
        assert reading.rule == UNPARSEABLE and reading.value is None and reading.detail == detail
    assert read_robust("[[1]] then [[2]]").detail == "brackets_conflict"


def test_find_numbers_skips_digits_glued_to_letters():
    values = [r.value for r in find_numbers("In Q3 FY2024 revenue was $5.2 billion, up 12% on 4.6bn.")]
    assert values == [pytest.approx(5.2e9), 12.0, pytest.approx(4.6e9)]


def test_official_and_robust_modes_differ_only_where_documented():
    assert read_official("[[1,234]]").value == read_robust("[[1,234]]").value == 1234.0
    assert read_official("[[(1,234)]]").value is None and read_robust("[[(1,234)]]").value == -1234.0
    with pytest.raises(ValueError):
        read_number("[[1]]", "lenient")  # type: ignore[arg-type]


def test_match_rules_within_one_percent_and_round5():
    assert within_relative(101.0, 100.0) and not within_relative(101.01, 100.0)
    assert within_relative(0.0, 0.0) and not within_relative(1e-9, 0.0)
    assert not within_relative(math.nan, 1.0) and not within_relative(math.inf, 1.0)
    assert exact_round5(1.000004, 1.0) and not exact_round5(1.00001, 1.0)
    reading = parse_number("100.5")
    assert match_number(reading, 100.0).correct
    assert not match_number(reading, 100.0, rule="exact_round5").correct


# --- edges found by mutation testing (make mutation) ----------------------------------------------

def test_official_readings_keep_their_span_and_mantissa():
    assert read_official("The answer is [[$1,234.5]]") == NumberReading(
        value=1234.5, rule="official_brackets", span="$1,234.5", mantissa=1234.5)
    assert read_official("[[C]]") == NumberReading(value=2.0, rule="official_letter", span="C", mantissa=2.0)
    assert read_official("[[about 5]]") == NumberReading(value=None, rule=UNPARSEABLE, span="about 5",
                                                         detail="not_a_float")


def test_official_empty_brackets_read_zero_as_upstream():
    # upstream: '' in "ABCD" is True and "ABCD".index('') is 0
    assert read_official("[[]]").value == 0.0


def test_parsed_numbers_record_span_scale_and_percent():
    reading = parse_number("  $3.4bn ")
    assert (reading.value, reading.span, reading.multiplier) == (pytest.approx(3.4e9), "$3.4bn", 1e9)
    assert parse_number("12%").notes == ("percent",)
    assert parse_number("$1.2T").value == pytest.approx(1.2e12)  # 'T' is read in upper case only
    assert find_numbers("5 and 6")[0].rule == "number"


def test_digits_glued_to_a_letter_at_the_start_are_a_name():
    assert find_numbers("Q3") == []
    assert [r.value for r in find_numbers("Q3 revenue 7")] == [7.0]


def test_robust_reading_uses_the_text_after_the_last_reasoning_block():
    assert read_robust("<think>about 1</think> The answer is 42 million").value == pytest.approx(42e6)
    reading = read_robust("<think>[[1]]</think>draft [[2]]</think> [[3]]")
    assert (reading.value, reading.rule) == (3.0, "brackets")


def test_unreadable_brackets_say_why():
    several = read_robust("[[between 5 and 6]]")
    assert (several.value, several.detail, several.span) == (None, "several_numbers", "between 5 and 6")
    none = read_robust("[[n/a]]")
    assert (none.value, none.detail, none.span) == (None, "not_a_number", "n/a")
    conflict = read_robust("[[1]] and [[2]]")
    assert (conflict.detail, conflict.span) == ("brackets_conflict", "1 | 2")
    assert read_robust("I cannot tell.").detail == "no_number_found"


def test_an_answer_cue_reads_its_own_line_only():
    # the cue's line has no number; a number two lines further down is not its answer
    assert not read_robust("Answer: see below\nRevenue 42\nCost 7").parsed
    assert read_robust("Answer: 42\nCost 7").value == 42.0


def test_read_number_is_robust_by_default_and_names_a_bad_mode():
    assert read_number("Answer: 42").rule == "answer_cue"
    with pytest.raises(ValueError, match=r"unknown number-reading mode 'lenient'"):
        read_number("[[1]]", "lenient")  # type: ignore[arg-type]
