"""load_prices: the three layouts, value parsing, errors that name file and line, as_of."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from finharness.data.errors import DataError
from finharness.markets.prices import PRICE_COLUMNS, as_of, load_prices, price_column

NASDAQ_COM = """Date,Close,Volume,Open,High,Low
03/05/2024,$170.12,"95,132,400",$170.76,$172.04,$169.62
03/04/2024,$175.10,N/A,$176.15,$176.90,$173.79
03/01/2024,$179.66,"73,563,080",$179.55,$180.53,$177.38
"""

FINTRADEBENCH_CSV = """Date,Open,High,Low,Close,Adj. Close,Change,Volume
3/1/2024,10.5,11,10,10.8,10.2,0.01,1000
3/4/2024,10.8,11.2,10.6,11.0,10.4,0.0185,1200
2024-03-05,11.0,11.5,10.9,11.4,10.8,0.0364,900
"""

PLAIN_OHLCV = """date,open,high,low,close,volume
2024-01-02,1.0,1.2,0.9,1.1,100
2024-01-03,1.1,1.3,1.0,1.2,0
"""


def write(tmp_path: Path, text: str, name: str = "prices.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_nasdaq_com_export_is_parsed_and_sorted_ascending(tmp_path):
    df = load_prices(write(tmp_path, NASDAQ_COM))
    assert df.attrs["layout"] == "nasdaq_com"
    assert list(df.columns) == list(PRICE_COLUMNS)
    assert list(df.index.strftime("%Y-%m-%d")) == ["2024-03-01", "2024-03-04", "2024-03-05"]
    first = df.loc["2024-03-01"]
    assert (first.open, first.high, first.low, first.close, first.volume) == (179.55, 180.53, 177.38, 179.66, 73563080)
    assert np.isnan(df.loc["2024-03-04", "volume"])  # nasdaq.com writes N/A for some volumes
    assert df["adj_close"].isna().all()
    assert price_column(df).equals(df["close"])


def test_fintradebench_csv_mixes_us_and_iso_dates_and_prefers_adjusted_close(tmp_path):
    df = load_prices(write(tmp_path, FINTRADEBENCH_CSV))
    assert df.attrs["layout"] == "fintradebench"
    assert list(df.index.strftime("%Y-%m-%d")) == ["2024-03-01", "2024-03-04", "2024-03-05"]
    assert list(price_column(df)) == [10.2, 10.4, 10.8]


def test_fintradebench_xlsx_with_spreadsheet_and_text_dates(tmp_path):
    # The official workbooks switch from date cells to ISO text after 9,998 rows.
    rows = pd.DataFrame({
        "Date": [dt.datetime(2024, 3, 1), dt.datetime(2024, 3, 4), "2024-03-05"],
        "Open": [10.5, 10.8, 11.0], "High": [11, 11.2, 11.5], "Low": [10, 10.6, 10.9],
        "Close": [10.8, 11.0, 11.4], "Adj. Close": [10.2, 10.4, 10.8], "Change": [0.01, 0.0185, 0.0364],
        "Volume": [1000, 1200, 900],
    })
    path = tmp_path / "X-history.xlsx"
    rows.to_excel(path, index=False, sheet_name="Export")
    df = load_prices(path)
    assert df.attrs["layout"] == "fintradebench"
    assert list(df.index.strftime("%Y-%m-%d")) == ["2024-03-01", "2024-03-04", "2024-03-05"]
    assert list(df["adj_close"]) == [10.2, 10.4, 10.8]
    assert list(df["volume"]) == [1000, 1200, 900]


def test_plain_ohlcv_without_adjusted_close(tmp_path):
    df = load_prices(write(tmp_path, PLAIN_OHLCV))
    assert df.attrs["layout"] == "ohlcv"
    assert df["adj_close"].isna().all()
    assert list(df["volume"]) == [100, 0]
    assert (df.dtypes == "float64").all()


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (PLAIN_OHLCV + "2024-13-45,1,1,1,1,1\n", 4, "date '2024-13-45' does not parse"),
        (PLAIN_OHLCV + "2024-01-02,1,1,1,1,1\n", 4, "duplicate date 2024-01-02 (first on line 2)"),
        (PLAIN_OHLCV + "2024-01-04,1,1,1,0,1\n", 4, "close 0 is not positive"),
        (PLAIN_OHLCV + "2024-01-04,1,1,-2,1,1\n", 4, "low -2 is not positive"),
        (PLAIN_OHLCV + "2024-01-04,1,1,1,abc,1\n", 4, "close 'abc' is not a number"),
        (PLAIN_OHLCV + "2024-01-04,1,1,1,,1\n", 4, "close is missing"),
        (PLAIN_OHLCV + "2024-01-04,1,1,1,1,-5\n", 4, "volume -5 is negative"),
        (PLAIN_OHLCV + "\n\n2024-01-04,1,1,1,x,1\n", 6, "close 'x' is not a number"),  # blank lines still count
        ("date,open,high,low,volume\n2024-01-02,1,1,1,1\n", 1, "missing column(s) ['close']"),
        (PLAIN_OHLCV + "2024-01-04,1,1,1,1,1,7\n", 4, "malformed CSV"),
    ],
)
def test_bad_rows_name_the_file_and_line(tmp_path, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(DataError) as err:
        load_prices(path)
    assert err.value.path == str(path)
    assert err.value.line == line
    assert words in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize("bad_date", ["02/30/2024", "13/01/2024", "03-01-2024", "3/1/24"])
def test_bad_nasdaq_dates_are_named(tmp_path, bad_date):
    text = NASDAQ_COM.replace("03/04/2024", bad_date)
    with pytest.raises(DataError, match=f":3: date '{bad_date}' does not parse"):
        load_prices(write(tmp_path, text))


def test_duplicate_date_in_nasdaq_layout_counts_lines_in_file_order(tmp_path):
    text = NASDAQ_COM + '03/04/2024,$175.10,"1,000",$176.15,$176.90,$173.79\n'
    with pytest.raises(DataError, match=r":5: duplicate date 2024-03-04 \(first on line 3\)"):
        load_prices(write(tmp_path, text))


def test_xlsx_errors_name_the_spreadsheet_row(tmp_path):
    rows = pd.DataFrame({"Date": ["2024-03-01", "yesterday"], "Open": [1.0, 1.0], "High": [1.0, 1.0],
                         "Low": [1.0, 1.0], "Close": [1.0, 1.0], "Volume": [1, 1]})
    path = tmp_path / "bad.xlsx"
    rows.to_excel(path, index=False)
    with pytest.raises(DataError) as err:
        load_prices(path)
    assert err.value.line == 3 and "'yesterday' does not parse" in str(err.value)


@pytest.mark.parametrize(("text", "words"), [("", "file is empty"), ("date,open,high,low,close,volume\n", "no price rows")])
def test_empty_files(tmp_path, text, words):
    with pytest.raises(DataError, match=words):
        load_prices(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_prices(tmp_path / "nope.csv")


def test_as_of_keeps_rows_on_or_before_the_date_for_prices_and_signal_tables(tmp_path):
    df = load_prices(write(tmp_path, NASDAQ_COM))
    assert list(as_of(df, "2024-03-04").index.strftime("%Y-%m-%d")) == ["2024-03-01", "2024-03-04"]
    assert len(as_of(df, pd.Timestamp("2024-03-03"))) == 1
    assert as_of(df, "2020-01-01").empty
    assert len(as_of(df, dt.date(2030, 1, 1))) == 3
    table = pd.DataFrame({"Date": df.index, "x": range(3)})  # a signals-shaped frame
    assert list(as_of(table, "2024-03-04")["x"]) == [0, 1]


# ---- the real files -------------------------------------------------------------------------


def _data_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]


def test_real_nasdaq_export_loads_every_row(shared_data):
    path = shared_data / "nasdaq100_ohlcv" / "nasdaq_com_2014_2024" / "FOX.csv"
    cells = [line.split(",", 2) for line in _data_lines(path)]  # date, close, rest (volume is quoted)
    df = load_prices(path)
    assert df.index.tolist() == sorted(dt.datetime.strptime(date, "%m/%d/%Y") for date, _, _ in cells)
    assert df["close"].tolist() == [float(close.lstrip("$")) for _, close, _ in reversed(cells)]
    assert df["volume"].isna().sum() == sum(rest.startswith("N/A,") for _, _, rest in cells) > 0


def test_every_shared_price_file_loads(shared_data):
    paths = sorted((shared_data / "nasdaq100_ohlcv" / "nasdaq_com_2014_2024").glob("*.csv"))
    paths += sorted((shared_data / "fintradebench" / "history_xlsx").glob("*.xlsx"))
    assert len(paths) == 150
    for path in paths:
        df = load_prices(path)
        assert df.index.is_monotonic_increasing and df.index.is_unique, path
        assert (price_column(df) > 0).all() and len(df) == len(price_column(df).dropna()), path


def test_real_fintradebench_workbook_loads_every_row(shared_data):
    path = shared_data / "fintradebench" / "history_xlsx" / "AAPL-history.xlsx"
    reference = pd.read_excel(path, engine="openpyxl")  # the other engine, read independently
    df = load_prices(path)
    assert df.attrs["layout"] == "fintradebench"
    assert len(df) == len(reference)
    assert df.index.is_monotonic_increasing and df.index.is_unique
    assert df.index[-1] == pd.Timestamp(str(reference["Date"].iloc[-1]))
    np.testing.assert_array_equal(df["adj_close"].to_numpy(), reference["Adj. Close"].to_numpy(dtype=float))
    assert price_column(df).equals(df["adj_close"])
