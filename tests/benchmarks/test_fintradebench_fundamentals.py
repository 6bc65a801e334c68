"""Fundamentals from inline-XBRL filings against the official FinTradeBench values (real data)."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from finharness.markets.fundamentals import (
    RATIOS,
    FundamentalsConfig,
    TickerFundamentals,
    compare_with_official,
    split_factors,
)


@pytest.fixture(scope="module")
def apple(shared_data):
    return TickerFundamentals(shared_data, "AAPL")


def test_apple_definitions_agree_with_official_quarters(shared_data):
    rows, side = compare_with_official(shared_data, "AAPL", alignment="quarter")
    table = {r.ratio: r for r in rows}
    assert len(side) >= 6
    for ratio in ("Cash Flow/Assets", "Sales/Assets", "Debt/Assets", "Debt/Equity", "Book/Price", "Dividend Yield"):
        assert table[ratio].compared >= 6 and table[ratio].within_1pct == 1.0, ratio
    assert table["Return on Equity"].median_relative_error < 0.01
    # the official files have no Earnings/Price and no Forecast Earnings/Price at all
    assert table["Earnings/Price"].official_available == 0 and table["Forecast Earnings/Price"].compared == 0


def test_point_in_time_uses_only_filed_filings(apple):
    # the 10-Q for the quarter ended 2024-12-28 was filed 2025-01-31
    before, on = apple.as_of(dt.date(2025, 1, 30)), apple.as_of(dt.date(2025, 1, 31))
    assert before.period_end == dt.date(2024, 9, 28) and on.period_end == dt.date(2024, 12, 28)
    assert on.filed == dt.date(2025, 1, 31)
    # Sales/Assets of that quarter: revenue 124,300 / assets 344,085 (millions), from the filing
    assert on.values["Sales/Assets"] == pytest.approx(124_300 / 344_085, rel=1e-6)
    assert math.isnan(on.values["Forecast Earnings/Price"])
    assert apple.as_of(dt.date(2023, 1, 3)) is None  # before the first filing nothing is known
    # market cap moves with the day's close, the statement numbers do not
    later = apple.as_of(dt.date(2025, 2, 14))
    assert later.values["Sales/Assets"] == on.values["Sales/Assets"]
    assert later.values["Book/Price"] != on.values["Book/Price"]


def test_daily_comparison_covers_the_official_range(shared_data):
    rows, side = compare_with_official(shared_data, "AAPL", alignment="daily")
    table = {r.ratio: r for r in rows}
    assert table["Sales/Assets"].compared > 300
    # daily values lag the official ones (filing date vs period end): agreement is lower than per quarter
    assert 0.3 < table["Sales/Assets"].within_1pct < 1.0
    assert set(RATIOS) == set(table)


def test_stock_split_detected_from_share_counts(shared_data):
    nvda = TickerFundamentals(shared_data, "NVDA")
    factors = split_factors(nvda.numbers)
    assert sorted(set(factors.values())) == [1.0, 10.0]  # the 10:1 split of June 2024
    assert nvda.shares_as_of(dt.date(2024, 6, 1)) == pytest.approx(24.6e9, rel=0.01)


def test_debt_definition_changes_debt_only(shared_data):
    meta = TickerFundamentals(shared_data, "META")
    day = dt.date(2025, 5, 2)
    plain, leased = (meta.as_of(day, FundamentalsConfig(debt=d)) for d in ("borrowings", "borrowings+leases"))
    printed = meta.as_of(day)  # default: the balance-sheet lines (META shows its operating leases there)
    assert leased.values["Debt/Assets"] > plain.values["Debt/Assets"]
    assert printed.values["Debt/Assets"] > plain.values["Debt/Assets"] and not printed.debt_fallback
    assert leased.values["Sales/Assets"] == plain.values["Sales/Assets"] == printed.values["Sales/Assets"]
