"""SEC filings (10-K/10-Q inline-XBRL HTML) → metadata, readable text and Item/Part sections.

The FinTradeBench corpus lays filings out as ``SEC_Filings/<TICKER>/<FORM>_<FILINGDATE>_<ACCESSION>.htm``
(ticker folders may be mixed case, e.g. ``Goog``: the ticker is the folder name upper-cased). The
filename gives the ticker, form, filing date and accession; the period end comes from the
``dei:DocumentPeriodEndDate`` fact inside the document.

Text extraction keeps what a reader sees: the hidden ``ix:header`` block (and anything else styled
``display:none``), scripts and styles are dropped; block elements end a line; a table row becomes one
line of its non-empty cells joined by ``' | '`` (a cell that is only ``$``/``(`` or ``)``/``%`` is glued
to its neighbour, so ``$ | 391,035`` reads ``$391,035``).

Sections start at lines that look like ``PART II`` or ``Item 7. Management's Discussion…``. Table-of-
contents rows (they end in a page number) are not headers, and a header followed directly by another
header (``PART II`` then ``Item 5.``) merges into the next section's title.

Parsing all 55 files takes about a minute, so the parsed result is cached under
``<cache>/filings/<sha256 of the file>.json`` (cache dir: ``$FINHARNESS_CACHE`` or ~/.cache/finharness).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from finharness.data.errors import DataError
from finharness.data.hints import pull_hint
from finharness.data.io import atomic_write_text

FILINGS_FOLDER = Path("fintradebench") / "SEC_Filings"
"""Where the filings live under a data root (``--data-dir``)."""

PARSER_VERSION = 2  # 2: a <br> or block inside a table cell separates words
"""Bumped whenever extraction or sectioning changes, so cached parses are not reused."""

_FILENAME = re.compile(r"^(?P<form>10-[KQ])_(?P<filed>\d{4}-\d{2}-\d{2})_(?P<accession>\d{10}-\d{2}-\d{6})\.html?$",
                       re.IGNORECASE)
_HEADER = re.compile(r"^(?:PART\s+(?:I{1,3}|IV)\b|ITEM\s+\d{1,2}[A-C]?\b)", re.IGNORECASE)
# A header line is short; a long line starting with "Item 1A" is a sentence that cites the item.
_MAX_HEADER_CHARS = 160
# Table-of-contents rows end in a page number ("Item 7. | Management's Discussion … | 21").
_TOC_ROW = re.compile(r"\|\s*\d{1,3}\s*$")
_LEADING_CELL = re.compile(r"^[$€£(]+$")
_TRAILING_CELL = re.compile(r"^[)%]+$")
_SPACES = re.compile(r"\s+")

_XHTML = "{http://www.w3.org/1999/xhtml}"
_BLOCK_TAGS = frozenset({"address", "article", "blockquote", "br", "caption", "dd", "div", "dl", "dt", "fieldset",
                         "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
                         "ol", "p", "pre", "section", "table", "tbody", "thead", "tfoot", "ul"})
_DROPPED_TAGS = frozenset({"head", "script", "style", "header"})  # "header" is ix:header once the prefix is gone
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none", re.IGNORECASE)


@dataclass(frozen=True)
class FilingRef:
    """One filing file, as its path names it."""

    ticker: str
    """Upper-case ticker, from the folder name (``Goog`` → ``GOOG``)."""

    form: str
    """``10-K`` or ``10-Q``."""

    filed: dt.date
    """Filing date: the day the filing became public, the date point-in-time filters use."""

    accession: str
    """EDGAR accession number, e.g. ``0000320193-24-000123``."""

    path: Path
    """The HTML file."""


@dataclass(frozen=True)
class Section:
    """One parent section of a filing: the text from one Item/Part header to the next."""

    title: str
    """The header line(s), e.g. ``PART II / Item 7. Management's Discussion…``; ``Cover`` before the first."""

    text: str
    """The section body: readable lines joined by newlines."""


@dataclass(frozen=True)
class Filing:
    """A parsed filing: what the file name says, the period it covers and its sections."""

    ref: FilingRef
    """Ticker, form, filing date, accession, path."""

    period_end: dt.date | None
    """``dei:DocumentPeriodEndDate``; None when the document does not state it."""

    sections: tuple[Section, ...]
    """Parent sections in document order."""

    sha256: str
    """Content hash of the HTML file (cache key, provenance)."""


def filings_dir(data_dir: str | Path) -> Path:
    """``<data_dir>/fintradebench/SEC_Filings``; a DataError saying what to do when it is missing."""
    folder = Path(data_dir) / FILINGS_FOLDER
    if not folder.is_dir():
        raise DataError("SEC filings folder not found", path=folder,
                        hint=f"{pull_hint(folder)}, or pass --data-dir DIR holding "
                        "fintradebench/SEC_Filings/<TICKER>/*.htm")
    return folder


def discover_filings(data_dir: str | Path, tickers: set[str] | None = None) -> list[FilingRef]:
    """Every filing under the data root (optionally only ``tickers``), sorted by ticker then filing date.

    A file in a ticker folder whose name does not follow ``<FORM>_<YYYY-MM-DD>_<ACCESSION>.htm`` is a
    DataError: silently skipping it would silently shrink the corpus.
    """
    wanted = {ticker.upper() for ticker in tickers} if tickers is not None else None
    refs = []
    for folder in sorted(p for p in filings_dir(data_dir).iterdir() if p.is_dir()):
        ticker = folder.name.upper()
        if wanted is not None and ticker not in wanted:
            continue
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or not path.is_file():
                continue
            refs.append(parse_filename(path, ticker))
    return sorted(refs, key=lambda ref: (ref.ticker, ref.filed, ref.accession))


def parse_filename(path: Path, ticker: str) -> FilingRef:
    """FilingRef from ``<FORM>_<YYYY-MM-DD>_<ACCESSION>.htm``."""
    match = _FILENAME.match(path.name)
    if not match:
        raise DataError("filing name does not follow <FORM>_<YYYY-MM-DD>_<ACCESSION>.htm", path=path,
                        hint="rename it like 10-K_2024-11-01_0000320193-24-000123.htm or move it out")
    try:
        filed = dt.date.fromisoformat(match["filed"])
    except ValueError:
        raise DataError(f"filing date {match['filed']!r} in the file name is not a date", path=path) from None
    return FilingRef(ticker=ticker, form=match["form"].upper(), filed=filed, accession=match["accession"], path=path)


def load_filing(ref: FilingRef, cache: Path | None = None) -> Filing:
    """Parse one filing, or read the parse cached for the file's exact bytes.

    ``cache`` defaults to ``<cache_dir>/filings``; the cache key is the file's sha256 plus
    :data:`PARSER_VERSION`, so an edited file or a changed parser is parsed afresh.
    """
    raw = ref.path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    cache = cache if cache is not None else _default_cache()
    cached = cache / f"{digest}-v{PARSER_VERSION}.json"
    if cached.is_file():
        try:
            stored = json.loads(cached.read_text(encoding="utf-8"))
            period = stored["period_end"]
            return Filing(ref=ref, period_end=dt.date.fromisoformat(period) if period else None,
                          sections=tuple(Section(**s) for s in stored["sections"]), sha256=digest)
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache entry is rebuilt below
    period_end, lines = extract_text(raw, ref.path)
    filing = Filing(ref=ref, period_end=period_end, sections=split_sections(lines), sha256=digest)
    atomic_write_text(cached, json.dumps({"period_end": period_end.isoformat() if period_end else None,
                                      "sections": [asdict(s) for s in filing.sections]}))
    return filing


def extract_text(raw: bytes, path: Path) -> tuple[dt.date | None, list[str]]:
    """(period end, readable lines) of an inline-XBRL HTML document."""
    from lxml import etree  # lazy: keeps `finharness --help` fast

    parser = etree.XMLParser(huge_tree=True, recover=True, resolve_entities=False, no_network=True)
    try:
        root = etree.fromstring(raw, parser)
    except etree.XMLSyntaxError as err:
        root = None
        detail = str(err)
    else:
        detail = "empty document"
    if root is None:  # not XHTML at all: fall back to the forgiving HTML parser
        from lxml import html
        try:
            root = html.fromstring(raw)
        except (etree.ParserError, ValueError):
            raise DataError(f"cannot parse the filing HTML ({detail})", path=path) from None
    return _period_end(root, path), _readable_lines(root)


def _local(tag: object) -> str:
    """Tag name without namespace or prefix; '' for comments and processing instructions."""
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def _period_end(root, path: Path) -> dt.date | None:
    from dateutil import parser as date_parser

    for element in root.iter():
        if _local(element.tag) == "nonnumeric" and element.get("name") == "dei:DocumentPeriodEndDate":
            text = _SPACES.sub(" ", "".join(element.itertext())).strip()
            try:
                return date_parser.parse(text).date()
            except (ValueError, OverflowError):
                raise DataError(f"dei:DocumentPeriodEndDate {text!r} is not a date", path=path,
                                line=element.sourceline) from None
    return None


def _readable_lines(root) -> list[str]:
    lines: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        text = _SPACES.sub(" ", "".join(pending)).strip()
        pending.clear()
        if text:
            lines.append(text)

    def walk(element) -> None:
        tag = _local(element.tag)
        style = element.get("style") if tag else None
        if tag in _DROPPED_TAGS or (style and _HIDDEN_STYLE.search(style)):
            pass
        elif tag == "tr":
            flush()
            row = _row_text(element)
            if row:
                lines.append(row)
        elif tag:
            block = tag in _BLOCK_TAGS
            if block:
                flush()
            if element.text:
                pending.append(element.text)
            for child in element:
                walk(child)
            if block:
                flush()
        if element.tail:
            pending.append(element.tail)

    walk(root)
    flush()
    return lines


_BREAKING_TAGS = frozenset({"br", "p", "div", "li"})


def _text_with_breaks(element) -> str:
    """Like ''.join(itertext()), but a <br> or a block element separates the words around it
    ('December 30,<br/>2023' reads 'December 30, 2023', not 'December 30,2023')."""
    parts = [element.text or ""]
    for child in element:
        breaks = _local(child.tag) in _BREAKING_TAGS
        if isinstance(child.tag, str):
            parts.extend((" " if breaks else "", _text_with_breaks(child), " " if breaks else ""))
        parts.append(child.tail or "")
    return "".join(parts)


def _row_text(row) -> str:
    """One table row: non-empty cells joined by ' | ', lone '$'/'(' and ')'/'%' cells glued to a neighbour."""
    cells: list[str] = []
    glue_next = ""
    for cell in row:
        if _local(cell.tag) not in ("td", "th"):
            continue
        text = _SPACES.sub(" ", _text_with_breaks(cell)).strip()
        if not text:
            continue
        if _LEADING_CELL.match(text):
            glue_next += text
        elif _TRAILING_CELL.match(text) and cells:
            cells[-1] += text
        else:
            cells.append(glue_next + text)
            glue_next = ""
    if glue_next:
        cells.append(glue_next)
    return " | ".join(cells)


def split_sections(lines: list[str]) -> tuple[Section, ...]:
    """Parent sections at Item/Part header lines (see the module docstring for the rules)."""
    sections: list[Section] = []
    title, body = "Cover", []
    for line in lines:
        if _is_header(line):
            if body:
                sections.append(Section(title=title, text="\n".join(body)))
                title, body = line, []
            elif title == "Cover":
                title = line
            else:  # a header right after a header: PART II then Item 5. → one title
                title = f"{title} / {line}"
        else:
            body.append(line)
    if body:
        sections.append(Section(title=title, text="\n".join(body)))
    return tuple(sections)


def _is_header(line: str) -> bool:
    return (len(line) <= _MAX_HEADER_CHARS and _HEADER.match(line) is not None
            and _TOC_ROW.search(line) is None)


def _default_cache() -> Path:
    from finharness.data.registry import cache_dir

    return cache_dir() / "filings"

