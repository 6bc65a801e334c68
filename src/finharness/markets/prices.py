"""Daily price files → one clean frame: date index ascending, open/high/low/close/adj_close/volume.

Three layouts are recognised from the header row:

- ``nasdaq_com``: the nasdaq.com export ``Date,Close,Volume,Open,High,Low`` (or ``Close/Last``),
  ``MM/DD/YYYY`` dates, ``$179.66`` prices, ``"73,563,080"`` volumes, newest first, ``N/A`` for a
  missing volume;
- ``fintradebench``: the FinTradeBench history export ``Date,Open,High,Low,Close,Adj. Close,Change,
  Volume`` as .xlsx or .csv, dates as spreadsheet dates, ISO text or ``M/D/YYYY``;
- ``ohlcv``: any CSV with date, open, high, low, close, volume (and optionally adj close) columns.

Values are parsed the same way in every layout (``$`` and thousands separators dropped; ISO or
US ``M/D/YYYY`` dates), so the layout is recorded for provenance (``df.attrs["layout"]``).
Bad input raises :class:`~finharness.data.errors.DataError` naming the file and the 1-based line
(the spreadsheet row for .xlsx) of the first offending row.
"""

from __future__ import annotations

import csv
import datetime as dt
import importlib.util
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from finharness.data.errors import DataError
from finharness.data.io import read_text

PRICE_COLUMNS = ("open", "high", "low", "close", "adj_close", "volume")
"""Columns of a loaded price frame, in order; the index is the trading date."""

REQUIRED_COLUMNS = ("date", "open", "high", "low", "close", "volume")
"""Columns every price file must have (adj_close is optional and NaN when absent)."""

# Columns that may hold missing values: signals need only the price (close/adj_close), and
# nasdaq.com writes N/A for the volume of some trading days.
_NULLABLE_COLUMNS = frozenset({"open", "high", "low", "volume"})
_MISSING_MARKERS = frozenset({"", "n/a", "na", "nan", "null", "none", "-"})
# The CSV reader matches case-sensitively; anything it misses is caught (case-insensitively) later.
_CSV_MISSING_MARKERS = sorted(_MISSING_MARKERS | {marker.upper() for marker in _MISSING_MARKERS})

_HEADER_ALIASES = {
    "date": "date",
    "open": "open",
    "high": "high",
    "low": "low",
    "close": "close",
    "close/last": "close",
    "adj. close": "adj_close",
    "adj close": "adj_close",
    "adj_close": "adj_close",
    "adjclose": "adj_close",
    "adjusted close": "adj_close",
    "volume": "volume",
}
_NASDAQ_COM_HEADERS = (("date", "close", "volume", "open", "high", "low"),
                       ("date", "close/last", "volume", "open", "high", "low"))
_EXCEL_SUFFIXES = frozenset({".xlsx", ".xlsm", ".xls"})
# python-calamine reads the FinTradeBench workbooks ~10x faster than openpyxl; both give the same cells.
_EXCEL_ENGINE = "calamine" if importlib.util.find_spec("python_calamine") else None


def load_prices(path: str | Path) -> pd.DataFrame:
    """Read one daily price file (nasdaq.com export, FinTradeBench history .xlsx/.csv, or plain OHLCV CSV).

    Returns a float64 frame indexed by ``date`` (ascending, unique) with :data:`PRICE_COLUMNS`;
    ``adj_close`` is all-NaN when the file has no adjusted close, ``open``/``high``/``low``/``volume``
    are NaN where the file marks them missing. ``attrs`` holds ``source`` (the path) and ``layout``.
    """
    path = Path(path)
    raw = _read_table(path)
    header = [str(name).strip() for name in raw.columns]
    layout = _detect_layout(header, path)
    raw.columns = [_HEADER_ALIASES.get(name.lower(), name) for name in header]
    # 1-based line of each row in the file: the header is line 1, data starts on line 2.
    lines = np.arange(len(raw)) + 2
    filled = raw.notna().any(axis=1).to_numpy()
    if not filled.all():  # blank lines are not data
        raw, lines = raw[filled].reset_index(drop=True), lines[filled]
    if raw.empty:
        raise DataError("no price rows", path=path, hint="the file has a header but no data")

    dates = _parse_dates(raw["date"], lines, path)
    columns = {name: _parse_numbers(raw[name], name, lines, path) if name in raw.columns
               else np.full(len(raw), np.nan) for name in PRICE_COLUMNS}
    _validate(dates, columns, lines, path)

    frame = pd.DataFrame(columns, index=pd.DatetimeIndex(dates, name="date").as_unit("ns"))
    if not frame.index.is_monotonic_increasing:  # nasdaq.com lists newest first
        frame = frame.sort_index()
    frame.attrs = {"source": str(path), "layout": layout}
    return frame


def price_column(df: pd.DataFrame) -> pd.Series:
    """The series signals are computed on: ``adj_close`` when the file had one, else ``close``."""
    if "adj_close" in df.columns and df["adj_close"].notna().any():
        return df["adj_close"]
    return df["close"]


def as_of(df: pd.DataFrame, date: str | dt.date | pd.Timestamp) -> pd.DataFrame:
    """Point-in-time view: only the rows dated on or before ``date``.

    Works on a price frame (date index) and on a signals frame (``Date`` column). A daily row
    carries that day's close, so callers that must not see the close of ``date`` itself should
    pass the previous day.
    """
    cutoff = pd.Timestamp(date)
    dates = pd.DatetimeIndex(df["Date"]) if "Date" in df.columns else pd.DatetimeIndex(df.index)
    return df[np.asarray(dates <= cutoff)]


def _read_table(path: Path) -> pd.DataFrame:
    """Cells as the fast readers give them: CSV numbers already parsed where clean, spreadsheet cells native."""
    if not path.is_file():
        raise DataError("file not found", path=path, hint="check the path, --data-dir or FINHARNESS_DATA_DIR")
    if path.suffix.lower() in _EXCEL_SUFFIXES:
        try:
            return pd.read_excel(path, sheet_name=0, dtype=object, engine=_EXCEL_ENGINE)
        except Exception as err:  # the engines raise many types for a damaged workbook
            raise DataError(f"cannot read the workbook: {err}", path=path) from None
    # "$" only ever appears as a currency sign in these exports; dropping it up front lets the C
    # parser read the prices (and thousands="," the volumes) instead of slow per-cell string work.
    text = read_text(path).replace("$", "")
    if not text.strip():
        raise DataError("file is empty", path=path)
    try:
        header = next(csv.reader(io.StringIO(text), skipinitialspace=True))  # as read_csv will name them
        dates_as_text = {name: str for name in header if name.strip().lower() == "date"}
        # skip_blank_lines=False keeps row i on line i + 2, so errors can name the line.
        return pd.read_csv(io.StringIO(text), thousands=",", skipinitialspace=True, skip_blank_lines=False,
                           keep_default_na=False, na_values=_CSV_MISSING_MARKERS, dtype=dates_as_text)
    except pd.errors.ParserError as err:
        detail = str(err).strip()
        where = re.search(r"line (\d+)", detail)
        raise DataError(f"malformed CSV: {detail}", path=path, line=int(where.group(1)) if where else None,
                        hint="every row needs one value per header column") from None


def _detect_layout(header: list[str], path: Path) -> str:
    lowered = tuple(name.lower() for name in header)
    if lowered in _NASDAQ_COM_HEADERS:
        return "nasdaq_com"
    canonical = {_HEADER_ALIASES[name] for name in lowered if name in _HEADER_ALIASES}
    absent = [column for column in REQUIRED_COLUMNS if column not in canonical]
    if absent:
        raise DataError(f"missing column(s) {absent}; found {header}", path=path, line=1,
                        hint="a price file needs Date, Open, High, Low, Close, Volume (Adj. Close optional)")
    if "adj. close" in lowered and "change" in lowered:
        return "fintradebench"
    return "ohlcv"


def _parse_dates(raw: pd.Series, lines: np.ndarray, path: Path) -> np.ndarray:
    """ISO text, spreadsheet dates or US M/D/YYYY (never D/M/Y); anything else is an error."""
    fixed_width = _mm_dd_yyyy(raw)
    if fixed_width is not None:
        return fixed_width
    first = raw.dropna().iloc[0] if raw.notna().any() else ""
    # Try the format the file starts with first: a failed whole-column attempt is the slow part.
    formats = ("%m/%d/%Y", "ISO8601") if "/" in str(first) else ("ISO8601", "%m/%d/%Y")
    dates = pd.to_datetime(raw, format=formats[0], errors="coerce")
    rest = dates.isna() & raw.notna()
    if rest.any():
        dates[rest] = pd.to_datetime(raw[rest].astype(str).str.strip(), format=formats[1], errors="coerce")
    bad = dates.isna().to_numpy()
    if bad.any():
        row = int(bad.argmax())
        raise DataError(f"date {_shown(raw.iloc[row])} does not parse", path=path, line=int(lines[row]),
                        hint="use YYYY-MM-DD or M/D/YYYY")
    return dates.to_numpy()


def _mm_dd_yyyy(raw: pd.Series) -> np.ndarray | None:
    """Dates when every cell is exactly MM/DD/YYYY (the nasdaq.com export), else None.

    Reads the digits as bytes: ~25x faster than strptime, which dominated loading those files.
    Anything irregular (other widths, a bad day) returns None and takes the general path, which
    names the offending line.
    """
    if not pd.api.types.is_string_dtype(raw) or raw.isna().any():
        return None
    try:
        cells = raw.to_numpy(dtype=object).astype("S11")  # 11 bytes: a 10-character cell leaves the last one 0
    except (UnicodeEncodeError, ValueError, TypeError):
        return None
    codes = cells.view(np.uint8).reshape(len(cells), 11)
    if not ((codes[:, [2, 5]] == ord("/")).all() and (codes[:, 10] == 0).all()):
        return None
    digits = codes[:, [0, 1, 3, 4, 6, 7, 8, 9]].astype(np.int64) - ord("0")
    if ((digits < 0) | (digits > 9)).any():
        return None
    month, day = digits[:, 0] * 10 + digits[:, 1], digits[:, 2] * 10 + digits[:, 3]
    year = digits[:, 4:] @ np.array([1000, 100, 10, 1])
    first_of_month = ((year - 1970) * 12 + month - 1).astype("datetime64[M]")
    dates = first_of_month.astype("datetime64[D]") + (day - 1)
    # A day past the month's end rolls into the next month: that is what catches 02/30.
    valid = (month >= 1) & (month <= 12) & (day >= 1) & (dates.astype("datetime64[M]") == first_of_month)
    return dates if valid.all() else None


def _parse_numbers(raw: pd.Series, column: str, lines: np.ndarray, path: Path) -> np.ndarray:
    """Numbers as read; cells the fast path left unparsed get "$", "," and spaces removed, then must parse."""
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    rest = np.isnan(values) & raw.notna().to_numpy()
    if rest.any():
        text = raw[rest].astype(str).str.strip()
        cleaned = pd.to_numeric(text.str.replace(r"[$,\s]", "", regex=True), errors="coerce")
        bad = (cleaned.isna() & ~text.str.lower().isin(_MISSING_MARKERS)).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(rest)[bad.argmax()])
            raise DataError(f"{column} {_shown(raw.iloc[row])} is not a number", path=path, line=int(lines[row]))
        values[rest] = cleaned.to_numpy(dtype="float64", na_value=np.nan)
    if column not in _NULLABLE_COLUMNS and np.isnan(values).any():
        row = int(np.isnan(values).argmax())
        raise DataError(f"{column} is missing", path=path, line=int(lines[row]),
                        hint="every trading day needs a price; drop the row or fill it in")
    return values


def _validate(dates: np.ndarray, columns: dict[str, np.ndarray], lines: np.ndarray, path: Path) -> None:
    for name in ("open", "high", "low", "close", "adj_close"):
        non_positive = columns[name] <= 0  # NaN compares False: missing is checked elsewhere
        if non_positive.any():
            row = int(non_positive.argmax())
            raise DataError(f"{name} {columns[name][row]:g} is not positive", path=path, line=int(lines[row]),
                            hint="prices must be > 0")
    negative_volume = columns["volume"] < 0
    if negative_volume.any():
        row = int(negative_volume.argmax())
        raise DataError(f"volume {columns['volume'][row]:g} is negative", path=path, line=int(lines[row]))
    repeated = pd.Index(dates).duplicated()
    if repeated.any():
        row = int(repeated.argmax())
        first = int((dates == dates[row]).argmax())
        raise DataError(f"duplicate date {pd.Timestamp(dates[row]):%Y-%m-%d} (first on line {int(lines[first])})",
                        path=path, line=int(lines[row]), hint="keep one row per trading day")


def _shown(value: object) -> str:
    return "(empty)" if pd.isna(value) or value == "" else repr(value)
