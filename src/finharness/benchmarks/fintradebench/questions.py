"""FinTradeBench questions: the seed CSV, each question's category, golden indicators, tickers and as-of date.

File layout (FinTradeBench_Golden_Seed_150.csv, or a file written by `finharness fintradebench scale`):
`question_id,question,golden_indicators,response` with indicators separated by `|`; a scaled file
adds `ticker,as_of,source_id`, which then override the resolution from the text.

Category (the id prefix, mapped explicitly): `F` fundamentals, `T` trading signals, `FT` hybrid.
The prefix is read with `^(FT|F|T)(\\d+)`, longest first, so 'FT12' is hybrid, never fundamentals.
(calculate_human_alignment.py of the release reads an older F/V/FV scheme with the same care.)

Tickers, from the question text (`resolve_tickers`):
- company names -> tickers with the release's alias map (STATIC_ALIASES of
  generate_benchmark_responses.py and DEFAULT_STATIC_ALIASES of generate_question_variants.py), plus
  the names the seed uses that those maps lack (`EXTRA_ALIASES`: Cisco, Pepsi, Walmart, Disney, Roku,
  Palo Alto Networks, Texas Instruments). 'google'/'alphabet' map to GOOG, the share class our data
  holds (the release maps them to GOOGL);
- upper-case ticker symbols written in the text ('MSFT', 'AMD') that are known tickers;
- named groups ('semiconductor stocks', ...) from the release's STATIC_GROUP_MAP;
- scope: 'single' (one company), 'multi' (several), 'group', 'universe' (no company named, the
  question asks across stocks/companies/NASDAQ names: the NASDAQ-100 universe), 'unresolved'
  (nothing of the above: counted and reported, never guessed);
- peer phrases we cannot map to tickers ('traditional automakers', 'other chip companies') are kept
  in `unmapped` and counted.

As-of date (`resolve_date`), first rule that matches, in this order:
  day        'September 15, 2025', 'week ending September 12, 2025' -> that day
  week-of    'week of September 8, 2025' -> that day + 4 (the Friday of that week)
  quarter    'Q3 2025', 'late Q3 2025' -> last day of the quarter
  month      'July 2025', 'August 2025 dip' -> last day of the month
  half       'first half of 2025', 'H1 2025', 'mid-2025' -> June 30
  summer     'summer of 2025' -> August 31
  year       '2025', 'year-to-date 2025', '2024-2025' (the later year) -> December 31 of the year, but
             never after DATASET_END (the release's DATASET_END_DATE, 2025-09-01)
  default    no date -> DATASET_END
The window start (for the ideal context, which like the release summarises a window) is the start of
the named period (quarter, month, January 1 for half and year, June 1 for summer) and, for day,
week-of and default, `LOOKBACK_DAYS` (the release's DEFAULT_LOOKBACK_DAYS, 180) before the as-of date.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ...data.errors import DataError
from ...data.hints import pull_hint
from ...data.io import csv_dict_reader
from .indicators import split_indicators

CATEGORIES: tuple[str, ...] = ("F", "T", "FT")
"""F fundamentals, T trading signals, FT hybrid."""

CATEGORY_NAMES: Mapping[str, str] = {"F": "fundamentals", "T": "trading signals", "FT": "hybrid"}

SEED_FILE = Path("fintradebench") / "FinTradeBench_Golden_Seed_150.csv"
"""The seed questions under a data root."""

DATASET_END = dt.date(2025, 9, 1)
"""The release's DATASET_END_DATE: the as-of date of questions that name only a year, or nothing."""

LOOKBACK_DAYS = 180
"""The release's DEFAULT_LOOKBACK_DAYS: window length when the question names no period."""

_ID = re.compile(r"^(FT|F|T)(\d+)$")

RELEASE_ALIASES: Mapping[str, str] = {
    "apple": "AAPL", "microsoft": "MSFT", "amazon": "AMZN", "google": "GOOG", "alphabet": "GOOG", "meta": "META",
    "facebook": "META", "tesla": "TSLA", "nvidia": "NVDA", "netflix": "NFLX", "adobe": "ADBE", "broadcom": "AVGO",
    "intel": "INTC", "advanced micro devices": "AMD", "amd": "AMD", "paypal": "PYPL", "pepsico": "PEP",
    "coca cola": "KO", "coca-cola": "KO", "airbnb": "ABNB", "qualcomm": "QCOM", "autodesk": "ADSK", "costco": "COST",
    "comcast": "CMCSA", "charter": "CHTR", "booking": "BKNG", "starbucks": "SBUX", "intuit": "INTU",
    "marvell": "MRVL", "cdw": "CDW", "crowdstrike": "CRWD", "pinduoduo": "PDD", "dexcom": "DXCM", "idexx": "IDXX",
    "t-mobile": "TMUS", "micron": "MU", "illumina": "ILMN", "biogen": "BIIB", "atlassian": "TEAM",
    "cadence": "CDNS", "mondelez": "MDLZ", "lam research": "LRCX", "workday": "WDAY", "zoom": "ZM", "ebay": "EBAY",
    "american electric power": "AEP", "amgen": "AMGN", "analog devices": "ADI", "asml": "ASML",
    "astrazeneca": "AZN", "roper": "ROP", "exelon": "EXC", "regeneron": "REGN", "copart": "CPRT",
    "fastenal": "FAST", "monster beverage": "MNST", "verisk": "VRSK", "marriott": "MAR",
    "lululemon": "LULU", "match group": "MTCH", "old dominion": "ODFL", "paychex": "PAYX", "ross stores": "ROST",
    "synopsys": "SNPS", "moderna": "MRNA", "nxp": "NXPI", "texas instruments": "TXN", "paccar": "PCAR",
    "kraft heinz": "KHC", "gilead": "GILD", "cintas": "CTAS", "trade desk": "TTD",
}
"""Company names of the release's alias maps (its 'atlanssian' typo corrected; names whose ticker is not
a NASDAQ-100 member in either map -- Chipotle, Verizon, Sanofi ... -- left out)."""

EXTRA_ALIASES: Mapping[str, str] = {
    "cisco": "CSCO", "pepsi": "PEP", "walmart": "WMT", "disney": "DIS", "roku": "ROKU",
    "palo alto networks": "PANW", "palo alto": "PANW",
}
"""Names the seed questions use that the release's maps lack."""

ALIASES: Mapping[str, str] = {**RELEASE_ALIASES, **EXTRA_ALIASES}

GROUPS: Mapping[str, tuple[str, ...]] = {
    "fang stocks": ("META", "AMZN", "NFLX", "GOOG"),
    "faang stocks": ("META", "AMZN", "AAPL", "NFLX", "GOOG"),
    "manga stocks": ("MSFT", "AAPL", "NVDA", "GOOG", "AMZN"),
    "magnificent seven": ("MSFT", "AAPL", "NVDA", "GOOG", "AMZN", "META", "TSLA"),
    "semiconductor stocks": ("NVDA", "AVGO", "AMD", "QCOM", "TXN", "INTC", "MU", "AMAT", "LRCX", "KLAC", "ADI", "NXPI",
                             "MRVL"),
    "chip stocks": ("NVDA", "AVGO", "AMD", "QCOM", "TXN", "INTC", "MU", "AMAT", "LRCX", "KLAC", "ADI"),
    "cybersecurity stocks": ("PANW", "CRWD", "FTNT", "ZS", "OKTA"),
    "cloud stocks": ("ADBE", "INTU", "WDAY", "ADSK", "TEAM", "DDOG", "SNPS", "CDNS"),
    "software stocks": ("MSFT", "ADBE", "INTU", "WDAY", "ADSK", "TEAM", "SNPS", "CDNS"),
    "biotech stocks": ("AMGN", "GILD", "VRTX", "REGN", "MRNA", "BIIB", "AZN"),
}
"""STATIC_GROUP_MAP of run_snowflake_rag_pipeline.py (GOOGL written GOOG, as above)."""

AMBIGUOUS_SYMBOLS = frozenset({"ON", "AI", "EV", "MA", "PE", "Q", "IT", "ALL", "GO", "TEAM", "FAST", "SIRI"})
"""Upper-case words that are tickers but mean something else in a question (ON Semiconductor, ...)."""

_PEER_PHRASE = re.compile(r"\b(?:other|traditional)\s+(?:[a-z-]+\s+){0,2}?(?:companies|automakers|stocks|giants|"
                          r"media companies|chip companies)\b", re.IGNORECASE)
_UNIVERSE_CUE = re.compile(r"\b(?:nasdaq|stocks|companies|names)\b", re.IGNORECASE)


@dataclass(frozen=True)
class TickerResolution:
    """Which companies a question is about."""

    tickers: tuple[str, ...]
    """Named companies, in order of first mention."""

    scope: str
    """'single', 'multi', 'group', 'universe' or 'unresolved'."""

    group: str | None = None
    """The named group ('semiconductor stocks'), when one was found."""

    unmapped: tuple[str, ...] = ()
    """Peer phrases that name companies we cannot map ('traditional automakers')."""


@dataclass(frozen=True)
class DateResolution:
    """When a question is asked: nothing dated after `as_of` may reach the model."""

    as_of: dt.date
    """The point-in-time date."""

    window_start: dt.date
    """Start of the period the question names (the ideal context summarises window_start..as_of)."""

    rule: str
    """Which rule fired: day, week-of, quarter, month, half, summer, year, default."""

    label: str
    """The matched text ('Q3 2025', 'July 2025') or 'default'."""


@dataclass(frozen=True)
class Question:
    """One FinTradeBench question, resolved."""

    id: str
    """question_id as written ('FT12')."""

    category: str
    """'F', 'T' or 'FT'."""

    text: str
    """The question."""

    golden: tuple[str, ...]
    """Canonical golden indicators."""

    gold_answer: str
    """The release's selected response (the judge's reference answer)."""

    tickers: TickerResolution
    date: DateResolution
    line: int
    """1-based line of the row in the CSV."""

    source_id: str | None = None
    """For scaled variants: the seed question it was made from."""


def category_of(question_id: str, *, path: Path | str | None = None, line: int | None = None) -> str:
    """'F12' -> 'F', 'FT3' -> 'FT', 'T7' -> 'T'; DataError for any other id (scaled ids 'FT3-v2' use the part
    before the first '-')."""
    base = question_id.strip().split("-", 1)[0].upper()
    match = _ID.match(base)
    if not match:
        raise DataError(f"question_id {question_id!r} does not start with F, T or FT followed by a number",
                        path=path, line=line, hint="ids look like F12, T3, FT40 (scaled: FT40-v1)")
    return match.group(1)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[’‘`]", "'", text)).strip()


_ALIAS_PATTERN = re.compile(r"\b(" + "|".join(re.escape(n) for n in sorted(ALIASES, key=len, reverse=True)) + r")\b",
                            re.IGNORECASE)
_SYMBOL = re.compile(r"\b[A-Z]{2,5}\b")


def resolve_tickers(text: str, known: Iterable[str] = (), *, category: str = "") -> TickerResolution:
    """Tickers a question names (see the module docstring). `known`: symbols accepted when written in capitals."""
    text = _norm(text)
    known_set = set(known) | set(ALIASES.values())
    found: list[tuple[int, str]] = [(m.start(), ALIASES[m.group(1).lower()]) for m in _ALIAS_PATTERN.finditer(text)]
    found += [(m.start(), m.group(0)) for m in _SYMBOL.finditer(text)
              if m.group(0) in known_set and m.group(0) not in AMBIGUOUS_SYMBOLS]
    tickers = tuple(dict.fromkeys(t for _, t in sorted(found)))
    lowered = text.lower()
    group = next((name for name in GROUPS if name in lowered), None)
    unmapped = tuple(dict.fromkeys(m.group(0).lower() for m in _PEER_PHRASE.finditer(text)))
    if tickers:
        scope = "single" if len(tickers) == 1 else "multi"
    elif group:
        scope = "group"
    elif category == "T" or _UNIVERSE_CUE.search(text):
        scope = "universe"
    else:
        scope = "unresolved"
    return TickerResolution(tickers, scope, group, unmapped)


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTH = r"(January|February|March|April|May|June|July|August|September|October|November|December)"
_DATE_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("week-of", re.compile(rf"\bweek of {_MONTH} (\d{{1,2}}),? (20\d\d)\b", re.IGNORECASE)),
    ("day", re.compile(rf"\b{_MONTH} (\d{{1,2}}),? (20\d\d)\b", re.IGNORECASE)),
    ("quarter", re.compile(r"\bQ([1-4]) ?(20\d\d)\b", re.IGNORECASE)),
    ("month", re.compile(rf"\b{_MONTH},? (20\d\d)\b", re.IGNORECASE)),
    ("half", re.compile(r"\b(?:first half of|H1|mid-?|middle of) ?(20\d\d)\b", re.IGNORECASE)),
    ("summer", re.compile(r"\bsummer of (20\d\d)\b", re.IGNORECASE)),
    ("year", re.compile(r"\b(20\d\d)(?:\s*[-–]\s*(20\d\d))?\b")),
)


def _month_end(year: int, month: int) -> dt.date:
    return dt.date(year, month, calendar.monthrange(year, month)[1])


def resolve_date(text: str, dataset_end: dt.date = DATASET_END) -> DateResolution:
    """The as-of date and window of a question (rules in the module docstring)."""
    text = _norm(text)
    for rule, pattern in _DATE_RULES:
        m = pattern.search(text)
        if not m:
            continue
        label = m.group(0)
        if rule in ("day", "week-of"):
            day = dt.date(int(m.group(3)), _MONTHS[m.group(1).lower()], int(m.group(2)))
            as_of = day + dt.timedelta(days=4) if rule == "week-of" else day
            return DateResolution(as_of, as_of - dt.timedelta(days=LOOKBACK_DAYS), rule, label)
        if rule == "quarter":
            quarter, year = int(m.group(1)), int(m.group(2))
            return DateResolution(_month_end(year, 3 * quarter), dt.date(year, 3 * quarter - 2, 1), rule, label)
        if rule == "month":
            year, month = int(m.group(2)), _MONTHS[m.group(1).lower()]
            return DateResolution(_month_end(year, month), dt.date(year, month, 1), rule, label)
        if rule == "half":
            year = int(m.group(1))
            return DateResolution(dt.date(year, 6, 30), dt.date(year, 1, 1), rule, label)
        if rule == "summer":
            year = int(m.group(1))
            return DateResolution(dt.date(year, 8, 31), dt.date(year, 6, 1), rule, label)
        year = int(m.group(2) or m.group(1))
        return DateResolution(min(dt.date(year, 12, 31), dataset_end), dt.date(int(m.group(1)), 1, 1), rule, label)
    return DateResolution(dataset_end, dataset_end - dt.timedelta(days=LOOKBACK_DAYS), "default", "default")


REQUIRED_COLUMNS: tuple[str, ...] = ("question_id", "question", "golden_indicators")


def read_questions(path: Path | str, known_tickers: Iterable[str] = ()) -> list[Question]:
    """Every question of a seed or scaled CSV, resolved; DataError names the file and line of a bad row."""
    path = Path(path)
    if not path.is_file():
        pull = pull_hint(path)
        raise DataError("question file not found", path=path,
                        hint=(f"{pull}, or " if pull else "") + f"pass --data-dir ROOT holding {SEED_FILE}, or "
                        "-o questions=FILE.csv")
    reader = csv_dict_reader(path)
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(f"missing column(s) {missing}; the header must hold {', '.join(REQUIRED_COLUMNS)}",
                        path=path, line=1)
    known = tuple(known_tickers)
    questions, seen = [], set()
    line = reader.line_num + 1
    for row in reader:
        qid = (row.get("question_id") or "").strip()
        category = category_of(qid, path=path, line=line)
        if qid in seen:
            raise DataError(f"duplicate question_id {qid!r}", path=path, line=line)
        seen.add(qid)
        text = (row.get("question") or "").strip()
        if not text:
            raise DataError("empty question", path=path, line=line)
        try:
            golden = split_indicators(row.get("golden_indicators") or "")
        except ValueError as err:
            raise DataError(str(err), path=path, line=line) from None
        tickers = resolve_tickers(text, known, category=category)
        if (row.get("ticker") or "").strip():  # scaled files state the ticker they were made for
            tickers = TickerResolution(tuple(t.strip().upper() for t in row["ticker"].split(",") if t.strip()),
                                       "single" if "," not in row["ticker"] else "multi")
        date = resolve_date(text)
        if (row.get("as_of") or "").strip():
            try:
                as_of = dt.date.fromisoformat(row["as_of"].strip())
            except ValueError:
                raise DataError(f"as_of {row['as_of']!r} is not an ISO date (YYYY-MM-DD)", path=path,
                                line=line) from None
            date = DateResolution(as_of, date.window_start if date.window_start <= as_of
                                  else as_of - dt.timedelta(days=LOOKBACK_DAYS), "stated", row["as_of"].strip())
        questions.append(Question(qid, category, text, golden, (row.get("response") or "").strip(), tickers, date,
                                  line, (row.get("source_id") or "").strip() or None))
        line = reader.line_num + 1
    if not questions:
        raise DataError("no questions", path=path)
    return questions


@dataclass(frozen=True)
class ResolutionSummary:
    """Counts of how the questions were resolved (for the report and the tests)."""

    categories: Mapping[str, int]
    scopes: Mapping[str, int]
    date_rules: Mapping[str, int]
    unresolved: tuple[str, ...]
    """Ids of questions whose companies could not be resolved."""
    with_unmapped_peers: tuple[str, ...]
    """Ids of questions naming peer groups we could not map."""
    distinct_indicators: int = 0
    tickers: Mapping[str, int] = field(default_factory=dict)


def summarise(questions: Sequence[Question]) -> ResolutionSummary:
    return ResolutionSummary(
        categories=dict(Counter(q.category for q in questions)),
        scopes=dict(Counter(q.tickers.scope for q in questions)),
        date_rules=dict(Counter(q.date.rule for q in questions)),
        unresolved=tuple(q.id for q in questions if q.tickers.scope == "unresolved"),
        with_unmapped_peers=tuple(q.id for q in questions if q.tickers.unmapped),
        distinct_indicators=len({g for q in questions for g in q.golden}),
        tickers=dict(Counter(t for q in questions for t in q.tickers.tickers).most_common()))
