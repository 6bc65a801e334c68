"""The FinTradeBench trading signals, computed exactly as the official precomputed contexts.

Formulas follow ``compute_financial_signals.py`` of the FinTradeBench release (the first eleven
signals) and the ``*-daily_with_fundamentals.csv`` files it shipped (the three long-horizon ones,
which that script does not compute). ``t`` counts trading rows, not calendar days:

- price ``P`` = Adj. Close when the file has one, else Close; ``r`` = one-day return of ``P``
- ``MA_20`` = 20-row simple mean of ``P``; ``EMA_20`` = EWM of ``P``, span 20, ``adjust=False``
- ``MACD`` = EWM(P, 12) − EWM(P, 26); ``MACD_Signal`` = EWM(MACD, 9) (spans, ``adjust=False``)
- ``RSI`` = 100 − 100 / (1 + G / L), G and L the 14-row simple means of gains and losses of ``ΔP``
  (the first row's missing ``ΔP`` counts as no gain and no loss)
- ``OBV`` = cumulative sum of sign(ΔP) · Volume (first row 0; a missing volume adds 0)
- ``One_Day_Reversal`` = r; ``Max_Return_20D`` = max of r over the last 20 rows
- ``Momentum_5D`` / ``Momentum_20D`` = P(t)/P(t−5) − 1, P(t)/P(t−20) − 1
- ``Mean_Reversal_60D`` = P / (60-row mean of P) − 1
- ``Short_Term_Reversal_1month`` = P(t−1)/P(t−22) − 1
- ``Medium_Term_Momentum_2month_to_12month`` = P(t−42)/P(t−252) − 1
- ``Long_Term_Reversal_13month_to_60month`` = P(t−273)/P(t−1260) − 1

Windowed signals are NaN until their window is full. The EWM-based ones (EMA_20, MACD,
MACD_Signal) have no window and start on the first row, as in the official files. RSI is NaN
where a 14-row window has neither gains nor losses (0/0) and 100 where it has no losses.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .prices import price_column

SIGNAL_COLUMNS = (
    "MA_20",
    "EMA_20",
    "MACD",
    "MACD_Signal",
    "RSI",
    "OBV",
    "One_Day_Reversal",
    "Max_Return_20D",
    "Momentum_5D",
    "Momentum_20D",
    "Mean_Reversal_60D",
    "Short_Term_Reversal_1month",
    "Medium_Term_Momentum_2month_to_12month",
    "Long_Term_Reversal_13month_to_60month",
)
"""The official signal columns, in the order of the output frame (after ``Date``)."""


def compute_signals(prices: pd.DataFrame) -> pd.DataFrame:
    """Signals for a price frame from :func:`~finharness.markets.prices.load_prices`.

    Returns one row per input date, ascending: a ``Date`` column and exactly :data:`SIGNAL_COLUMNS`.
    """
    prices = prices if prices.index.is_monotonic_increasing else prices.sort_index()
    # numpy for the element-wise parts, pandas only for rolling windows and EWMs: a few thousand
    # rows make per-operation overhead, not arithmetic, the cost.
    price = price_column(prices).to_numpy(dtype="float64")
    volume = prices["volume"].to_numpy(dtype="float64")
    series = pd.Series(price)

    def lagged(rows: int) -> np.ndarray:
        """P(t − rows), NaN before the series has that many rows."""
        out = np.full(len(price), np.nan)
        out[rows:] = price[: max(len(price) - rows, 0)]
        return out

    def ratio(near: int, far: int) -> np.ndarray:
        """P(t − near) / P(t − far) − 1."""
        return lagged(near) / lagged(far) - 1

    def ewm(values: pd.Series, span: int) -> pd.Series:
        return values.ewm(span=span, adjust=False).mean()

    def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
        return pd.Series(values).rolling(window).mean().to_numpy()

    move = np.nan_to_num(price - lagged(1))  # ΔP, the first row's missing one counted as 0
    daily_return = ratio(0, 1)
    gains, losses = rolling_mean(np.maximum(move, 0), 14), rolling_mean(np.maximum(-move, 0), 14)
    with np.errstate(divide="ignore", invalid="ignore"):
        rsi = 100 - 100 / (1 + gains / losses)
    macd = ewm(series, 12) - ewm(series, 26)

    signals = {
        "MA_20": rolling_mean(price, 20),
        "EMA_20": ewm(series, 20).to_numpy(),
        "MACD": macd.to_numpy(),
        "MACD_Signal": ewm(macd, 9).to_numpy(),
        "RSI": rsi,
        "OBV": np.cumsum(np.nan_to_num(np.sign(move) * volume)),  # a missing volume adds 0
        "One_Day_Reversal": daily_return,
        "Max_Return_20D": pd.Series(daily_return).rolling(20).max().to_numpy(),
        "Momentum_5D": ratio(0, 5),
        "Momentum_20D": ratio(0, 20),
        "Mean_Reversal_60D": price / rolling_mean(price, 60) - 1,
        "Short_Term_Reversal_1month": ratio(1, 22),
        "Medium_Term_Momentum_2month_to_12month": ratio(42, 252),
        "Long_Term_Reversal_13month_to_60month": ratio(273, 1260),
    }
    return pd.DataFrame({"Date": prices.index.to_numpy(), **{name: signals[name] for name in SIGNAL_COLUMNS}})
