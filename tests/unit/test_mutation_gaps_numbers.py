"""Gaps found by mutation testing (`make mutation`, issue 19) in BizBench's number reading, the 1 % rule and
the gold's unit that scale-aware matching uses. Expected values are worked out by hand in the comments."""

from __future__ import annotations

import pytest

from finharness.benchmarks.bizbench.scoring import ProgramJob, ProgramRunner, gold_scale
from finharness.extract.numbers import (
    UNPARSEABLE,
    NumberReading,
    find_numbers,
    parse_number,
    read_number,
    read_official,
    read_robust,
)


@pytest.mark.parametrize("question, metadata, expected", [
    ("What was revenue?", {"scale": "Million"}, "million"),      # TAT-QA's scale, lower-cased
    ("What was revenue?", {"scale": 6}, "million"),              # SEC-Num's XBRL scale
    ("What was revenue?", {"scale": 3}, "thousand"),
    ("What was the margin?", {"scale": -2}, "percent"),
    ("What was revenue?", {"scale": 0}, ""),                     # units: no scale
    ("Revenue (in millions)", {"scale": True}, "million"),       # a bool is not an XBRL scale: the question decides
    ("Revenue (in millions)", {"scale": ""}, "million"),
    ("Revenue (in millions)", {}, "million"),
    ("Net income (Thousand)", {}, "thousand"),
    ("Gross margin (percent)", {}, "percent"),
    ("Revenue (millions) in 2019?", {}, ""),                     # only a trailing note counts
    ("What was revenue?", {}, ""),
    (None, {}, ""),
])
def test_gold_scale(question, metadata, expected):
    assert gold_scale(question, metadata) == expected


# --- reading (extract/numbers.py) -------------------------------------------------------------------

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


def test_program_runner_counts_each_distinct_program_once():
    class Sandbox:  # stands in for finharness.sandbox.Sandbox: the counting is the runner's
        isolation = "stub"

        def run(self, code, **options):
            return ("ran", code)

    runner = ProgramRunner()
    runner._sandbox = Sandbox()
    first = runner.run(ProgramJob("x = 1", cache_key="s1"))
    assert runner.run(ProgramJob("x = 1", cache_key="s1")) is first  # served from memory
    runner.run(ProgramJob("x = 2", cache_key="s1"))
    runner.run(ProgramJob("x = 1", cache_key="s2"))  # same code, other inputs: runs again
    assert runner.executions == 3
