"""Scaling the seed questions: variants across tickers and dates, each only where the data can answer it.

Like generate_question_variants.py of the release, a variant swaps the company name and the date of a
seed question (seeded `random.Random`); unlike it, every variant is checked against the data at its
as-of date, and states its ticker and as-of date explicitly (columns `ticker`, `as_of`, `source_id`).

- single-company seed questions (scope 'single'): the company is replaced by another ticker with the
  data the category needs -- F: filings filed by the as-of date (fundamentals known) and prices; T: at
  least `MIN_HISTORY_ROWS` trading days of prices up to as-of (the longest common signal, 12-month
  momentum, needs 253); FT: both. Pools: F/FT the tickers with filings; T any ticker with prices.
- universe questions (mostly T): the date only; at least `MIN_UNIVERSE` NASDAQ-100 tickers must have
  `MIN_HISTORY_ROWS` rows of prices up to as-of.
- multi-company, group and unresolved seed questions are not scaled (counted in the report).
The date phrase keeps its kind ('July 2025' -> 'March 2019', 'Q3 2025' -> 'Q1 2024', 'mid-2025' ->
'mid-2024', 'September 15, 2025' -> 'May 15, 2017'); the new text is resolved again with the seed's
rules and must land on the drawn as-of date. Golden indicators and category are the seed's; the gold
answer is empty (no reference answer exists for a variant).

A seed that states a price move as its premise ('after the Q2 2025 rally', 'during this August 2025 dip',
'losing money': `price_premise`) keeps it in the variant, so a single-company variant is kept only where
the new company's adjusted close moved that way over the new date's window (`MarketData.window_change`,
the ideal context's pct_change); otherwise the question would ask the model to explain a move that did
not happen (rejected as 'premise').
"""

from __future__ import annotations

import calendar
import csv
import datetime as dt
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from .ideal import MarketData
from .questions import ALIASES, DATASET_END, Question, resolve_date

MIN_HISTORY_ROWS = 253
"""Trading days of prices up to as-of a variant needs (12-month momentum looks back 252 rows)."""

MIN_UNIVERSE = 50
"""Tickers with enough prices a universe question needs at its as-of date."""

PRICE_PREMISES: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"\b(rall(?:y|ies|ied)|run-?up|surg(?:e|ed|ing)|soar(?:ed|ing)?|recovery|rebound(?:ed)?)\b",
                re.IGNORECASE), 1),
    (re.compile(r"\b(sell-?off|dip|pull-? ?back|declin(?:e|ed|ing)|plung(?:e|ed|ing)|slump(?:ed)?|crash(?:ed)?"
                r"|losing money)\b", re.IGNORECASE), -1),
)
"""Words that state the company's price move as a question's premise, and the sign they state (the seed set
uses rally, recovery, selloff, dip, pullback, decline and 'losing money'; 'downturn' of the economy, 'losing
market share' and a price 'so high' are not moves)."""

OUTPUT_COLUMNS: tuple[str, ...] = ("question_id", "question", "golden_indicators", "response", "ticker", "as_of",
                                   "source_id", "category")

DISPLAY_NAMES: dict[str, str] = {}
for _name, _ticker in ALIASES.items():
    DISPLAY_NAMES.setdefault(_ticker, _name.title() if _name.lower() != "amd" else "AMD")
DISPLAY_NAMES.update({"GOOG": "Alphabet", "NVDA": "Nvidia", "TSLA": "Tesla", "PANW": "Palo Alto Networks"})
"""How a variant names a company (the first alias of the release's map, title-cased)."""


@dataclass(frozen=True)
class Variant:
    """One scaled question."""

    question_id: str
    question: str
    golden_indicators: str
    ticker: str
    """'' for universe questions."""
    as_of: dt.date
    source_id: str
    category: str


@dataclass
class ScaleReport:
    """What scaling did."""

    written: int = 0
    attempts: int = 0
    skipped_seeds: Counter = field(default_factory=Counter)
    """Seed questions not scaled, by scope."""
    rejected: Counter = field(default_factory=Counter)
    """Draws rejected, by reason."""


def _month_ends(start: dt.date, end: dt.date) -> list[dt.date]:
    out, year, month = [], start.year, start.month
    while (year, month) <= (end.year, end.month):
        day = dt.date(year, month, calendar.monthrange(year, month)[1])
        if start <= day <= end:
            out.append(day)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def rewrite_date(text: str, rule: str, label: str, as_of: dt.date) -> str | None:
    """The question with its date phrase moved to `as_of`, keeping the phrase's kind (None: cannot)."""
    month = calendar.month_name[as_of.month]
    if rule == "month":
        new = re.sub(r"[A-Za-z]+,? (20\d\d)", f"{month} {as_of.year}", label)
    elif rule == "quarter":
        if as_of.month % 3:
            return None
        new = re.sub(r"Q[1-4] ?20\d\d", f"Q{as_of.month // 3} {as_of.year}", label, flags=re.IGNORECASE)
    elif rule in ("half", "summer", "year"):
        new = re.sub(r"20\d\d", str(as_of.year), label)
    elif rule == "day":
        new = f"{month} {as_of.day}, {as_of.year}"
    else:
        return None  # week-of and default phrases are not moved
    return text.replace(label, new, 1)


def price_premise(text: str) -> int | None:
    """+1 when the question presumes the price rose, -1 when it presumes a fall, None when it states no move
    (or both)."""
    signs = {sign for pattern, sign in PRICE_PREMISES if pattern.search(text)}
    return signs.pop() if len(signs) == 1 else None


def _rewrite_company(text: str, old: str, new: str) -> str | None:
    names = [n for n, t in ALIASES.items() if t == old]
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r"|"
                         + re.escape(old) + r")\b", re.IGNORECASE)
    if not pattern.search(text):
        return None
    return pattern.sub(DISPLAY_NAMES.get(new, new), text, count=1)


class _Answerability:
    """Checks, with caching, whether the data answers a category for a ticker at a date."""

    def __init__(self, market: MarketData):
        self.market = market
        self._fundamentals: dict[str, object] = {}
        self._universe: dict[dt.date, int] = {}
        self.all_tickers = market.tickers_with_prices()

    def prices(self, ticker: str, as_of: dt.date) -> bool:
        return self.market.covers(ticker, as_of, MIN_HISTORY_ROWS)

    def fundamentals(self, ticker: str, as_of: dt.date) -> bool:
        from ...markets.fundamentals import TickerFundamentals

        if ticker not in self._fundamentals:
            self._fundamentals[ticker] = TickerFundamentals(self.market.data_dir, ticker) \
                if self.market.has_filings(ticker) else None
        source = self._fundamentals[ticker]
        return source is not None and source.as_of(as_of) is not None  # type: ignore[attr-defined]

    def universe(self, as_of: dt.date) -> bool:
        if as_of not in self._universe:
            self._universe[as_of] = sum(self.prices(t, as_of) for t in self.all_tickers)
        return self._universe[as_of] >= MIN_UNIVERSE

    def answers(self, category: str, ticker: str, as_of: dt.date) -> str | None:
        """None when answerable, else the reason."""
        if not ticker:
            return None if self.universe(as_of) else "universe-prices"
        if not self.prices(ticker, as_of):
            return "prices"
        if category in ("F", "FT") and not self.fundamentals(ticker, as_of):
            return "fundamentals"
        return None


def scale_questions(questions: Sequence[Question], data_dir: str | Path, n: int, seed: int = 0,
                    max_attempts_per_variant: int = 60,
                    tickers: Sequence[str] | None = None) -> tuple[list[Variant], ScaleReport]:
    """Up to `n` answerable variants of the seed questions (module docstring); `tickers`, when given, is the
    only pool single-company variants draw their company from."""
    rng = random.Random(seed)
    market = MarketData(data_dir)
    check = _Answerability(market)
    report = ScaleReport()
    usable = []
    for q in questions:
        if q.tickers.scope in ("single", "universe") and q.date.rule not in ("week-of", "default"):
            usable.append(q)
        else:
            report.skipped_seeds[q.tickers.scope if q.tickers.scope not in ("single", "universe") else q.date.rule] += 1
    price_pool = sorted(t for t in check.all_tickers if tickers is None or t in set(tickers))
    filing_pool = sorted(t for t in price_pool if market.has_filings(t))
    fundamental_dates = _month_ends(dt.date(2024, 3, 1), dt.date(2025, 9, 30))
    price_dates = _month_ends(dt.date(2015, 3, 1), dt.date(2025, 9, 30))
    variants: list[Variant] = []
    seen: set[str] = set()
    counters: Counter[str] = Counter()
    while len(variants) < n and report.attempts < n * max_attempts_per_variant and usable:
        report.attempts += 1
        q = rng.choice(usable)
        single = q.tickers.scope == "single"
        needs_filings = q.category in ("F", "FT")
        as_of = rng.choice(fundamental_dates if needs_filings else price_dates)
        if q.date.rule == "quarter" and as_of.month % 3:
            as_of = dt.date(as_of.year, as_of.month + 3 - as_of.month % 3,
                            calendar.monthrange(as_of.year, as_of.month + 3 - as_of.month % 3)[1])
        if q.date.rule in ("half", "year"):
            as_of = dt.date(as_of.year, 6, 30) if q.date.rule == "half" else dt.date(as_of.year, 12, 31)
        if q.date.rule == "summer":
            as_of = dt.date(as_of.year, 8, 31)
        if q.date.rule == "day":
            as_of = as_of.replace(day=min(q.date.as_of.day, as_of.day))
        text = rewrite_date(q.text, q.date.rule, q.date.label, as_of)
        ticker = ""
        if text is not None and single:
            pool = filing_pool if needs_filings else price_pool
            if not pool:
                report.rejected["no-ticker-in-pool"] += 1
                continue
            ticker = rng.choice(pool)
            if ticker == q.tickers.tickers[0]:
                report.rejected["same-ticker"] += 1
                continue
            text = _rewrite_company(text, q.tickers.tickers[0], ticker)
        if text is None:
            report.rejected["rewrite"] += 1
            continue
        expected = min(as_of, DATASET_END) if q.date.rule == "year" else as_of
        resolved = resolve_date(text)
        if resolved.as_of != expected:  # the rewritten phrase must mean the drawn date
            report.rejected["date-resolution"] += 1
            continue
        as_of = expected
        if text in seen:
            report.rejected["duplicate"] += 1
            continue
        reason = check.answers(q.category, ticker, as_of)
        if reason:
            report.rejected[f"no-{reason}"] += 1
            continue
        premise = price_premise(text) if ticker else None
        if premise is not None:
            change = market.window_change(ticker, resolved.window_start, as_of)
            if change is None or change * premise <= 0:
                report.rejected["premise"] += 1
                continue
        seen.add(text)
        counters[q.id] += 1
        variants.append(Variant(f"{q.id}-v{counters[q.id]}", text, "|".join(q.golden), ticker, as_of, q.id,
                                q.category))
    report.written = len(variants)
    return variants, report


def write_variants(variants: Iterable[Variant], path: str | Path) -> None:
    """The variants as a question CSV the task reads (-o questions=PATH)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(OUTPUT_COLUMNS)
        for v in variants:
            writer.writerow([v.question_id, v.question, v.golden_indicators, "", v.ticker, v.as_of.isoformat(),
                             v.source_id, v.category])
