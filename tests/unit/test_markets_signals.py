"""compute_signals against a naive loop, hand-computed rows, window starts on a real file, official values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from finharness.markets.prices import load_prices
from finharness.markets.signals import SIGNAL_COLUMNS, compute_signals


def price_frame(close, volume=None, adj_close=None, start="2015-01-02") -> pd.DataFrame:
    close = np.asarray(close, dtype=float)
    n = len(close)
    return pd.DataFrame(
        {
            "open": close, "high": close, "low": close, "close": close,
            "adj_close": np.full(n, np.nan) if adj_close is None else np.asarray(adj_close, dtype=float),
            "volume": np.full(n, 1000.0) if volume is None else np.asarray(volume, dtype=float),
        },
        index=pd.DatetimeIndex(pd.bdate_range(start, periods=n), name="date"),
    )


def naive_signals(p: list[float], volume: list[float]) -> dict[str, list[float]]:
    """The formulas written out with plain loops, one row at a time."""
    n, nan = len(p), math.nan
    out = {name: [nan] * n for name in SIGNAL_COLUMNS}

    def ema(values, span):
        alpha, result = 2 / (span + 1), [values[0]]
        for value in values[1:]:
            result.append(alpha * value + (1 - alpha) * result[-1])
        return result

    ema12, ema26 = ema(p, 12), ema(p, 26)
    macd = [a - b for a, b in zip(ema12, ema26)]
    out["EMA_20"], out["MACD"], out["MACD_Signal"] = ema(p, 20), macd, ema(macd, 9)
    change = [0.0] + [p[t] - p[t - 1] for t in range(1, n)]
    r = [nan] + [p[t] / p[t - 1] - 1 for t in range(1, n)]
    obv = 0.0
    for t in range(n):
        obv += (change[t] > 0) * volume[t] - (change[t] < 0) * volume[t]
        out["OBV"][t] = obv
        out["One_Day_Reversal"][t] = r[t]
        if t >= 19:
            out["MA_20"][t] = sum(p[t - 19:t + 1]) / 20
        if t >= 13:
            gain = sum(max(c, 0) for c in change[t - 13:t + 1]) / 14
            loss = sum(max(-c, 0) for c in change[t - 13:t + 1]) / 14
            out["RSI"][t] = (100.0 if gain > 0 else nan) if loss == 0 else 100 - 100 / (1 + gain / loss)
        if t >= 20:
            out["Max_Return_20D"][t] = max(r[t - 19:t + 1])
            out["Momentum_20D"][t] = p[t] / p[t - 20] - 1
        if t >= 5:
            out["Momentum_5D"][t] = p[t] / p[t - 5] - 1
        if t >= 59:
            out["Mean_Reversal_60D"][t] = p[t] / (sum(p[t - 59:t + 1]) / 60) - 1
        if t >= 22:
            out["Short_Term_Reversal_1month"][t] = p[t - 1] / p[t - 22] - 1
        if t >= 252:
            out["Medium_Term_Momentum_2month_to_12month"][t] = p[t - 42] / p[t - 252] - 1
        if t >= 1260:
            out["Long_Term_Reversal_13month_to_60month"][t] = p[t - 273] / p[t - 1260] - 1
    return out


def random_walk(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    price = 50 * np.exp(np.cumsum(rng.normal(0, 0.02, n)))
    price = np.round(price, 2)  # cents: gives days with no change at all
    return price, rng.integers(1_000, 1_000_000, n).astype(float)


def test_matches_a_naive_loop_on_every_row_and_column():
    price, volume = random_walk(1_320, seed=7)
    price[300:320] = price[299]  # a flat stretch: RSI is 0/0, OBV adds nothing
    got = compute_signals(price_frame(price, volume))
    want = naive_signals(price.tolist(), volume.tolist())
    assert list(got.columns) == ["Date", *SIGNAL_COLUMNS]
    assert len(got) == len(price)
    for name in SIGNAL_COLUMNS:
        np.testing.assert_allclose(got[name].to_numpy(), np.array(want[name]), rtol=1e-9, atol=1e-9,
                                   equal_nan=True, err_msg=name)
    # The flat stretch really exercised the 0/0 RSI case, and the long window really filled.
    assert got["RSI"].iloc[313:320].isna().all() and got["RSI"].iloc[320:].notna().all()
    assert got["Long_Term_Reversal_13month_to_60month"].notna().sum() == len(price) - 1260


def test_hand_computed_rows():
    p = [10.0, 11.0, 10.0, 12.0, 12.0, 13.0, 9.0]
    volume = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0]
    got = compute_signals(price_frame(p, volume))
    # OBV: 0, +200, -300, +400, 0 (no change), +600, -700
    assert got["OBV"].tolist() == [0, 200, -100, 300, 300, 900, 200]
    assert got["One_Day_Reversal"][1] == pytest.approx(0.1)
    assert got["One_Day_Reversal"][2] == pytest.approx(-1 / 11)
    assert got["Momentum_5D"][5] == pytest.approx(13 / 10 - 1)
    assert got["Momentum_5D"][6] == pytest.approx(9 / 11 - 1)
    assert got["Momentum_5D"][:5].isna().all()
    # EWM with adjust=False: e1 = e0 + alpha (p1 - p0), alpha = 2 / (span + 1)
    assert got["EMA_20"][0] == 10.0
    assert got["EMA_20"][1] == pytest.approx(10 + (2 / 21) * 1)
    assert got["MACD"][0] == 0.0
    assert got["MACD"][1] == pytest.approx((10 + 2 / 13) - (10 + 2 / 27))


def test_rsi_on_its_first_full_window():
    # 14 rows: changes +1, -2, +3, then flat; the first row's missing change counts as none.
    p = [10.0, 11.0, 9.0, 12.0] + [12.0] * 10
    got = compute_signals(price_frame(p))
    gains, losses = (1 + 3) / 14, 2 / 14
    assert got["RSI"][:13].isna().all()
    assert got["RSI"][13] == pytest.approx(100 - 100 / (1 + gains / losses))  # = 66.67


def test_rsi_is_100_without_losses_and_uses_adjusted_close_when_present():
    close = np.linspace(10, 20, 30)
    adjusted = close[::-1].copy()  # falling: any use of close instead would show
    got = compute_signals(price_frame(close, adj_close=adjusted))
    assert got["RSI"].iloc[-1] == pytest.approx(0.0)
    assert compute_signals(price_frame(close))["RSI"].iloc[-1] == 100.0


@pytest.mark.parametrize("rows", [0, 1, 3])
def test_series_shorter_than_every_window(rows):
    got = compute_signals(price_frame([10.0, 11.0, 12.0][:rows]))
    assert list(got.columns) == ["Date", *SIGNAL_COLUMNS] and len(got) == rows
    assert got["MA_20"].isna().all() and got["Long_Term_Reversal_13month_to_60month"].isna().all()
    if rows == 3:
        assert got["Momentum_5D"].isna().all() and got["One_Day_Reversal"].tolist()[1:] == pytest.approx([0.1, 1 / 11])


def test_rows_are_sorted_by_date_before_computing():
    price, volume = random_walk(80, seed=3)
    frame = price_frame(price, volume)
    shuffled = frame.sample(frac=1, random_state=0)
    pd.testing.assert_frame_equal(compute_signals(shuffled), compute_signals(frame))


# Trading rows before which each signal is NaN: the window length the formula needs.
FIRST_VALUE_ROW = {
    "MA_20": 19, "EMA_20": 0, "MACD": 0, "MACD_Signal": 0, "RSI": 13, "OBV": 0, "One_Day_Reversal": 1,
    "Max_Return_20D": 20, "Momentum_5D": 5, "Momentum_20D": 20, "Mean_Reversal_60D": 59,
    "Short_Term_Reversal_1month": 22, "Medium_Term_Momentum_2month_to_12month": 252,
    "Long_Term_Reversal_13month_to_60month": 1260,
}


def test_windows_start_at_the_right_row_on_a_real_file(shared_data):
    prices = load_prices(shared_data / "nasdaq100_ohlcv" / "nasdaq_com_2014_2024" / "AAPL.csv")
    got = compute_signals(prices)
    assert len(got) == len(prices) > 1260
    assert got["Date"].tolist() == prices.index.tolist()
    for name, first in FIRST_VALUE_ROW.items():
        values = got[name]
        assert values.iloc[:first].isna().all(), name
        assert values.iloc[first:].notna().all(), name  # no gaps once the window is full
    # Spot-check one row of a long window against the raw closes.
    t = 1300
    close = prices["close"].to_numpy()
    assert got["Long_Term_Reversal_13month_to_60month"][t] == pytest.approx(close[t - 273] / close[t - 1260] - 1)


# Rows of GOOG-daily_with_fundamentals.csv from the FinTradeBench release
# (fintradebench-anonymous/PaperSubmission @ 20670c8, dummy_data/Precomputed_Contexts), the
# official signals for the same GOOG history the shared data holds.
OFFICIAL_GOOG_ROWS = {
    "2014-04-30": {"MA_20": 26.74925, "MACD": -0.4446329134034812, "MACD_Signal": -0.3872011893759201,
                   "RSI": 34.98951443781256, "EMA_20": 26.62037222786805, "OBV": -94568000.0,
                   "One_Day_Reversal": -0.0019462677453824, "Max_Return_20D": 0.0375028155266912,
                   "Momentum_5D": -0.0005350250315283, "Momentum_20D": -0.0714032097713394,
                   "Short_Term_Reversal_1month": -0.05768124280782505},
    "2014-06-23": {"MA_20": 27.56725, "RSI": 66.77931733693813, "EMA_20": 27.39486133739547,
                   "OBV": 109100000.0, "Mean_Reversal_60D": 0.0420802974612897,
                   "Short_Term_Reversal_1month": 0.03232074132197438},
    "2019-11-29": {"MA_20": 64.7677, "MACD": 0.6693278304877026, "MACD_Signal": 0.8154486805926213,
                   "RSI": 47.2529371112647, "EMA_20": 64.48857922690792, "OBV": 618410700.0,
                   "One_Day_Reversal": -0.0061042944785275, "Max_Return_20D": 0.0178582396658684,
                   "Momentum_5D": 0.0027854291108291, "Momentum_20D": 0.0356058426822643,
                   "Mean_Reversal_60D": 0.0399048495032923, "Short_Term_Reversal_1month": 0.03988899344487162,
                   "Medium_Term_Momentum_2month_to_12month": 0.10943641082684485,
                   "Long_Term_Reversal_13month_to_60month": 0.8877170753521653},
}


def test_matches_the_official_precomputed_goog_signals(shared_data):
    got = compute_signals(load_prices(shared_data / "fintradebench" / "history_xlsx" / "GOOG-history.xlsx"))
    got = got.set_index("Date")
    for day, official in OFFICIAL_GOOG_ROWS.items():
        for name, value in official.items():
            assert got.at[pd.Timestamp(day), name] == pytest.approx(value, rel=1e-9), (day, name)
    # The official file leaves these empty on 2014-06-23: windows not yet full.
    assert np.isnan(got.at[pd.Timestamp("2014-06-23"), "Medium_Term_Momentum_2month_to_12month"])
