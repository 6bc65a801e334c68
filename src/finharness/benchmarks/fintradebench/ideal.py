"""Precomputed contexts ('ideal RAG'): trading signals and fundamentals of a ticker for a question's window.

Format: build_contexts_for_ticker of generate_benchmark_responses.py, line for line --
    [AAPL] Trading/Price Data 2025-07-01 → 2025-09-30
    - AdjClose: first=..., last=..., pct_change=...%
    - Indicators: MA_20=..., MACD=..., ... (the last value in the window of each signal)
    [AAPL] Fundamentals (median in window):
      * F_Cash Flow/Assets: 0.0841  (the median over the window's trading days; the release's nine
        FUNDAMENTALS_COLS, without Forecast Earnings/Price)
and '[T] No data available for START → END.' when the window has no rows.

Point in time: the window is window_start..as_of of the question; signals come from
`markets.signals.compute_signals` on the prices up to as_of (a signal only looks back, so this is the
value the release's full-history file holds on those days); fundamentals are, per day, the ratios known
from filings filed by that day (`markets.fundamentals`, option fundamentals='filings', the default) or
the official per-day values (fundamentals='official'; these start each quarter at its period end,
before the filing was public -- a look-ahead the point-in-time default avoids).

Prices: fintradebench/history_xlsx/<T>-history.xlsx (to 2025-10), else the NASDAQ-100 export
nasdaq100_ohlcv/nasdaq_com_2014_2024/<T>.csv (to 2024-03). Questions about no single company
(universe, group) use the release's RAG fallback (FALLBACK_LEADERS of run_snowflake_rag_pipeline.py)
restricted to tickers with data -- or the group's members with data.
"""

from __future__ import annotations

import datetime as dt
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import pandas as pd

from ...markets.fundamentals import RATIOS, TickerFundamentals, load_official
from ...markets.prices import load_prices, price_column
from ...markets.signals import SIGNAL_COLUMNS, compute_signals
from ...util import format_number

HISTORY_FOLDER = Path("fintradebench") / "history_xlsx"
NASDAQ_FOLDER = Path("nasdaq100_ohlcv") / "nasdaq_com_2014_2024"
FILINGS_FOLDER = Path("fintradebench") / "SEC_Filings"

FALLBACK_LEADERS: tuple[str, ...] = ("AAPL", "MSFT", "NVDA", "AMZN", "GOOG", "META", "TSLA")
"""run_snowflake_rag_pipeline.py FALLBACK_LEADERS (GOOGL written GOOG, the class our data holds)."""

CONTEXT_FUNDAMENTALS: tuple[str, ...] = tuple(r for r in RATIOS if r != "Forecast Earnings/Price")
"""The release's FUNDAMENTALS_COLS (its context never shows Forecast Earnings/Price)."""

FundamentalsSource = Literal["filings", "official"]


@dataclass(frozen=True)
class IdealContext:
    """The two context strings for one question, and what they cover."""

    trading: str
    fundamental: str
    tickers: tuple[str, ...]
    """Tickers shown."""
    missing: tuple[str, ...]
    """Tickers asked for that have no data in the window."""
    last_date: str | None
    """The latest date any shown value comes from (never after as-of)."""


class MarketData:
    """Prices, signals and fundamentals of the data root, loaded once per ticker (thread-safe)."""

    def __init__(self, data_dir: str | Path, fundamentals: FundamentalsSource = "filings"):
        self.data_dir = Path(data_dir)
        self.fundamentals_source = fundamentals
        self._lock = threading.Lock()
        self._prices: dict[str, pd.DataFrame | None] = {}
        self._fundamentals: dict[str, TickerFundamentals | None] = {}
        self._official: dict[str, pd.DataFrame | None] = {}

    def price_file(self, ticker: str) -> Path | None:
        for path in (self.data_dir / HISTORY_FOLDER / f"{ticker}-history.xlsx",
                     self.data_dir / NASDAQ_FOLDER / f"{ticker}.csv"):
            if path.is_file():
                return path
        return None

    def prices(self, ticker: str) -> pd.DataFrame | None:
        with self._lock:
            if ticker not in self._prices:
                path = self.price_file(ticker)
                self._prices[ticker] = load_prices(path) if path else None
            return self._prices[ticker]

    def has_filings(self, ticker: str) -> bool:
        folder = self.data_dir / FILINGS_FOLDER
        return folder.is_dir() and any(p.is_dir() and p.name.upper() == ticker for p in folder.iterdir())

    def tickers_with_prices(self) -> list[str]:
        names = {p.name.split("-history")[0].upper() for p in (self.data_dir / HISTORY_FOLDER).glob("*-history.xlsx")}
        names |= {p.stem.upper() for p in (self.data_dir / NASDAQ_FOLDER).glob("*.csv")}
        return sorted(n for n in names if n.isalpha() and n not in ("README", "LICENSE"))

    def covers(self, ticker: str, as_of: dt.date, rows_needed: int = 1) -> bool:
        """The price file has `rows_needed` rows up to as_of and reaches within 7 days of it."""
        prices = self.prices(ticker)
        if prices is None:
            return False
        upto = prices.index[prices.index <= pd.Timestamp(as_of)]
        return len(upto) >= rows_needed and (pd.Timestamp(as_of) - upto[-1]).days <= 7

    def window_closes(self, ticker: str, start: dt.date, as_of: dt.date) -> pd.Series | None:
        """Adjusted closes from `start` to `as_of`, both included (None without a price file)."""
        prices = self.prices(ticker)
        return None if prices is None else price_column(prices.loc[pd.Timestamp(start): pd.Timestamp(as_of)]).dropna()

    def window_change(self, ticker: str, start: dt.date, as_of: dt.date) -> float | None:
        """The adjusted close's change over the window, as a fraction (the ideal context's pct_change / 100);
        None without two prices in it."""
        adj = self.window_closes(ticker, start, as_of)
        if adj is None or len(adj) < 2 or not float(adj.iloc[0]):
            return None
        return float(adj.iloc[-1]) / float(adj.iloc[0]) - 1.0

    def fundamentals_frame(self, ticker: str, dates: Sequence[pd.Timestamp]) -> pd.DataFrame | None:
        """Ratios on the given dates, from the configured source (None when it has nothing for the ticker)."""
        if self.fundamentals_source == "official":
            with self._lock:
                if ticker not in self._official:
                    try:
                        self._official[ticker] = load_official(self.data_dir, ticker)
                    except Exception:  # no official file for this ticker: shown as 'No fundamental data'
                        self._official[ticker] = None
                official = self._official[ticker]
            return None if official is None else official.reindex(pd.DatetimeIndex(dates))
        with self._lock:
            if ticker not in self._fundamentals:
                self._fundamentals[ticker] = (TickerFundamentals(self.data_dir, ticker) if self.has_filings(ticker)
                                              else None)
            source = self._fundamentals[ticker]
        if source is None:
            return None
        rows = []
        for day in dates:
            row = source.as_of(day.date())
            rows.append({r: (row.values[r] if row else math.nan) for r in RATIOS})
        return pd.DataFrame(rows, index=pd.DatetimeIndex(dates))

    def ticker_context(self, ticker: str, start: dt.date, as_of: dt.date) -> tuple[str, str, str | None]:
        """(trading, fundamental, last date shown) for one ticker -- build_contexts_for_ticker's layout."""
        prices = self.prices(ticker)
        window_note = f"{start.isoformat()} → {as_of.isoformat()}"
        if prices is None:
            message = f"[{ticker}] No data available for {window_note}.\n"
            return message, message, None
        visible = prices.loc[: pd.Timestamp(as_of)]  # point in time: nothing after as-of is computed on
        signals = compute_signals(visible)
        signals.index = pd.DatetimeIndex(signals["Date"])
        window = signals.loc[pd.Timestamp(start):]
        if window.empty:
            message = f"[{ticker}] No data available for {window_note}.\n"
            return message, message, None
        adj = self.window_closes(ticker, start, as_of)
        first, last = (float(adj.iloc[0]), float(adj.iloc[-1])) if len(adj) else (math.nan, math.nan)
        change = (last - first) / first * 100.0 if first else math.nan
        values = {}
        for column in SIGNAL_COLUMNS:
            series = window[column].dropna()
            values[column] = float(series.iloc[-1]) if not series.empty else math.nan
        trading = "\n".join([
            f"[{ticker}] Trading/Price Data {window_note}",
            f"- AdjClose: first={first:.4f}, last={last:.4f}, pct_change={change:.2f}%",
            "- Indicators: " + ", ".join(f"{k}={format_number(v, 4, missing='NA')}" for k, v in values.items()),
        ]) + "\n"
        lines = [f"[{ticker}] Fundamentals (median in window):"]
        frame = self.fundamentals_frame(ticker, list(window.index))
        if frame is None:
            lines.append("  * No fundamental data found in this window.")
        else:
            medians = {r: float(np.nanmedian(frame[r])) if np.isfinite(frame[r]).any() else math.nan
                       for r in CONTEXT_FUNDAMENTALS}
            lines += [f"  * F_{r}: {format_number(v, 4, missing='NA')}" for r, v in medians.items()]
            if all(not math.isfinite(v) for v in medians.values()):
                lines.append("  * No fundamental data found.")
        return trading, "\n".join(lines) + "\n", window.index[-1].date().isoformat()

    def context(self, tickers: Sequence[str], start: dt.date, as_of: dt.date) -> IdealContext:
        parts = [self.ticker_context(t, start, as_of) for t in tickers]
        missing = tuple(t for t, p in zip(tickers, parts) if p[2] is None)
        dates = [p[2] for p in parts if p[2]]
        return IdealContext("\n".join(p[0] for p in parts).strip(), "\n".join(p[1] for p in parts).strip(),
                            tuple(tickers), missing, max(dates) if dates else None)

    def context_tickers(self, tickers: Sequence[str], group: Sequence[str] | None,
                        as_of: dt.date) -> tuple[tuple[str, ...], bool]:
        """(tickers to show, fallback used): named tickers as they are; else the group's or the release's
        fallback leaders that have prices at as_of."""
        if tickers:
            return tuple(tickers), False
        pool = group if group else FALLBACK_LEADERS
        return tuple(t for t in pool if self.covers(t, as_of)), True
