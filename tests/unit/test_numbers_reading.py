"""finharness.extract.numbers: the golden cases, and the properties a scorer relies on."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from finharness.extract.numbers import (
    UNPARSEABLE,
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
