"""The numerical audit: every number an answer states, checked against the data for its ticker and date.

Deterministic first (`audit_answer`):
1. Numbers: every number expression of the answer (extract.numbers.find_numbers: %, $, bn/million/...,
   '(1.2)' negatives, unicode minus), with a trailing 'x'/'×' read as a multiple ('35x'). Not claims:
   dates and years (1900-2100 without a unit), window lengths ('20-day', '12-month', '52-week'),
   numbers inside a metric's own name ('MA_20', 'Momentum_5D'), indicator parameters right after a
   name ('RSI (14)', 'MACD (12, 26, 9)'), list markers ('1.' opening a line), thresholds and
   comparisons ('above 70', 'below the 30 level', 'between 30 and 70', '> 1'), and unitless integers
   that no metric claims ('3 sub-questions').
2. Metric: the nearest metric named before the number in the same sentence, at most `MAX_GAP`
   characters before it, whose kind of value fits the number (a percentage is never a price, a
   multiple never a fraction; if the nearest does not fit, the next nearest is tried). Names are
   read, in this order: the data's own column names (SIGNAL_COLUMNS: 'MA_20', 'Momentum_20D', ...,
   'AdjClose', 'pct_change'), the canonical indicators of indicators.py (SYNONYMS), narrowed to the
   data's column ('20-day moving average' -> MA_20, 'P/E' -> 1 / Earnings/Price, 'mean reversion' ->
   Mean_Reversal_60D, 'short-term momentum' -> Momentum_5D or Momentum_20D), then price words
   (close, open, high, low, volume, market cap). `metric` is the data-level name ('RSI', 'MA_20',
   'Return on Equity', 'P/E', 'close'); a name the data lacks ('Volatility', '50-day moving average',
   '52-week high') is NOT_FOUND.
3. Date: the question's as-of date, unless the claim's sentence names exactly one date ('September
   12, 2025', '2025-09-12', 'July 2025' -> its month end).
4. Ticker: the question's only context ticker; with several, the company the answer names last
   before the claim (its sentence, else its paragraph, else anything before it).
5. Reference: looked up in the structured knowledge for that ticker and date -- signals
   (markets.signals.compute_signals on the ticker's price file) and prices on the last trading day on
   or before the date (within 7 days), fundamentals as known on that date (markets.fundamentals via
   ideal.MarketData, filings filed by then); when the claim date is the question's as-of date, the
   values the ideal context showed the model are references too (the window's median of each
   fundamental ratio, the window's first adjusted close, the window's % change).
6. Status: SUPPORTED when some reference r satisfies |claim - r| <= max(2% of |r|, half a unit of
   the claim's last written digit) -- the relative 2% or the claim's own rounding ('82.8' covers
   82.75..82.85; '$3.78 trillion' covers +-0.005 trillion); CONTRADICTED when references exist and
   none does; NOT_FOUND when there is no metric, no ticker, or no value for that date.
   Percent vs fraction: a ratio-type metric (returns, momentum, ROE, D/E ...) is stored as a fraction;
   a claim written with '%' is divided by 100, one written without '%' whose magnitude exceeds 1.5
   is tried both as written and /100 ('ROE 35.4' = 0.354); RSI is in points, '%' or not. A return
   or momentum stated with a falling verb and no sign ('fell 5%') counts as negative.
An answer is accurate iff no claim is CONTRADICTED and at least one is SUPPORTED.

LLM auditor (optional): claims the checker cannot map to a metric (and that look like claims -- a
unit or a decimal point) are shown, with their sentence, to an auditor model that may name one metric
of `METRICS` (JSON `{"metric": NAME|null}`); the reference lookup and tolerance above then decide, and
the claim is recorded with method 'llm'. The auditor never decides a status itself.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import math
import re
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ....core.types import GenerateParams, Message
from ....extract.numbers import NumberReading, find_numbers, normalise_number_text
from ....markets.fundamentals import TickerFundamentals
from ....markets.prices import price_column
from ....markets.signals import SIGNAL_COLUMNS, compute_signals
from ..ideal import CONTEXT_FUNDAMENTALS, MarketData
from ..indicators import SYNONYMS
from ..questions import resolve_tickers

REL_TOLERANCE = 0.02
"""Relative tolerance of a claim against its reference (or the claim's own rounding, whichever is wider)."""

MAX_GAP = 60
"""Characters between a metric's name and its number at most (same sentence)."""

MAX_STALENESS_DAYS = 7
"""A date's value is the last trading day's on or before it, if that day is at most this much earlier."""

STATUSES = ("SUPPORTED", "CONTRADICTED", "NOT_FOUND")


@dataclass(frozen=True)
class Metric:
    """A value the data holds (or that an answer may name and the data lacks)."""

    name: str
    """Data-level name: a signal column ('RSI', 'MA_20'), a ratio ('Return on Equity'), a derived value
    ('P/E', 'Market Cap'), a price ('close')."""
    kind: str
    """'signal', 'fundamental', 'derived', 'price'."""
    scale: str
    """How values are written: 'fraction' (0.354 = 35.4%), 'points' (RSI 0-100), 'level' (prices, MACD),
    'count' (OBV, volume), 'multiple' (P/E 35x)."""
    signed: bool = False
    """A falling verb without a sign makes the claim negative (returns, momentum, MACD)."""


def _metrics() -> dict[str, Metric]:
    fractions = {"One_Day_Reversal", "Max_Return_20D", "Momentum_5D", "Momentum_20D", "Mean_Reversal_60D",
                 "Short_Term_Reversal_1month", "Medium_Term_Momentum_2month_to_12month",
                 "Long_Term_Reversal_13month_to_60month"}
    out: dict[str, Metric] = {}
    for col in SIGNAL_COLUMNS:
        scale = "fraction" if col in fractions else "points" if col == "RSI" else "count" if col == "OBV" else "level"
        out[col] = Metric(col, "signal", scale, signed=col in fractions or col.startswith("MACD"))
    for ratio in CONTEXT_FUNDAMENTALS:
        out[ratio] = Metric(ratio, "fundamental", "fraction")
    out["P/E"] = Metric("P/E", "derived", "multiple")
    out["P/B"] = Metric("P/B", "derived", "multiple")
    out["Market Cap"] = Metric("Market Cap", "derived", "level")
    for price in ("close", "open", "high", "low"):
        out[price] = Metric(price, "price", "level")
    out["volume"] = Metric("volume", "price", "count")
    out["pct_change"] = Metric("pct_change", "price", "fraction", signed=True)
    return out


METRICS: Mapping[str, Metric] = _metrics()
"""Every metric the audit can look up."""


# --- finding metric names in an answer ------------------------------------------------------------

@dataclass(frozen=True)
class Mention:
    """A metric named in the answer."""

    start: int
    end: int
    metrics: tuple[str, ...]
    """Data metrics it may mean (several: any may support the claim); () = a metric the data lacks."""
    label: str
    """The name as the answer wrote it, or the unknown metric ('Volatility', 'MA_50')."""
    needs_currency: bool = False
    """Only a currency amount is read as this metric ('high', 'low', 'open' are common words)."""


def _column_pattern(column: str) -> str:
    return r"\b" + r"[\s_-]*".join(re.escape(part) for part in column.split("_")) + r"\b"


_COLUMN_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(_column_pattern(col), re.IGNORECASE), (col,)) for col in sorted(SIGNAL_COLUMNS, key=len, reverse=True)
) + (
    (re.compile(r"\badj(?:usted)?[\s._]*clos(?:e|ing)(?:\s+price)?\b", re.IGNORECASE), ("close",)),
    (re.compile(r"\bpct[\s_]change\b|\bprice\s+change\b", re.IGNORECASE), ("pct_change",)),
    (re.compile(r"\bsignal[\s_-]+line\b", re.IGNORECASE), ("MACD_Signal",)),
)
"""The data's own names (what the ideal context shows: 'MA_20=243.1', 'Momentum_20D=0.108')."""

_INDICATOR_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)) for name, patterns in SYNONYMS.items())
"""indicators.SYNONYMS, compiled with positions (the one synonym table)."""

_PRICE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bmarket\s+cap(?:itali[sz]ation)?\b", re.IGNORECASE), "Market Cap"),
    (re.compile(r"\bclos(?:e|ed|ing)\b(?!\s+to\b)(?:\s+price)?|\b(?:share|stock)\s+price\b|\btrad(?:ed|ing)\s+at\b",
                re.IGNORECASE), "close"),
    (re.compile(r"\bopen(?:ed|ing)\b(?:\s+price)?", re.IGNORECASE), "open"),
    (re.compile(r"\b(?:(\d+)[\s-]*(day|week|month|year)s?[\s-]+)?(high|low)\b", re.IGNORECASE), "high/low"),
    (re.compile(r"\b(?:trading\s+)?volume\b", re.IGNORECASE), "volume"),
)
"""Price words (not indicators: indicators.py has none)."""

_WINDOW_BEFORE = re.compile(r"(\d+)[\s-]*(?:day|d)\b[\s-]*$", re.IGNORECASE)
_INVERSE_EP = re.compile(r"p\s*/\s*e|price\s*(?:/|to|-to-)\s*earnings|\bpe\s+ratio", re.IGNORECASE)
_INVERSE_BP = re.compile(r"p\s*/\s*b|price\s*(?:/|to|-to-)\s*book", re.IGNORECASE)


def _windowed(text: str, match: re.Match[str], base: str) -> tuple[tuple[str, ...], str]:
    """MA / EMA: the 20-row window is the only one in the data."""
    digits = re.findall(r"\d+", match.group(0))
    before = _WINDOW_BEFORE.search(text[max(0, match.start() - 14):match.start()])
    window = int(digits[0]) if digits else int(before.group(1)) if before else 20
    return ((f"{base}_20",), f"{base}_20") if window == 20 else ((), f"{base}_{window}")


def _narrow(indicator: str, text: str, match: re.Match[str]) -> tuple[tuple[str, ...], str, int]:
    """(data metrics, label, end) of an indicators.py match."""
    said = match.group(0).lower()
    end = match.end()
    if indicator in ("MA", "EMA"):
        metrics, label = _windowed(text, match, indicator)
        return metrics, label, end
    if indicator == "MACD":
        after = re.match(r"[\s_-]*signal(?:[\s_-]*(line))?\b", text[end:], re.IGNORECASE)
        if after:
            both = ("MACD_Signal",) if after.group(1) or text[end] == "_" else ("MACD_Signal", "MACD")
            return both, "MACD_Signal", end + after.end()
        return ("MACD",), "MACD", end
    if indicator == "Short Term Momentum":
        if "revers" in said:
            return ("Short_Term_Reversal_1month",), "Short_Term_Reversal_1month", end
        if re.search(r"\b5|5d", said):
            return ("Momentum_5D",), "Momentum_5D", end
        if "20" in said:
            return ("Momentum_20D",), "Momentum_20D", end
        return ("Momentum_5D", "Momentum_20D"), "Short Term Momentum", end
    if indicator == "Long Term Mean Reversal":
        before = text[max(0, match.start() - 14):match.start()]
        if "long" not in said or re.search(r"60[\s-]*d", before, re.IGNORECASE):
            return ("Mean_Reversal_60D",), "Mean_Reversal_60D", end
        if "mean" not in said:
            return ("Long_Term_Reversal_13month_to_60month",), "Long_Term_Reversal_13month_to_60month", end
        return ("Mean_Reversal_60D", "Long_Term_Reversal_13month_to_60month"), "Long Term Mean Reversal", end
    if indicator == "Earnings/Price" and _INVERSE_EP.search(said):
        return ("P/E",), "P/E", end
    if indicator == "Book/Price" and _INVERSE_BP.search(said):
        return ("P/B",), "P/B", end
    column = {"Medium Term Momentum": "Medium_Term_Momentum_2month_to_12month", "Max Return": "Max_Return_20D",
              "One Day Reversal": "One_Day_Reversal"}.get(indicator, indicator)
    return ((column,), column, end) if column in METRICS else ((), indicator, end)


def find_mentions(text: str) -> list[Mention]:
    """Every metric named in `text`, left to right, without overlaps (earlier, longer names win)."""
    found: list[Mention] = []
    for pattern, metrics in _COLUMN_PATTERNS:
        found += [Mention(m.start(), m.end(), metrics, metrics[0]) for m in pattern.finditer(text)]
    for indicator, pattern in _INDICATOR_PATTERNS:
        for m in pattern.finditer(text):
            metrics, label, end = _narrow(indicator, text, m)
            found.append(Mention(m.start(), end, metrics, label))
    for pattern, name in _PRICE_PATTERNS:
        for m in pattern.finditer(text):
            if name != "high/low":
                found.append(Mention(m.start(), m.end(), (name,), name))
            elif m.group(1):  # '52-week high': a window the data does not hold
                found.append(Mention(m.start(), m.end(), (), m.group(0)))
            else:
                found.append(Mention(m.start(), m.end(), (m.group(3).lower(),), m.group(3).lower(),
                                     needs_currency=True))
    found.sort(key=lambda x: (x.start, -(x.end - x.start)))
    kept: list[Mention] = []
    for mention in found:
        if not kept or mention.start >= kept[-1].end:
            kept.append(mention)
    return kept


# --- numbers that are not claims, dates ---------------------------------------------------------------

_MONTH_NAMES = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH = "(" + "|".join(name for name in calendar.month_name if name) + ")"
_ISO_DATE = re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")
_DAY_DATE = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}}),?\s+((?:19|20)\d\d)\b", re.IGNORECASE)
_MONTH_DATE = re.compile(rf"\b{_MONTH},?\s+((?:19|20)\d\d)\b", re.IGNORECASE)
_WINDOW_LENGTH = re.compile(r"\b\d+(?:\.\d+)?[\s-]*(?:trading[\s-]+)?(?:days?|weeks?|months?|years?|periods?|sessions?|"
                            r"quarters?|d|m|w)\b", re.IGNORECASE)
_LIST_MARKER = re.compile(r"^[ \t>*#-]*\d{1,2}[.)](?=\s)", re.MULTILINE)
_LEVEL_WORD = re.compile(r"\b(?:level|step|part|item|phase|question|candidate|tier)\s+\d+\b", re.IGNORECASE)
_PARAMETERS = re.compile(r"^\s*\(\s*\d+(?:\s*,\s*\d+)*\s*\)")
_SENTENCE_END = re.compile(r"\n|(?<=[.!?;])\s")
_FALLING = re.compile(r"\b(?:fell|fall(?:s|ing)?|declin\w*|drop\w*|down|lost|los(?:s|ing)|negative|decreas\w*|"
                      r"slid|slump\w*|shed)\b(?!\s+to\b)", re.IGNORECASE)
_MULTIPLE_SUFFIX = re.compile(r"^\s?[x×](?![A-Za-z])")
_THRESHOLD_BEFORE = re.compile(
    r"(?:\b(?:above|below|over|under|exceed(?:s|ing|ed)?|than|beyond|past|threshold(?:\s+of)?|cross(?:es|ed|ing)?|"
    r"between(?:\s+\S+\s+and)?)|[<>≥≤])\s*(?:the\s+|a\s+|an\s+)?\(?\s*$", re.IGNORECASE)
"""'above 70', 'below the 30 level', 'between 30 and 70', '> 1': thresholds and comparisons, not values."""


def _date_spans(text: str) -> list[tuple[int, int, dt.date]]:
    spans = []
    for m in _ISO_DATE.finditer(text):
        try:
            spans.append((m.start(), m.end(), dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))))
        except ValueError:
            continue
    for m in _DAY_DATE.finditer(text):
        try:
            spans.append((m.start(), m.end(), dt.date(int(m.group(3)), _MONTH_NAMES[m.group(1).lower()],
                                                      int(m.group(2)))))
        except ValueError:
            continue
    for m in _MONTH_DATE.finditer(text):
        if any(s <= m.start() < e for s, e, _ in spans):
            continue
        year, month = int(m.group(2)), _MONTH_NAMES[m.group(1).lower()]
        spans.append((m.start(), m.end(), dt.date(year, month, calendar.monthrange(year, month)[1])))
    return spans


@dataclass(frozen=True)
class NumberSpan:
    """A number in the answer, with where it stands."""

    reading: NumberReading
    start: int
    end: int
    unit: str
    """'%', '$', 'x', a scale word ('billion'), a combination ('$ billion'), or ''."""
    decimals: int
    """Digits written after the decimal point."""


def _numbers(text: str) -> list[NumberSpan]:
    out, pos = [], 0
    for reading in find_numbers(text):
        span = reading.span or ""
        start = text.find(span, pos)
        if start < 0:
            continue
        end = start + len(span)
        pos = end
        multiple = _MULTIPLE_SUFFIX.match(text[end:])
        if multiple:
            end += multiple.end()
        units = [u for u, on in (("$", any(n.startswith("currency") for n in reading.notes)),
                                 ("%", reading.percent), ("x", bool(multiple))) if on]
        scale = next((n.split(":", 1)[1] for n in reading.notes if n.startswith("scale:")), None)
        if scale:
            units.append(scale)
        digits = re.search(r"\d[\d,]*(?:\.(\d+))?", span)
        decimals = len(digits.group(1) or "") if digits else 0
        out.append(NumberSpan(reading, start, end, " ".join(units), decimals))
    return out


def _excluded_spans(text: str, mentions: Sequence[Mention]) -> list[tuple[int, int]]:
    spans = [(s, e) for s, e, _ in _date_spans(text)]
    spans += [(m.start, m.end) for m in mentions]
    for pattern in (_WINDOW_LENGTH, _LIST_MARKER, _LEVEL_WORD):
        spans += [(m.start(), m.end()) for m in pattern.finditer(text)]
    for mention in mentions:  # 'RSI (14)', 'MACD (12, 26, 9)': parameters of the name, not values
        params = _PARAMETERS.match(text[mention.end:])
        if params:
            spans.append((mention.end, mention.end + params.end()))
    return spans


def _is_year(number: NumberSpan) -> bool:
    value = number.reading.value
    return (not number.unit and number.decimals == 0 and value is not None and float(value).is_integer()
            and 1900 <= value <= 2100)


# --- the structured knowledge -------------------------------------------------------------------------

@dataclass(frozen=True)
class Reference:
    """One value the data holds for a claim's metric, ticker and date."""

    value: float
    source: str
    """What it is: 'RSI on 2025-09-30', 'context: median Book/Price 2025-07-01..2025-09-30'."""


class Knowledge:
    """Signals, prices and fundamentals of a data root, looked up by ticker and date (thread-safe, cached)."""

    def __init__(self, market: MarketData):
        self.market = market
        self._lock = threading.Lock()
        self._signals: dict[str, pd.DataFrame | None] = {}
        self._fundamentals: dict[str, TickerFundamentals | None] = {}

    def signals(self, ticker: str) -> pd.DataFrame | None:
        """Signals and prices per trading day (a signal only looks back: its value on a day is the one
        computed from the prices up to that day)."""
        with self._lock:
            if ticker not in self._signals:
                prices = self.market.prices(ticker)
                if prices is None:
                    self._signals[ticker] = None
                else:
                    frame = compute_signals(prices).set_index("Date")
                    frame.index = pd.DatetimeIndex(frame.index)
                    sorted_prices = prices.sort_index()
                    for column in ("close", "open", "high", "low", "volume"):
                        frame[column] = sorted_prices[column].to_numpy()
                    frame["adj"] = price_column(sorted_prices).to_numpy()
                    self._signals[ticker] = frame
            return self._signals[ticker]

    def row(self, ticker: str, day: dt.date) -> tuple[pd.Series, dt.date] | None:
        frame = self.signals(ticker)
        if frame is None:
            return None
        upto = frame.loc[: pd.Timestamp(day)]
        if upto.empty or (pd.Timestamp(day) - upto.index[-1]).days > MAX_STALENESS_DAYS:
            return None
        return upto.iloc[-1], upto.index[-1].date()

    def ticker_fundamentals(self, ticker: str) -> TickerFundamentals | None:
        with self._lock:
            if ticker not in self._fundamentals:
                self._fundamentals[ticker] = (TickerFundamentals(self.market.data_dir, ticker)
                                              if self.market.has_filings(ticker) else None)
            return self._fundamentals[ticker]

    def ratios(self, ticker: str, days: Sequence[pd.Timestamp]) -> pd.DataFrame | None:
        return self.market.fundamentals_frame(ticker, list(days))

    def references(self, metric: str, ticker: str, day: dt.date, window: tuple[dt.date, dt.date] | None
                   ) -> list[Reference]:
        """Values of `metric` for `ticker` on `day`; with `window` (the claim is dated at the question's
        as-of date) also the values the ideal context showed for that window."""
        spec = METRICS[metric]
        found = self.row(ticker, day)
        refs: list[Reference] = []
        if spec.kind in ("signal", "price") and found is not None:
            row, on = found
            if metric == "close":
                refs += [Reference(float(row["close"]), f"close on {on}"),
                         Reference(float(row["adj"]), f"adjusted close on {on}")]
            elif metric != "pct_change":
                refs.append(Reference(float(row[metric]), f"{metric} on {on}"))
        if spec.kind in ("fundamental", "derived"):
            base = {"P/E": "Earnings/Price", "P/B": "Book/Price"}.get(metric, metric)
            if metric == "Market Cap":
                source = self.ticker_fundamentals(ticker)
                known = source.as_of(day) if source is not None else None
                if known is not None and known.market_cap:
                    refs.append(Reference(float(known.market_cap), f"market cap on {day} (filings by {known.filed})"))
            else:
                frame = self.ratios(ticker, [pd.Timestamp(day)])
                if frame is not None and base in frame:
                    refs.append(Reference(float(frame[base].iloc[0]), f"{base} as known on {day}"))
                if window is not None:
                    days = self._window_days(ticker, window)
                    frame = self.ratios(ticker, days) if days else None
                    if frame is not None and base in frame and np.isfinite(frame[base]).any():
                        refs.append(Reference(float(np.nanmedian(frame[base])),
                                              f"context: median {base} {window[0]}..{window[1]}"))
                if metric != base:
                    refs = [Reference(1.0 / r.value, f"1 / {r.source}") for r in refs
                            if math.isfinite(r.value) and r.value > 0]
        if window is not None and metric in ("close", "pct_change"):
            frame = self.signals(ticker)
            if frame is not None:
                adj = frame["adj"].loc[pd.Timestamp(window[0]):pd.Timestamp(window[1])].dropna()
                if len(adj):
                    first, last = float(adj.iloc[0]), float(adj.iloc[-1])
                    if metric == "close":
                        refs.append(Reference(first, f"context: first adjusted close of {window[0]}..{window[1]}"))
                    elif first:
                        refs.append(Reference(last / first - 1, f"context: % change {window[0]}..{window[1]}"))
        return [r for r in refs if math.isfinite(r.value)]

    def _window_days(self, ticker: str, window: tuple[dt.date, dt.date]) -> list[pd.Timestamp]:
        frame = self.signals(ticker)
        if frame is None:
            return []
        return list(frame.loc[pd.Timestamp(window[0]):pd.Timestamp(window[1])].index)


# --- claims ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Claim:
    """One numerical claim and its verdict (a dict in audit.jsonl's `claims`)."""

    text: str
    """The claim as written, from the metric's name (or a little before the number) to the number."""
    value: float
    """The number as written ('35.4%' -> 35.4; '3.78 trillion' -> 3.78e12)."""
    unit: str
    metric: str | None
    """Data-level metric name, or the unknown name the answer used, or None (no metric named)."""
    date: str
    """The date looked up (ISO)."""
    reference: float | None
    """The matching reference, else the first one (None: nothing to compare with)."""
    tolerance: str
    status: str
    method: str
    """'deterministic' or 'llm' (the auditor mapped the metric)."""
    ticker: str | None = None
    detail: str = ""
    """Why NOT_FOUND, or which reference and reading decided."""

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "value": self.value, "unit": self.unit, "metric": self.metric, "date": self.date,
                "reference": self.reference, "tolerance": self.tolerance, "status": self.status,
                "method": self.method, "ticker": self.ticker, "detail": self.detail}


@dataclass(frozen=True)
class AnswerAudit:
    """Every claim of one answer."""

    claims: tuple[Claim, ...]

    @property
    def supported(self) -> int:
        return sum(c.status == "SUPPORTED" for c in self.claims)

    @property
    def contradicted(self) -> int:
        return sum(c.status == "CONTRADICTED" for c in self.claims)

    @property
    def not_found(self) -> int:
        return sum(c.status == "NOT_FOUND" for c in self.claims)

    @property
    def accurate(self) -> bool:
        return self.contradicted == 0 and self.supported >= 1

    def to_json(self) -> dict[str, Any]:
        return {"claims": [c.to_json() for c in self.claims], "supported": self.supported,
                "contradicted": self.contradicted, "not_found": self.not_found, "accurate": self.accurate}


@dataclass(frozen=True)
class AuditScope:
    """What the answer is about: the question's tickers and dates."""

    tickers: tuple[str, ...]
    """Tickers whose data the context showed."""
    as_of: dt.date
    window_start: dt.date


def _compatible(metric: Metric, number: NumberSpan) -> bool:
    unit = number.unit.split()
    if "%" in unit and metric.scale in ("level", "count", "multiple"):
        return False
    if "x" in unit and metric.scale != "multiple":
        return False
    if metric.scale in ("fraction", "points", "multiple") and number.reading.multiplier != 1.0:
        return False
    return True


def _readings(metric: Metric, number: NumberSpan, falling: bool) -> list[tuple[float, float, str]]:
    """(value, half unit of rounding, how read) interpretations of a claim for a metric."""
    reading = number.reading
    value = float(reading.value)  # type: ignore[arg-type]
    half = 0.5 * 10 ** -number.decimals * reading.multiplier
    explicit_sign = (reading.span or "").lstrip("($€£¥ ").startswith(("-", "+")) or "parenthesised_negative" in \
        reading.notes
    if metric.signed and falling and not explicit_sign:
        value = -abs(value)
    readings = [(value, half, "as written")]
    if "parenthesised_negative" in reading.notes:  # '(6.56)' in prose is a parenthetical more often than a loss
        readings.append((-value, half, "parenthesis as a parenthetical"))
    if metric.scale != "fraction":
        return readings
    if reading.percent:
        return [(v / 100, h / 100, f"{how}, percent as fraction") for v, h, how in readings]
    return readings + [(v / 100, h / 100, f"{how}, percent written without %") for v, h, how in readings
                       if abs(v) > 1.5]


def check_claim(metric: Metric, number: NumberSpan, refs: Sequence[Reference], falling: bool
                ) -> tuple[str, Reference | None, str, str]:
    """(status, deciding reference, tolerance text, detail) of a claim against its references."""
    readings = _readings(metric, number, falling)
    tolerance = f"max(rel {REL_TOLERANCE:.0%}, ±{readings[0][1]:g} claim rounding)"
    if not refs:
        return "NOT_FOUND", None, tolerance, "no value of this metric for the ticker and date"
    for value, half, how in readings:
        for ref in refs:
            if abs(value - ref.value) <= max(REL_TOLERANCE * abs(ref.value), half):
                return "SUPPORTED", ref, tolerance, f"{ref.source}; claim read {how}"
    return "CONTRADICTED", refs[0], tolerance, f"{refs[0].source}; no reading within tolerance"


def _sentence(text: str, position: int) -> tuple[int, int]:
    start = 0
    for m in _SENTENCE_END.finditer(text, 0, position):
        start = m.end()
    end_match = _SENTENCE_END.search(text, position)
    return start, end_match.start() if end_match else len(text)


def _ticker_for(text: str, position: int, scope: AuditScope) -> str | None:
    if len(scope.tickers) == 1:
        return scope.tickers[0]
    sentence_start, _ = _sentence(text, position)
    paragraph_start = text.rfind("\n\n", 0, position) + 1
    for start in (sentence_start, paragraph_start, 0):
        named = [t for t in resolve_tickers(text[start:position], scope.tickers).tickers if t in scope.tickers]
        if named:
            return named[-1]
    return None


def _claim_date(text: str, number: NumberSpan, scope: AuditScope, dates: Sequence[tuple[int, int, dt.date]]
                ) -> dt.date:
    start, end = _sentence(text, number.start)
    named = {d for s, e, d in dates if s >= start and e <= end}
    return named.pop() if len(named) == 1 else scope.as_of


@dataclass(frozen=True)
class _Pending:
    """A claim still to decide (the LLM auditor may map its metric)."""

    number: NumberSpan
    text: str
    sentence: str
    mention: Mention | None
    falling: bool
    ticker: str | None
    date: dt.date


def extract_claims(text: str, scope: AuditScope) -> list[_Pending]:
    """The numerical claims of an answer, each with the metric it is matched to (module docstring)."""
    text, _ = normalise_number_text(text or "")
    mentions = find_mentions(text)
    excluded = _excluded_spans(text, mentions)
    dates = _date_spans(text)
    pending = []
    for number in _numbers(text):
        digit = number.start + next((i for i, ch in enumerate(text[number.start:number.end]) if ch.isdigit()), 0)
        if any(s <= digit < e for s, e in excluded) or _is_year(number):
            continue
        if _THRESHOLD_BEFORE.search(text[max(0, number.start - 30):number.start]):
            continue
        sentence_start, sentence_end = _sentence(text, number.start)
        chosen = None
        for mention in sorted((m for m in mentions if sentence_start <= m.start and m.end <= number.start
                               and number.start - m.end <= MAX_GAP), key=lambda m: -m.end):
            if mention.needs_currency and "$" not in number.unit:
                continue
            if not mention.metrics or any(_compatible(METRICS[name], number) for name in mention.metrics):
                chosen = mention
                break
        claim_like = bool(number.unit) or number.decimals > 0
        if chosen is None and not claim_like:
            continue
        start = chosen.start if chosen else max(sentence_start, number.start - 30)
        gap = text[chosen.end:number.start] if chosen else ""
        pending.append(_Pending(number, text[start:number.end].strip(), text[sentence_start:sentence_end].strip(),
                                chosen, bool(_FALLING.search(gap)), _ticker_for(text, number.start, scope),
                                _claim_date(text, number, scope, dates)))
    return pending


def decide(claim: _Pending, metric_names: Sequence[str] | None, label: str | None, knowledge: Knowledge,
           scope: AuditScope, method: str) -> Claim:
    """The verdict of one claim given the metric(s) it names."""
    reading = claim.number.reading
    base = dict(text=claim.text, value=float(reading.value), unit=claim.number.unit,  # type: ignore[arg-type]
                date=claim.date.isoformat(), method=method, ticker=claim.ticker)
    no_tolerance = f"max(rel {REL_TOLERANCE:.0%}, claim rounding)"
    if not metric_names:
        detail = "no metric named before the number" if label is None else f"{label} is not in the data"
        return Claim(metric=label, reference=None, tolerance=no_tolerance, status="NOT_FOUND", detail=detail, **base)
    if claim.ticker is None:
        return Claim(metric=metric_names[0], reference=None, tolerance=no_tolerance, status="NOT_FOUND",
                     detail=f"no single company for the claim among {', '.join(scope.tickers) or 'none'}", **base)
    window = (scope.window_start, scope.as_of) if claim.date == scope.as_of else None
    best: tuple[str, Reference | None, str, str, str] | None = None
    for name in metric_names:  # a name that may mean several metrics: the best verdict among them
        metric = METRICS[name]
        if not _compatible(metric, claim.number):
            continue
        refs = knowledge.references(name, claim.ticker, claim.date, window)
        status, ref, tolerance, detail = check_claim(metric, claim.number, refs, claim.falling)
        if best is None or STATUSES.index(status) < STATUSES.index(best[0]):
            best = (status, ref, tolerance, detail, name)
    if best is None:
        return Claim(metric=metric_names[0], reference=None, tolerance=no_tolerance, status="NOT_FOUND",
                     detail="the number's unit does not fit the metric", **base)
    status, ref, tolerance, detail, name = best
    return Claim(metric=name, reference=None if ref is None else ref.value, tolerance=tolerance, status=status,
                 detail=detail, **base)


AUDITOR_PROMPT = """You check numbers in a financial analysis.
Which metric does the number {number} state in this sentence?

Sentence: {sentence}

Metrics (name: meaning):
{metrics}

Reply with JSON only: {{"metric": "<one name from the list>"}}
or {{"metric": null}} if the number states none of them."""
"""The LLM auditor's prompt: it only maps a claim to a metric; the lookup and tolerance decide."""

METRIC_MEANINGS: Mapping[str, str] = {
    "MA_20": "20-day simple moving average of the price", "EMA_20": "20-day exponential moving average",
    "MACD": "MACD line (EMA12 - EMA26)", "MACD_Signal": "MACD signal line", "RSI": "14-day relative strength index",
    "OBV": "on-balance volume", "One_Day_Reversal": "one-day return", "Max_Return_20D": "max daily return, 20 days",
    "Momentum_5D": "5-day price change", "Momentum_20D": "20-day price change",
    "Mean_Reversal_60D": "price vs its 60-day mean", "Short_Term_Reversal_1month": "1-month return, skipping a day",
    "Medium_Term_Momentum_2month_to_12month": "2-to-12-month momentum",
    "Long_Term_Reversal_13month_to_60month": "13-to-60-month return",
    "P/E": "price / earnings", "P/B": "price / book", "Market Cap": "market capitalisation",
    "close": "closing price", "open": "opening price", "high": "day's high", "low": "day's low",
    "volume": "shares traded", "pct_change": "price change over the question's window",
}
"""One-line meanings the auditor is shown (fundamental ratios are named by themselves)."""

AUDITOR_PARAMS = GenerateParams(max_tokens=64, temperature=0.0)


def _auditor_metric(reply: str) -> str | None:
    start, end = reply.find("{"), reply.rfind("}")
    if start == -1 or end <= start:
        return None
    try:
        data = json.loads(reply[start:end + 1])
    except json.JSONDecodeError:
        return None
    name = data.get("metric") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name in METRICS else None


async def audit_answer(text: str, scope: AuditScope, knowledge: Knowledge, auditor: Any = None) -> AnswerAudit:
    """Every claim of `text` checked (module docstring); `auditor` (a model handle) maps unmapped claims."""
    claims = []
    listing = "\n".join(f"- {name}: {METRIC_MEANINGS.get(name, name)}" for name in METRICS)
    for pending in extract_claims(text, scope):
        mention = pending.mention
        if mention is not None:
            claims.append(decide(pending, mention.metrics, mention.label, knowledge, scope, "deterministic"))
            continue
        if auditor is not None:
            prompt = AUDITOR_PROMPT.format(number=pending.number.reading.span, sentence=pending.sentence,
                                           metrics=listing)
            reply = await auditor.chat((Message("user", prompt),), AUDITOR_PARAMS)
            name = _auditor_metric(reply.text)
            claims.append(decide(pending, (name,) if name else None, None, knowledge, scope, "llm"))
            continue
        claims.append(decide(pending, None, None, knowledge, scope, "deterministic"))
    return AnswerAudit(tuple(claims))
