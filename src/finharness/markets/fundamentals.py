"""The ten FinTradeBench fundamental ratios, computed point-in-time from inline-XBRL filings and prices.

FinTradeBench's precomputed contexts carry ten `F_*` ratios per trading day. The release computes
them (compute_financial_signals.py, calculate_quarterly_fundamentals) from a vendor workbook of
quarterly statements: Cash Flow/Assets = Operating Cash Flow / Total Assets, Book/Price = 1 / PB
Ratio, Earnings/Price = Net Income / Market Cap, Forecast Earnings/Price = NaN ("not available
here"), Sales/Assets = Revenue / Total Assets, Debt/Assets = Total Debt / Total Assets, Debt/Equity
= Total Debt / Shareholders Equity, and Dividend Yield, ROA, ROE taken from the vendor's ratio sheet;
each quarter's value is dated at the *period end* and forward-filled per trading day.

Here every ratio is computed from the filings in `SEC_Filings/` and the daily prices, **as known on
each date**: only filings filed on or before the date count (the period end is not the date a
number became public; the filing date is).

Definitions (`basis='quarterly'`, the release's basis; `basis='ttm'` sums the last four quarters):
- flows of the latest quarter: revenue (Revenues, else RevenueFromContractWithCustomerExcluding-
  AssessedTax), net income (NetIncomeLoss), operating cash flow, dividends paid (PaymentsOfDividends,
  ...Common Stock; 0 when a filing's cash-flow statement has none). A 3-month duration is used when
  tagged; otherwise year-to-date minus the previous year-to-date of the same fiscal year (10-Q cash
  flows are year-to-date only; Q4 = 10-K year minus 9-month), which needs the previous filing;
- balances at the quarter end: total assets, stockholders' equity (parent; StockholdersEquityIncluding-
  PortionAttributableToNoncontrollingInterest only when no filing states the parent's equity for that
  date -- a concept's rank wins over filing date, while a later filing's restated value of the *same*
  concept replaces the earlier one);
- total debt (`FundamentalsConfig.debt`):
  'balance-sheet' (default, the vendor's Total Debt) = the debt and lease-liability lines printed on the
  face of the balance sheet: the entity-total instant facts of the column's date that sit between the
  last `Assets` fact and the first `LiabilitiesAndStockholdersEquity` fact in document order, whose
  concept matches `DEBT_LINE` and not `NOT_DEBT_LINE`, a line equal to the sum of the debt lines just
  above it (a subtotal) counted once. What is counted thus depends on what each company prints: AAPL's
  leases are in a note (not counted), AMZN's current debt and lease parts sit inside accrued expenses
  (not counted), TSLA's operating leases are not on the face. This reproduces the implied official debt
  to 4 decimals in 48 of 49 quarters of 6 tickers; the 49th (GOOG 2023-12-31) matches the recast column
  of the next 10-K, which quarter alignment takes (the latest filing stating a date wins). A filing
  whose balance sheet is not found falls back to 'borrowings+leases' (`QuarterInputs.debt_fallback`).
  'borrowings' = long-term debt including its current portion (LongTermDebt, else current +
  noncurrent, else notes payable) plus commercial paper and short-term borrowings;
  'borrowings+leases' adds operating and finance lease liabilities;
- equity for Debt/Equity = stockholders' equity + noncontrolling interest (MinorityInterest) +
  redeemable noncontrolling interest (mezzanine) where tagged, as the vendor does (TSLA exact in 7 of 7
  quarters); Book/Price and ROE keep the parent's stockholders' equity (the vendor's B/P does too);
- market capitalisation = the day's close x shares outstanding from the cover page of the latest
  filing (dei:EntityCommonStockSharesOutstanding, summed over share classes). Prices in the history
  files are split-adjusted, so cover-page counts are put on the same footing: a jump by a near
  integer factor (NVDA 2.46 bn -> 24.5 bn, the 10:1 split of June 2024) scales the earlier counts;
- Cash Flow/Assets = CFO / assets; Sales/Assets = revenue / assets; Debt/Assets, Debt/Equity;
  Book/Price = equity / market cap; Earnings/Price = net income / market cap; Dividend Yield =
  dividends paid / market cap; ROA = net income / mean(assets now, a year earlier); ROE = net income /
  mean(equity now, a year earlier) (the year-earlier balance only when a filing known by then states
  it, else the current balance alone -- counted in `FundamentalRow.averaged`);
- Forecast Earnings/Price needs analysts' forecasts, which no filing contains: always NaN (the
  official files are NaN throughout as well).

Known differences from the official values (quarter alignment unless said; investigated by turning
each official number back into the input it implies):
- Return on Assets cannot be reproduced from filings: the vendor's ROE is exactly NI_q / mean(equity
  now, a year earlier), but the assets its ROA implies with the same net income are often impossible
  (TSLA 2024-12-31: 182 bn, while Tesla's assets never exceed 129 bn; GOOG 2025-03-31: 603 bn vs 475).
  No tested base (period end, previous quarter, 1- or 4-quarter averages, TTM, EBIT- or
  interest-adjusted, first-reported NI) fits: NI/mean(A, A a year earlier), kept here, gives a median
  error of .047 over 23 quarters (AAPL .006 ... TSLA .52);
- ADSK: the official "ADSK" values are not Autodesk's (`OFFICIAL_CAVEATS`): B/P 0.14-0.17 against
  Autodesk's 0.03-0.05, a dividend yield of about 0.3 %/quarter while Autodesk pays no dividend, ROE
  0.18-0.25 per quarter, and values that change at calendar-quarter starts, never at Autodesk's fiscal
  quarter ends (so quarter alignment compares nothing);
- Book/Price: the vendor divides by the balance-sheet share count at the period end (ours: the cover
  page, about four weeks later: +0.01 ... +0.12 %), and its price date is not consistent: the close of
  the first trading day on or after a weekend quarter end for AMZN, GOOG, TSLA, but on or before it for
  AAPL's Saturday fiscal ends (a gap of the price move over that weekend);
- daily alignment: the official files date each quarter at its period end (a look-ahead); ours start at
  the filing date, 23-38 days later (AAPL 34, AMZN 31-38, NVDA 24-31, TSLA 23-30), so for lag/91 of every
  quarter the previous quarter is shown, and price-based ratios move with each day's close while the
  official ones stay at the quarter-end price (`price_at='period_end'` removes that part).

`compare_with_official` puts these beside the official files and `agreement_table` summarises them.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence, get_args

import numpy as np
import pandas as pd

from ..data.errors import DataError
from ..util import finite_or_none
from .filings import FilingRef, discover_filings
from .prices import load_prices
from .xbrl import Fact, parse_filing

RATIOS: tuple[str, ...] = (
    "Cash Flow/Assets", "Book/Price", "Earnings/Price", "Forecast Earnings/Price", "Sales/Assets", "Debt/Assets",
    "Debt/Equity", "Dividend Yield", "Return on Assets", "Return on Equity")
"""The ten ratios, named as the official columns without their 'F_' prefix."""

OFFICIAL_FOLDER = Path("fintradebench") / "fundamentals"
"""Official per-day ratios under a data root: <TICKER>.csv with Date and F_<ratio> columns."""

HISTORY_FOLDER = Path("fintradebench") / "history_xlsx"

OFFICIAL_CAVEATS: Mapping[str, str] = {
    "ADSK": "the official ADSK values are not Autodesk's (they change at calendar-quarter starts, show a dividend "
            "Autodesk does not pay and a B/P 3-4x Autodesk's): not comparable",
}
"""Tickers whose official values cannot be compared with their filings, and why."""

FLOW_CONCEPTS: Mapping[str, tuple[str, ...]] = {
    "revenue": ("Revenues", "RevenueFromContractWithCustomerExcludingAssessedTax", "SalesRevenueNet"),
    "net_income": ("NetIncomeLoss",),
    "operating_cash_flow": ("NetCashProvidedByUsedInOperatingActivities",),
    "dividends_paid": ("PaymentsOfDividends", "PaymentsOfDividendsCommonStock"),
}
"""Duration concepts (us-gaap local names), first one present wins."""

BALANCE_CONCEPTS: Mapping[str, tuple[str, ...]] = {
    "total_assets": ("Assets",),
    "equity": ("StockholdersEquity", "StockholdersEquityIncludingPortionAttributableToNoncontrollingInterest"),
    "parent_equity": ("StockholdersEquity",),
    "equity_including_noncontrolling": ("StockholdersEquityIncludingPortionAttributableToNoncontrollingInterest",),
    "noncontrolling_interest": ("MinorityInterest",),
    "redeemable_noncontrolling_interest": ("RedeemableNoncontrollingInterestEquityCarryingAmount",
                                           "RedeemableNoncontrollingInterestEquityCommonCarryingAmount"),
    "long_term_debt": ("LongTermDebt",),
    "long_term_debt_current": ("LongTermDebtCurrent",),
    "long_term_debt_noncurrent": ("LongTermDebtNoncurrent",),
    "notes_payable": ("LongTermNotesPayable",),
    "notes_payable_current": ("NotesPayableCurrent",),
    "commercial_paper": ("CommercialPaper",),
    "short_term_borrowings": ("ShortTermBorrowings",),
    "operating_lease_liability": ("OperatingLeaseLiability",),
    "operating_lease_liability_current": ("OperatingLeaseLiabilityCurrent",),
    "operating_lease_liability_noncurrent": ("OperatingLeaseLiabilityNoncurrent",),
    "finance_lease_liability": ("FinanceLeaseLiability",),
    "finance_lease_liability_current": ("FinanceLeaseLiabilityCurrent",),
    "finance_lease_liability_noncurrent": ("FinanceLeaseLiabilityNoncurrent",),
}
"""Instant concepts (a concept may feed several keys: 'equity' falls back to the total including
noncontrolling interest, which Debt/Equity's denominator also needs on its own)."""

BALANCE_SHEET_DEBT = "balance_sheet_debt"
"""Observation key of the debt printed on the face of a balance sheet (see `balance_sheet_debt`)."""

DEBT_LINE = re.compile(r"Debt|Borrowing|CommercialPaper|LeaseLiabilit|NotesPayable|FinanceLease|"
                       r"CapitalLeaseObligation|LinesOfCredit|LineOfCredit")
"""Concept local names that are debt or lease-liability lines of a balance sheet."""

NOT_DEBT_LINE = re.compile(r"ContractWithCustomer|Accrued|DeferredIncomeTax|Securities|InterestPayable")
"""...unless they are one of these (deferred revenue, accrued expenses, taxes, investments, interest)."""

Basis = Literal["quarterly", "ttm"]
PriceAt = Literal["date", "period_end"]
DebtDefinition = Literal["balance-sheet", "borrowings", "borrowings+leases"]
DEBT_DEFINITIONS: tuple[str, ...] = get_args(DebtDefinition)


@dataclass(frozen=True)
class Observation:
    """One number a filing states: a concept over a period."""

    key: str
    """FLOW_CONCEPTS / BALANCE_CONCEPTS key, or 'shares'."""
    start: dt.date | None
    """First day of a duration (None for an instant)."""
    end: dt.date
    """Last day of the duration, or the instant."""
    value: float
    rank: int
    """Position of the concept in its priority list (lower wins)."""


@dataclass(frozen=True)
class BalanceSheetDebt:
    """The debt lines of one balance-sheet column, as printed."""

    at: dt.date
    """The column's date."""
    lines: tuple[tuple[str, float], ...]
    """(concept local name, value) of each counted line, top to bottom; subtotals left out."""

    @property
    def total(self) -> float:
        return float(sum(value for _, value in self.lines))


def _rounding_unit(fact: Fact) -> float:
    """Half the last displayed digit's value (decimals='-6' -> 0.5 million); 0 when exact or unknown."""
    try:
        return 0.5 * 10.0 ** -int(fact.decimals or "")
    except ValueError:
        return 0.0


def balance_sheet_debt(facts: Sequence[Fact], at: dt.date) -> BalanceSheetDebt | None:
    """The debt lines on the face of the balance sheet for the column dated `at`; None when no balance
    sheet is found (no visible entity-total `Assets` fact before a `LiabilitiesAndStockholdersEquity`
    fact of that date).

    `facts` in document order with their text offsets (`Fact.start`, as `parse_filing` gives them). The
    liabilities side is the stretch between the last total-assets line and the first total-liabilities-
    and-equity line; a concept repeated there counts once, and a line that equals the sum of two or more
    debt lines just above it (within the rounding of the displayed numbers) is their subtotal."""

    # the column's visible entity totals, by their offset in the text (document order)
    column = sorted(((f.start, f) for f in facts
                     if not f.dimensions and f.start is not None and f.value is not None and f.period is not None
                     and f.period.instant == at), key=lambda item: item[0])
    bottom = next((offset for offset, f in column if _local(f.concept) == "LiabilitiesAndStockholdersEquity"), None)
    if bottom is None:
        return None
    top = max((offset for offset, f in column if _local(f.concept) == "Assets" and offset < bottom), default=None)
    if top is None:
        return None
    kept: list[tuple[str, float, float]] = []  # (concept, value, rounding)
    for offset, fact in column:
        name = _local(fact.concept)
        if not top < offset < bottom or not DEBT_LINE.search(name) or NOT_DEBT_LINE.search(name) \
                or any(name == c for c, _, _ in kept):
            continue
        value, rounding = float(fact.value), _rounding_unit(fact)  # type: ignore[arg-type]
        run, slack = 0.0, rounding
        for count, (_, part, part_rounding) in enumerate(reversed(kept), start=1):
            run, slack = run + part, slack + part_rounding
            if count >= 2 and abs(run - value) <= slack:
                break  # a subtotal of the lines above it
        else:
            kept.append((name, value, rounding))
    return BalanceSheetDebt(at, tuple((name, value) for name, value, _ in kept))


def balance_sheet_columns(facts: Sequence[Fact]) -> list[BalanceSheetDebt]:
    """`balance_sheet_debt` of every date a visible total-liabilities-and-equity fact is stated for."""
    dates = {f.period.instant for f in facts
             if _local(f.concept) == "LiabilitiesAndStockholdersEquity" and not f.dimensions and f.start is not None
             and f.period is not None and f.period.instant is not None}
    found = (balance_sheet_debt(facts, d) for d in sorted(dates))  # type: ignore[arg-type]
    return [b for b in found if b is not None]


@dataclass(frozen=True)
class FilingNumbers:
    """What one filing contributes."""

    ref: FilingRef
    period_end: dt.date
    observations: tuple[Observation, ...]
    balance_sheets: tuple[BalanceSheetDebt, ...]
    """The debt lines of each balance-sheet column found (empty when no balance sheet was identified)."""
    shares: float | None
    """Cover-page shares outstanding (all classes), before split adjustment."""
    shares_date: dt.date | None
    has_cash_flow: bool
    """The filing states operating cash flow (so an absent dividend payment means none was paid)."""


def _local(concept: str) -> str:
    return concept.split(":", 1)[-1]


def _cover_shares(facts: Sequence[Fact]) -> tuple[float | None, dt.date | None]:
    shares = [f for f in facts if _local(f.concept) == "EntityCommonStockSharesOutstanding" and f.value is not None
              and f.period is not None]
    if not shares:
        return None, None
    latest = max(f.period.last_day for f in shares)
    at = [f for f in shares if f.period.last_day == latest]
    totals = [f for f in at if not f.dimensions]
    # one class: the entity total; several classes (GOOG A/B/C, META A/B): the sum of the classes
    value = totals[0].value if totals else sum({f.dimensions: f.value for f in at}.values())
    return value, latest


@lru_cache(maxsize=256)
def _filing_numbers_cached(path: str, mtime: float, ticker: str, form: str, filed: dt.date,
                           accession: str) -> FilingNumbers:
    filing = parse_filing(path)
    ref = FilingRef(ticker=ticker, form=form, filed=filed, accession=accession, path=Path(path))
    wanted: dict[str, list[tuple[str, int]]] = {}
    for table in (FLOW_CONCEPTS, BALANCE_CONCEPTS):
        for key, names in table.items():
            for rank, name in enumerate(names):
                wanted.setdefault(name, []).append((key, rank))
    seen: set[tuple[str, int, dt.date | None, dt.date]] = set()
    observations = []
    for fact in filing.facts:
        hits = wanted.get(_local(fact.concept), [])
        if not hits or fact.dimensions or fact.value is None or fact.period is None:
            continue
        period = fact.period
        for key, rank in hits:
            instant = key in BALANCE_CONCEPTS
            if instant != period.is_instant or period.last_day is None:
                continue
            start = None if instant else period.start
            marker = (key, rank, start, period.last_day)
            if marker in seen:  # the same number repeated (statement and note): first one kept
                continue
            seen.add(marker)
            observations.append(Observation(key, start, period.last_day, float(fact.value), rank))
    balance_sheets = tuple(balance_sheet_columns(filing.facts))
    observations.extend(Observation(BALANCE_SHEET_DEBT, None, b.at, b.total, 0) for b in balance_sheets)
    shares, shares_date = _cover_shares(filing.facts)
    period_end = filing.period_end or max((o.end for o in observations), default=filed)
    has_cash_flow = any(o.key == "operating_cash_flow" for o in observations)
    return FilingNumbers(ref, period_end, tuple(observations), balance_sheets, shares, shares_date, has_cash_flow)


def filing_numbers(ref: FilingRef) -> FilingNumbers:
    """The numbers of one filing (parsed once per file version and process)."""
    return _filing_numbers_cached(str(ref.path), ref.path.stat().st_mtime, ref.ticker, ref.form, ref.filed,
                                  ref.accession)


def split_factors(numbers: Sequence[FilingNumbers]) -> dict[str, float]:
    """Accession -> factor that puts its cover-page share count on the latest share basis.

    A count that jumps by a near-integer factor of 2 or more from one filing to the next is a stock split."""
    dated = sorted((n for n in numbers if n.shares), key=lambda n: (n.shares_date or n.ref.filed, n.ref.filed))
    factors = {n.ref.accession: 1.0 for n in dated}
    for earlier, later in zip(dated, dated[1:]):
        ratio = later.shares / earlier.shares  # type: ignore[operator]
        if ratio >= 1.8 and abs(ratio - round(ratio)) / round(ratio) < 0.05:
            for n in dated[: dated.index(later)]:
                factors[n.ref.accession] *= round(ratio)
    return factors


@dataclass(frozen=True)
class Knowledge:
    """Everything the filings filed up to one date say: per number the preferred concept, and of that
    concept the latest filing's value (later filings restate earlier ones)."""

    durations: Mapping[str, Mapping[tuple[dt.date, dt.date], float]]
    instants: Mapping[str, Mapping[dt.date, float]]
    period_ends: tuple[dt.date, ...]
    """Period ends of the filings, ascending."""
    no_dividend_periods: frozenset[dt.date]
    """Period ends of filings with a cash-flow statement but no dividend payment."""

    @classmethod
    def of(cls, numbers: Sequence[FilingNumbers]) -> "Knowledge":
        # key -> period -> concept rank -> value. A later filing restates the numbers of the same concept;
        # across concepts the preferred one wins whatever its filing date (a later equity statement that
        # tags only the total including noncontrolling interest must not replace the parent's equity).
        durations: dict[str, dict[tuple[dt.date, dt.date], dict[int, float]]] = {}
        instants: dict[str, dict[dt.date, dict[int, float]]] = {}
        for n in sorted(numbers, key=lambda n: n.ref.filed):
            for o in n.observations:
                if o.start is None:
                    instants.setdefault(o.key, {}).setdefault(o.end, {})[o.rank] = o.value
                else:
                    durations.setdefault(o.key, {}).setdefault((o.start, o.end), {})[o.rank] = o.value

        def preferred(table: Mapping[str, Mapping[Any, Mapping[int, float]]]) -> dict[str, dict[Any, float]]:
            return {k: {p: ranks[min(ranks)] for p, ranks in t.items()} for k, t in table.items()}

        return cls(preferred(durations), preferred(instants),
                   tuple(sorted({n.period_end for n in numbers})),
                   frozenset(n.period_end for n in numbers
                             if n.has_cash_flow and not any(o.key == "dividends_paid" for o in n.observations)))

    def quarter(self, key: str, end: dt.date) -> float | None:
        """The 3-month value of a flow for the quarter ending `end`."""
        table = self.durations.get(key, {})
        for (start, stop), value in table.items():
            if stop == end and 80 <= (stop - start).days <= 100:
                return value
        for (start, stop), value in table.items():
            if stop != end or (stop - start).days <= 100:
                continue
            # year-to-date minus the previous year-to-date of the same fiscal year
            prior = [(s2, e2) for (s2, e2) in table if s2 == start and e2 < end and 60 <= (end - e2).days <= 120]
            if prior:
                return value - table[max(prior, key=lambda p: p[1])]
        if key == "dividends_paid" and end in self.no_dividend_periods:
            return 0.0
        return None

    def trailing(self, key: str, end: dt.date) -> float | None:
        """The 12-month value ending `end`: a tagged year, else the sum of four quarters."""
        for (start, stop), value in self.durations.get(key, {}).items():
            if stop == end and 350 <= (stop - start).days <= 380:
                return value
        ends = [e for e in self.quarter_ends(end)][-4:]
        if len(ends) < 4 or (end - ends[0]).days > 300:
            return None
        values = [self.quarter(key, e) for e in ends]
        return None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]

    def quarter_ends(self, up_to: dt.date) -> list[dt.date]:
        """Quarter ends on or before `up_to` that any flow is known for."""
        ends = {stop for table in self.durations.values() for (start, stop) in table}
        return sorted(e for e in ends if e <= up_to)

    def balance(self, key: str, at: dt.date, tolerance_days: int = 0) -> float | None:
        table = self.instants.get(key, {})
        if at in table:
            return table[at]
        near = [d for d in table if abs((d - at).days) <= tolerance_days]
        return table[min(near, key=lambda d: abs((d - at).days))] if near else None

    def leases(self, at: dt.date) -> float:
        """Operating plus finance lease liabilities (totals, else current + noncurrent; 0 when none are tagged)."""
        total = 0.0
        for kind in ("operating", "finance"):
            whole = self.balance(f"{kind}_lease_liability", at)
            if whole is None:
                parts = [self.balance(f"{kind}_lease_liability_{p}", at) for p in ("current", "noncurrent")]
                whole = sum(v for v in parts if v is not None)
            total += whole
        return total

    def debt_definition(self, at: dt.date, asked: DebtDefinition) -> DebtDefinition:
        """The definition `debt` uses at `at`: 'balance-sheet' becomes 'borrowings+leases' when no balance
        sheet of that date is known."""
        if asked == "balance-sheet" and self.balance(BALANCE_SHEET_DEBT, at) is None:
            return "borrowings+leases"
        return asked

    def debt(self, at: dt.date, definition: DebtDefinition = "balance-sheet") -> float | None:
        """Total debt at `at` per `definition` (module docstring); 'balance-sheet' falls back to
        'borrowings+leases' when no balance sheet of that date is known."""
        definition = self.debt_definition(at, definition)
        if definition == "balance-sheet":
            return self.balance(BALANCE_SHEET_DEBT, at)
        long_term = self.balance("long_term_debt", at)
        if long_term is None:
            parts = [self.balance("long_term_debt_current", at), self.balance("long_term_debt_noncurrent", at)]
            if parts[1] is not None:
                long_term = parts[1] + (parts[0] or 0.0)
        if long_term is None:
            notes = [self.balance("notes_payable", at), self.balance("notes_payable_current", at)]
            if notes[0] is not None:
                long_term = notes[0] + (notes[1] or 0.0)
        if long_term is None:
            return None
        short = [self.balance(k, at) for k in ("commercial_paper", "short_term_borrowings")]
        return long_term + sum(v for v in short if v is not None) + (
            self.leases(at) if definition == "borrowings+leases" else 0.0)

    def equity_with_noncontrolling(self, at: dt.date) -> float | None:
        """Stockholders' equity + noncontrolling interest + redeemable noncontrolling interest (Debt/Equity's
        denominator, as the vendor's): the parent's equity plus MinorityInterest when both are stated, else the
        tagged total including noncontrolling interest, else the parent's equity alone; redeemable NCI added
        when stated."""
        parent, minority = self.balance("parent_equity", at), self.balance("noncontrolling_interest", at)
        base = parent + minority if parent is not None and minority is not None else None
        if base is None:
            base = self.balance("equity_including_noncontrolling", at)
        if base is None:
            base = self.balance("equity", at)
        if base is None:
            return None
        return base + (self.balance("redeemable_noncontrolling_interest", at) or 0.0)


@dataclass(frozen=True)
class QuarterInputs:
    """The statement numbers behind one quarter's ratios."""

    period_end: dt.date
    revenue: float | None
    net_income: float | None
    operating_cash_flow: float | None
    dividends_paid: float | None
    total_assets: float | None
    equity: float | None
    debt: float | None
    average_assets: float | None
    average_equity: float | None
    averaged: bool
    """True when a year-earlier balance was known, so ROA/ROE use the two-point mean."""
    leverage_equity: float | None = None
    """Debt/Equity's denominator: equity including (redeemable) noncontrolling interest."""
    debt_fallback: bool = False
    """Debt was asked for as 'balance-sheet', but no balance sheet of the quarter was found, so it is
    'borrowings+leases'."""


def quarter_inputs(knowledge: Knowledge, end: dt.date, basis: Basis = "quarterly",
                   debt: DebtDefinition = "balance-sheet") -> QuarterInputs:
    flow = knowledge.quarter if basis == "quarterly" else knowledge.trailing
    assets, equity = knowledge.balance("total_assets", end), knowledge.balance("equity", end)
    year_ago = end - dt.timedelta(days=365)
    assets_ago = knowledge.balance("total_assets", year_ago, tolerance_days=7)
    equity_ago = knowledge.balance("equity", year_ago, tolerance_days=7)
    averaged = assets_ago is not None and equity_ago is not None

    def mean(now: float | None, ago: float | None) -> float | None:
        return None if now is None else (now if ago is None else (now + ago) / 2)

    return QuarterInputs(end, flow("revenue", end), flow("net_income", end), flow("operating_cash_flow", end),
                         flow("dividends_paid", end), assets, equity, knowledge.debt(end, debt),
                         mean(assets, assets_ago), mean(equity, equity_ago), averaged,
                         knowledge.equity_with_noncontrolling(end),
                         knowledge.debt_definition(end, debt) != debt)


def _ratio(numerator: float | None, denominator: float | None) -> float:
    if numerator is None or denominator is None or denominator == 0:
        return math.nan
    return numerator / denominator


def ratios(inputs: QuarterInputs, market_cap: float | None) -> dict[str, float]:
    """The ten ratios of one quarter at one market capitalisation."""
    return {
        "Cash Flow/Assets": _ratio(inputs.operating_cash_flow, inputs.total_assets),
        "Book/Price": _ratio(inputs.equity, market_cap),
        "Earnings/Price": _ratio(inputs.net_income, market_cap),
        "Forecast Earnings/Price": math.nan,  # needs analysts' forecasts: no filing has them
        "Sales/Assets": _ratio(inputs.revenue, inputs.total_assets),
        "Debt/Assets": _ratio(inputs.debt, inputs.total_assets),
        "Debt/Equity": _ratio(inputs.debt, inputs.equity if inputs.leverage_equity is None else inputs.leverage_equity),
        "Dividend Yield": _ratio(inputs.dividends_paid, market_cap),
        "Return on Assets": _ratio(inputs.net_income, inputs.average_assets),
        "Return on Equity": _ratio(inputs.net_income, inputs.average_equity),
    }


@dataclass(frozen=True)
class FundamentalsConfig:
    """How the daily table is computed."""

    basis: Basis = "quarterly"
    """'quarterly' (the release's basis) or 'ttm' for the flows."""
    price_at: PriceAt = "date"
    """'date': market cap at each day's close (point-in-time); 'period_end': at the last close on or before the
    quarter end (as a vendor's quarterly PB ratio)."""
    debt: DebtDefinition = "balance-sheet"
    """Total debt: 'balance-sheet' (the debt and lease lines printed on the balance sheet, as the vendor's),
    'borrowings' (long-term debt with its current portion, commercial paper, short-term borrowings) or
    'borrowings+leases' (plus operating and finance lease liabilities); see the module docstring."""

    def __post_init__(self) -> None:
        if self.debt not in DEBT_DEFINITIONS:
            raise ValueError(f"debt must be one of {', '.join(DEBT_DEFINITIONS)}, not {self.debt!r}")


def history_file(data_dir: str | Path, ticker: str) -> Path:
    return Path(data_dir) / HISTORY_FOLDER / f"{ticker.upper()}-history.xlsx"


@lru_cache(maxsize=32)
def _prices(path: str) -> pd.Series:
    return load_prices(path)["close"].dropna()


class TickerFundamentals:
    """The filings of one ticker, ready to answer 'what were the ratios as known on date D'."""

    def __init__(self, data_dir: str | Path, ticker: str):
        self.ticker = ticker.upper()
        refs = discover_filings(data_dir, {self.ticker})
        if not refs:
            raise DataError(f"no filings for {self.ticker}", path=Path(data_dir) / "fintradebench" / "SEC_Filings",
                            hint="fundamentals need the ticker's 10-K/10-Q inline-XBRL filings")
        self.numbers = [filing_numbers(ref) for ref in refs]
        factors = split_factors(self.numbers)
        self.shares = sorted(((n.ref.filed, n.shares * factors.get(n.ref.accession, 1.0))
                              for n in self.numbers if n.shares), key=lambda x: x[0])
        prices_path = history_file(data_dir, self.ticker)
        self.close = _prices(str(prices_path)) if prices_path.is_file() else None
        self._knowledge: dict[dt.date, Knowledge] = {}

    @property
    def filed_dates(self) -> list[dt.date]:
        return sorted({n.ref.filed for n in self.numbers})

    def knowledge(self, as_of: dt.date) -> Knowledge | None:
        known = [n for n in self.numbers if n.ref.filed <= as_of]
        if not known:
            return None
        key = max(n.ref.filed for n in known)
        if key not in self._knowledge:
            self._knowledge[key] = Knowledge.of(known)
        return self._knowledge[key]

    def shares_as_of(self, as_of: dt.date) -> float | None:
        known = [s for filed, s in self.shares if filed <= as_of]
        return known[-1] if known else None

    def close_on_or_before(self, day: dt.date) -> float | None:
        if self.close is None:
            return None
        upto = self.close.loc[: pd.Timestamp(day)]
        return float(upto.iloc[-1]) if len(upto) else None

    def latest_period(self, as_of: dt.date) -> dt.date | None:
        known = [n.period_end for n in self.numbers if n.ref.filed <= as_of]
        return max(known) if known else None

    def as_of(self, as_of: dt.date | str, config: FundamentalsConfig = FundamentalsConfig()) -> "FundamentalRow | None":
        """The ratios as known at the close of `as_of` (None before the first filing)."""
        day = as_of if isinstance(as_of, dt.date) else dt.date.fromisoformat(as_of)
        knowledge = self.knowledge(day)
        period = self.latest_period(day)
        if knowledge is None or period is None:
            return None
        inputs = quarter_inputs(knowledge, period, config.basis, config.debt)
        price = self.close_on_or_before(period if config.price_at == "period_end" else day)
        shares = self.shares_as_of(day)
        cap = None if price is None or shares is None else price * shares
        filed = max(n.ref.filed for n in self.numbers if n.ref.filed <= day)
        return FundamentalRow(day, period, filed, ratios(inputs, cap), cap, inputs.averaged, inputs.debt_fallback)

    @property
    def filings_without_balance_sheet(self) -> list[FilingRef]:
        """Filings whose balance sheet for their period end was not found (their debt falls back)."""
        return [n.ref for n in self.numbers if not any(b.at == n.period_end for b in n.balance_sheets)]


@dataclass(frozen=True)
class FundamentalRow:
    """The ratios known on one date."""

    date: dt.date
    period_end: dt.date
    """Quarter the statement numbers belong to."""
    filed: dt.date
    """Filing date of the latest filing used."""
    values: Mapping[str, float]
    """Ratio -> value (NaN when an input is missing)."""
    market_cap: float | None
    averaged: bool
    """ROA/ROE used the two-point mean of balances."""
    debt_fallback: bool = False
    """Debt is 'borrowings+leases' because the quarter's balance sheet was not found (see QuarterInputs)."""


def daily_fundamentals(data_dir: str | Path, ticker: str, dates: Iterable[dt.date | pd.Timestamp] | None = None,
                       config: FundamentalsConfig = FundamentalsConfig()) -> pd.DataFrame:
    """Ratios per date (default: every trading day from the first filing), point-in-time.

    Columns: RATIOS, then period_end, filed, market_cap, debt_fallback; index 'Date'."""
    source = TickerFundamentals(data_dir, ticker)
    if dates is None:
        if source.close is None:
            raise DataError("no price history", path=history_file(data_dir, ticker),
                            hint="pass dates=... or add <TICKER>-history.xlsx")
        first = pd.Timestamp(min(source.filed_dates))
        dates = [d.date() for d in source.close.index if d >= first]
    rows = []
    for d in dates:
        day = d.date() if isinstance(d, pd.Timestamp) else d
        row = source.as_of(day, config)
        if row is None:
            continue
        rows.append({**row.values, "period_end": row.period_end, "filed": row.filed, "market_cap": row.market_cap,
                     "debt_fallback": row.debt_fallback, "Date": pd.Timestamp(day)})
    frame = pd.DataFrame(rows, columns=[*RATIOS, "period_end", "filed", "market_cap", "debt_fallback", "Date"])
    return frame.set_index("Date")


def load_official(data_dir: str | Path, ticker: str) -> pd.DataFrame:
    """The official per-day ratios (index Date, columns RATIOS, without the 'F_' prefix)."""
    path = Path(data_dir) / OFFICIAL_FOLDER / f"{ticker.upper()}.csv"
    if not path.is_file():
        raise DataError("official fundamentals file not found", path=path,
                        hint="the release ships them for AAPL, ADSK, AMZN, GOOG, META, NVDA, TSLA")
    frame = pd.read_csv(path)
    missing = [f"F_{r}" for r in RATIOS if f"F_{r}" not in frame.columns]
    if "Date" not in frame.columns or missing:
        raise DataError(f"missing column(s) {['Date'] if 'Date' not in frame.columns else []}{missing}", path=path,
                        line=1)
    frame.index = pd.DatetimeIndex(pd.to_datetime(frame.pop("Date"), format="mixed"), name="Date")
    return frame.rename(columns=lambda c: c[2:] if c.startswith("F_") else c)[list(RATIOS)].sort_index()


@dataclass(frozen=True)
class RatioAgreement:
    """How one computed ratio agrees with the official one for one ticker."""

    ticker: str
    ratio: str
    compared: int
    """Dates (or quarters) where both values are finite."""
    median_relative_error: float
    """median |ours − official| / |official| (NaN when nothing was compared)."""
    within_1pct: float
    within_5pct: float
    official_available: int
    """Dates in the compared range where the official value is finite."""
    note: str | None = None
    """Why the ticker's official values are not comparable (OFFICIAL_CAVEATS), if known."""

    def to_json(self) -> dict[str, object]:
        def num(x: float) -> float | None:
            return finite_or_none(x, 6)  # ratios: 6 decimals are plenty

        return {"ticker": self.ticker, "ratio": self.ratio, "compared": self.compared,
                "median_relative_error": num(self.median_relative_error), "within_1pct": num(self.within_1pct),
                "within_5pct": num(self.within_5pct), "official_available": self.official_available,
                "note": self.note}


def starts_quarter(official: pd.DataFrame, day: pd.Timestamp) -> bool:
    """Whether the official values change on `day` (a new quarter's numbers start there)."""
    position = official.index.get_loc(day)
    if position == 0:
        return True
    now, before = official.iloc[position], official.iloc[position - 1]
    return bool(((now - before).abs() > 1e-12).any() or (now.isna() != before.isna()).any())


def _agreement(ticker: str, ratio: str, ours: pd.Series, official: pd.Series) -> RatioAgreement:
    both = pd.concat([ours.rename("ours"), official.rename("official")], axis=1, join="inner")
    available = int(np.isfinite(both["official"]).sum())
    ok = both[np.isfinite(both["ours"]) & np.isfinite(both["official"])]
    note = OFFICIAL_CAVEATS.get(ticker)
    if ok.empty:
        return RatioAgreement(ticker, ratio, 0, math.nan, math.nan, math.nan, available, note)
    diff = (ok["ours"] - ok["official"]).abs()
    # both 0 (no dividend) agree exactly; a non-zero value against an official 0 is infinitely off
    rel = (diff / ok["official"].abs()).where(ok["official"] != 0, np.where(diff == 0, 0.0, np.inf))
    return RatioAgreement(ticker, ratio, len(ok), float(rel.median()), float((rel <= 0.01).mean()),
                          float((rel <= 0.05).mean()), available, note)


def compare_with_official(data_dir: str | Path, ticker: str, *, alignment: Literal["daily", "quarter"] = "daily",
                          config: FundamentalsConfig | None = None) -> tuple[list[RatioAgreement], pd.DataFrame]:
    """(agreement per ratio, the side-by-side frame) for one ticker.

    - 'daily': our point-in-time values (filings filed by each day, that day's close) against the official
      value of the same day, over the trading days both cover. Timing and definitions both show.
    - 'quarter': definitions only -- for each quarter end E, our numbers with every filing known and the close
      at E (config.price_at forced to 'period_end'), against the official value on the first official date
      on or after E (the official files start each quarter's value at its period end).
    """
    official = load_official(data_dir, ticker)
    source = TickerFundamentals(data_dir, ticker)
    if alignment == "daily":
        config = config or FundamentalsConfig()
        ours = daily_fundamentals(data_dir, ticker, config=config)
        ours = ours.loc[ours.index <= official.index.max()]
        frame = ours
        official_aligned = official
    else:
        config = replace(config or FundamentalsConfig(), price_at="period_end")
        last = max(source.filed_dates)
        knowledge = source.knowledge(last)
        assert knowledge is not None
        rows, official_rows = [], []
        for n in sorted(source.numbers, key=lambda n: n.period_end):
            end = n.period_end
            later = official.index[official.index >= pd.Timestamp(end)]
            if not len(later) or not starts_quarter(official, later[0]):
                continue  # the official file has no new quarter there (it ends before the update)
            inputs = quarter_inputs(knowledge, end, config.basis, config.debt)
            price = source.close_on_or_before(end)
            shares = source.shares_as_of(n.ref.filed)
            cap = None if price is None or shares is None else price * shares
            rows.append({**ratios(inputs, cap), "Date": pd.Timestamp(end)})
            official_rows.append({**official.loc[later[0]].to_dict(), "Date": pd.Timestamp(end)})
        frame = pd.DataFrame(rows).set_index("Date") if rows else pd.DataFrame(columns=list(RATIOS))
        official_aligned = pd.DataFrame(official_rows).set_index("Date") if official_rows else official.iloc[:0]
    table = [_agreement(source.ticker, r, frame[r].astype(float), official_aligned[r].astype(float)) for r in RATIOS]
    side = frame[list(RATIOS)].join(official_aligned[list(RATIOS)].add_suffix(" (official)"), how="inner")
    return table, side


def agreement_table(data_dir: str | Path, tickers: Sequence[str] | None = None, *,
                    alignment: Literal["daily", "quarter"] = "daily",
                    config: FundamentalsConfig | None = None) -> list[RatioAgreement]:
    """`compare_with_official` for several tickers (default: every ticker with both filings and official files)."""
    if tickers is None:
        official = {p.stem.upper() for p in (Path(data_dir) / OFFICIAL_FOLDER).glob("*.csv")}
        tickers = sorted(official & {ref.ticker for ref in discover_filings(data_dir)})
    rows: list[RatioAgreement] = []
    for ticker in tickers:
        rows.extend(compare_with_official(data_dir, ticker, alignment=alignment, config=config)[0])
    return rows


def format_agreement(rows: Sequence[RatioAgreement]) -> str:
    """A plain-text table: ticker, ratio, compared, median rel. error, within 1%, within 5%. A ticker with
    nothing compared gets one line instead of a block of dashes; a ticker with a caveat gets a note line."""

    def pct(x: float) -> str:
        return "—" if math.isnan(x) else f"{100 * x:5.1f}%"

    lines = [f"{'ticker':6} {'ratio':24} {'n':>5} {'med.rel.err':>11} {'≤1%':>6} {'≤5%':>6}"]
    for ticker in dict.fromkeys(r.ticker for r in rows):
        block = [r for r in rows if r.ticker == ticker]
        note = next((r.note for r in block if r.note), None)
        if all(r.compared == 0 for r in block):
            lines.append(f"{ticker:6} nothing compared" + (f": {note}" if note else ""))
            continue
        for r in block:
            err = "—" if math.isnan(r.median_relative_error) else f"{r.median_relative_error:.4f}"
            lines.append(f"{r.ticker:6} {r.ratio:24} {r.compared:5d} {err:>11} {pct(r.within_1pct):>6} "
                         f"{pct(r.within_5pct):>6}")
        if note:
            lines.append(f"{ticker:6} note: {note}")
    return "\n".join(lines)
