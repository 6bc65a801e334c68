"""retrieval/prices_track.py: monthly tables cut at the as-of date before aggregation."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from finharness.markets.prices import load_prices
from finharness.retrieval.prices_track import history_path, monthly_summary, price_tables


def _prices(days: pd.DatetimeIndex, close: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"open": close - 1, "high": close + 2, "low": close - 2, "close": close,
                         "adj_close": close / 2, "volume": np.full(len(days), 1e6)},
                        index=pd.DatetimeIndex(days, name="date"))


def test_monthly_summary_aggregates_each_month():
    days = pd.bdate_range("2024-01-01", "2024-02-29")
    prices = _prices(days, np.arange(len(days), dtype=float) + 100)
    summary = monthly_summary(prices)
    january, february = summary.iloc[0], summary.iloc[1]
    assert january["open"] == 99 and january["close"] == 122 and january["high"] == 124 and january["low"] == 98
    assert january["volume"] == 23e6 and january["last_date"] == pd.Timestamp("2024-01-31")
    # return is on the adjusted close (here half the close)
    assert february["return"] == pytest.approx((143 / 2) / (122 / 2) - 1)  # 23 trading days in Jan, 21 in Feb
    assert np.isnan(january["return"])


def test_tables_never_see_prices_after_as_of():
    days = pd.bdate_range("2023-01-02", "2024-12-31")
    close = np.full(len(days), 50.0)
    close[days > pd.Timestamp("2024-06-14")] = 999.0  # a spike after the as-of date
    tables = price_tables(_prices(days, close), "ACME", dt.date(2024, 6, 14), months_per_table=3, count=2)
    assert [t.last_date for t in tables] == ["2024-06-14", "2024-03-29"]
    assert all(t.last_date <= "2024-06-14" for t in tables)
    text = "\n".join(t.text for t in tables)
    assert "999" not in text and "1,001" not in text  # neither the close nor the high (999 + 2) leaks
    assert tables[0].rows[-1].startswith("2024-06 (to 06-14) | 49.00 | 52.00 | 48.00 | 50.00")
    assert [t.score for t in tables] == [1.0, 0.5]
    assert tables[0].first_month == "2024-04" and tables[1].first_month == "2024-01"


def test_no_rows_before_as_of_gives_no_tables():
    days = pd.bdate_range("2024-01-01", "2024-03-01")
    assert price_tables(_prices(days, np.ones(len(days))), "ACME", dt.date(2023, 1, 1)) == []


def test_real_history_last_row_matches_the_daily_close(shared_data: Path):
    daily = load_prices(history_path(shared_data, "AAPL"))
    tables = price_tables(daily, "AAPL", dt.date(2024, 8, 15), source_name="AAPL-history.xlsx")
    last_close = daily.loc[:"2024-08-15", "close"].iloc[-1]
    assert tables[0].last_date == "2024-08-15"
    assert tables[0].rows[-1].split(" | ")[4] == f"{last_close:,.2f}"
    assert tables[0].source == "AAPL-history.xlsx#monthly 2024-03..2024-08"
