"""FinTradeBench questions: category from the id prefix, indicator canonicalisation, ticker/date resolution."""

from __future__ import annotations

import datetime as dt

import pytest

from finharness.benchmarks.fintradebench.indicators import (
    CANONICAL,
    canonical,
    f1_official,
    f1_proper,
    named_indicators,
    split_indicators,
)
from finharness.benchmarks.fintradebench.questions import (
    SEED_FILE,
    category_of,
    read_questions,
    resolve_date,
    resolve_tickers,
    summarise,
)
from finharness.data.errors import DataError


@pytest.mark.parametrize("qid, category", [("F1", "F"), ("F50", "F"), ("FT1", "FT"), ("FT12", "FT"), ("T7", "T"),
                                           ("ft3", "FT"), ("FT40-v2", "FT"), ("F4-v1", "F")])
def test_category_from_id_prefix_reads_ft_before_f(qid, category):
    assert category_of(qid) == category


@pytest.mark.parametrize("qid", ["X1", "F", "FTT1", "TF3", "", "V2"])
def test_unknown_id_is_a_data_error(qid):
    with pytest.raises(DataError):
        category_of(qid, path="q.csv", line=3)


def test_seed_indicator_spellings_collapse_to_twenty_canonical_names(shared_data):
    import csv

    with (shared_data / SEED_FILE).open(encoding="utf-8") as handle:
        spellings = {part.strip() for row in csv.DictReader(handle) for part in row["golden_indicators"].split("|")}
    assert len(spellings) == 25
    assert {canonical(s) for s in spellings} == set(CANONICAL)
    assert len(CANONICAL) == 20
    assert canonical("ROA") == canonical("Return on Assets") == "Return on Assets"
    assert canonical("medium-term momentum") == canonical("Medium Term Momentum")
    assert split_indicators("ROA|Return on Assets|RSI") == ("Return on Assets", "RSI")
    with pytest.raises(ValueError, match="unknown golden indicator"):
        canonical("Beta")


def test_seed_questions_resolve_with_reported_counts(shared_data):
    questions = read_questions(shared_data / SEED_FILE)
    summary = summarise(questions)
    assert summary.categories == {"F": 50, "FT": 50, "T": 50}
    assert summary.distinct_indicators == 20
    assert sum(summary.scopes.values()) == 150
    # every T question names no company: the NASDAQ-100 universe
    assert all(q.tickers.scope == "universe" for q in questions if q.category == "T")
    by_id = {q.id: q for q in questions}
    assert by_id["F1"].tickers.tickers == ("AAPL",) and by_id["F1"].date.as_of == dt.date(2025, 9, 30)
    assert by_id["F12"].tickers.tickers == ("AAPL", "MSFT", "GOOG")
    assert by_id["F17"].tickers.tickers == ("CSCO",)  # a name the release's alias map lacks
    assert by_id["F23"].tickers.scope == "group"
    assert by_id["FT15"].tickers.tickers == ("PYPL",)
    assert summary.unresolved == ("F50",)  # "which tech company": counted, never guessed
    assert "traditional automakers" in by_id["F3"].tickers.unmapped
    assert summary.scopes == {"single": 80, "multi": 15, "group": 1, "universe": 53, "unresolved": 1}
    assert summary.date_rules["month"] == 59 and summary.date_rules["quarter"] == 32
    assert all(q.date.as_of <= dt.date(2025, 9, 30) for q in questions)


@pytest.mark.parametrize("text, as_of, rule", [
    ("As of July 2025, x?", dt.date(2025, 7, 31), "month"),
    ("In Q3 2025, x?", dt.date(2025, 9, 30), "quarter"),
    ("in late Q2 2024", dt.date(2024, 6, 30), "quarter"),
    ("in mid-2025?", dt.date(2025, 6, 30), "half"),
    ("the first half of 2025", dt.date(2025, 6, 30), "half"),
    ("As of September 15, 2025, x", dt.date(2025, 9, 15), "day"),
    ("For the week of September 8, 2025", dt.date(2025, 9, 12), "week-of"),
    ("in the summer of 2025", dt.date(2025, 8, 31), "summer"),
    ("based on 2025 data", dt.date(2025, 9, 1), "year"),
    ("based on 2019 data", dt.date(2019, 12, 31), "year"),
    ("after its 2024-2025 acquisition spree", dt.date(2025, 9, 1), "year"),
    ("Is Apple cheap?", dt.date(2025, 9, 1), "default"),
])
def test_date_rules(text, as_of, rule):
    resolved = resolve_date(text)
    assert (resolved.as_of, resolved.rule) == (as_of, rule)
    assert resolved.window_start <= resolved.as_of


def test_ticker_symbols_and_ambiguous_words():
    assert resolve_tickers("Is MSFT cheaper than AMD?").tickers == ("MSFT", "AMD")
    assert resolve_tickers("Which stocks break out ON volume?", category="T").tickers == ()
    assert resolve_tickers("Is the weather nice?").scope == "unresolved"


def test_bad_rows_name_file_and_line(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('question_id,question,golden_indicators\nF1,"Is Apple ok\nin 2025?",ROA\nZ2,What?,RSI\n',
                    encoding="utf-8")
    with pytest.raises(DataError, match=r"q.csv:4"):
        read_questions(path)
    path.write_text("question_id,question,golden_indicators\nF1,Is Apple ok?,Beta\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"q.csv:2: unknown golden indicator"):
        read_questions(path)


def test_f1_official_rule_by_hand():
    # found 2 of 5: recall 0.4, precision 1 (the release's rule) -> F1 = 2*0.4/1.4
    assert f1_official(2, 5).f1 == pytest.approx(0.8 / 1.4)
    assert f1_official(0, 5).f1 == 0.0
    assert f1_official(1, 0).recall == 1.0  # a total of 0 counts as 1


def test_f1_proper_by_hand():
    answer = "ROE is 35% and the RSI is 82, while P/E and the 20-day moving average look stretched."
    named = named_indicators(answer)
    assert set(named) == {"Return on Equity", "RSI", "Earnings/Price", "MA"}
    golden = ("Return on Equity", "Return on Assets", "RSI")
    score = f1_proper(named, golden)
    assert score.precision == pytest.approx(2 / 4) and score.recall == pytest.approx(2 / 3)
    assert score.f1 == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert f1_proper((), golden).f1 == 0.0
    assert "EMA" in named_indicators("the exponential moving average") and \
        "MA" not in named_indicators("the exponential moving average")
