"""Track B: monthly price tables of one ticker, found by a temporal query, never reranked.

The daily prices are cut at the as-of date *before* anything is aggregated, so a month's high, close
and volume only ever include trading days on or before it (the month holding the as-of date is a
partial month, marked ``to MM-DD``). The temporal query is "the last ``months_per_table × count``
months before as-of": tables are consecutive blocks of ``months_per_table`` months counted back from
the as-of month, the most recent first, scored ``1 / (1 + i)`` for the i-th block.

Columns: month, open (first trading day's open), high, low, close (last trading day's close), return
(change of the adjusted close from the previous month's last trading day, so splits and dividends do
not show as moves), volume (shares traded in the month, in millions).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from finharness.data.errors import DataError
from finharness.markets.prices import as_of, price_column

HISTORY_FOLDER = Path("fintradebench") / "history_xlsx"
"""Where ``<TICKER>-history.xlsx`` lives under a data root."""


@dataclass(frozen=True)
class PriceTable:
    """One block of consecutive monthly rows."""

    ticker: str
    """Upper-case ticker."""

    first_month: str
    """``YYYY-MM`` of the oldest row."""

    last_date: str
    """ISO date of the last trading day in the table: never after the as-of date."""

    header: str
    """One line naming the ticker, the months and the columns."""

    rows: tuple[str, ...]
    """``' | '``-joined rows, oldest first."""

    score: float
    """Recency score: 1 for the block ending at as-of, 1/2 for the one before, …"""

    source: str
    """``<file name>#monthly <first>..<last month>``."""

    @property
    def text(self) -> str:
        return "\n".join((self.header, *self.rows))


def history_path(data_dir: str | Path, ticker: str) -> Path:
    path = Path(data_dir) / HISTORY_FOLDER / f"{ticker.upper()}-history.xlsx"
    if not path.is_file():
        raise DataError("price history not found", path=path,
                        hint=f"pass --data-dir DIR holding fintradebench/history_xlsx/{ticker.upper()}-history.xlsx")
    return path


def monthly_summary(prices: pd.DataFrame) -> pd.DataFrame:
    """One row per calendar month with data: open, high, low, close, return, volume, last_date."""
    months = prices.index.to_period("M")
    grouped = prices.groupby(months)
    table = pd.DataFrame({
        "open": grouped["open"].first(),
        "high": grouped["high"].max(),
        "low": grouped["low"].min(),
        "close": grouped["close"].last(),
        "volume": grouped["volume"].sum(min_count=1),
        "last_date": pd.Series(prices.index, index=prices.index).groupby(months).max(),
    })
    month_end_price = price_column(prices).groupby(months).last()
    table["return"] = month_end_price.pct_change()
    return table


def price_tables(prices: pd.DataFrame, ticker: str, as_of_date: dt.date, *, months_per_table: int = 6,
                 count: int = 2, source_name: str = "") -> list[PriceTable]:
    """The ``count`` most recent blocks of ``months_per_table`` months on or before ``as_of_date``."""
    visible = as_of(prices, as_of_date)  # point in time: cut daily rows before aggregating
    if visible.empty:
        return []
    summary = monthly_summary(visible)
    tables = []
    for block in range(count):
        stop = len(summary) - block * months_per_table
        if stop <= 0:
            break
        rows = summary.iloc[max(0, stop - months_per_table): stop]
        last_date = rows["last_date"].iloc[-1]
        first, last = str(rows.index[0]), str(rows.index[-1])
        lines = []
        for month, row in rows.iterrows():
            partial = month == summary.index[-1] and row["last_date"] < _last_weekday(month)
            label = f"{month} (to {last_date:%m-%d})" if partial else str(month)
            lines.append(" | ".join((label, _price(row["open"]), _price(row["high"]), _price(row["low"]),
                                     _price(row["close"]), _percent(row["return"]), _millions(row["volume"]))))
        header = (f"[{ticker} monthly prices {first}..{last}, last trading day {last_date:%Y-%m-%d}; "
                  "return = change of adjusted close; volume in millions of shares]\n"
                  "month | open | high | low | close | return | volume")
        tables.append(PriceTable(ticker=ticker, first_month=first, last_date=f"{last_date:%Y-%m-%d}",
                                 header=header, rows=tuple(lines), score=1.0 / (1 + block),
                                 source=f"{source_name}#monthly {first}..{last}"))
    return tables


def _last_weekday(month: pd.Period) -> pd.Timestamp:
    """The month's last Monday–Friday: a month whose data stops earlier is still running."""
    day = month.end_time.normalize()
    while day.weekday() >= 5:
        day -= pd.Timedelta(days=1)
    return day


def _price(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:,.2f}"


def _percent(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:+.1%}"


def _millions(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value / 1e6:,.1f}M"
