"""`markets signals` through the real command line."""

from __future__ import annotations

import numpy as np
import pandas as pd
import typer
from typer.testing import CliRunner

from finharness.markets.prices import load_prices
from finharness.markets.signals import SIGNAL_COLUMNS, compute_signals


def make_app() -> typer.Typer:
    from finharness.cli import app

    return app


def write_prices(path, n=40):
    rng = np.random.default_rng(1)
    close = np.round(20 + np.cumsum(rng.normal(0, 0.3, n)), 2)
    days = pd.bdate_range("2023-01-02", periods=n)
    lines = ["Date,Close,Volume,Open,High,Low"]
    for day, price in zip(reversed(days), reversed(close)):  # nasdaq.com order: newest first
        lines.append(f'{day:%m/%d/%Y},${price:.2f},"1,000",${price:.2f},${price:.2f},${price:.2f}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_signals_writes_date_and_exactly_the_signal_columns(tmp_path):
    prices = write_prices(tmp_path / "X.csv")
    out = tmp_path / "deep" / "X-signals.csv"
    result = CliRunner().invoke(make_app(), ["markets", "signals", "--prices", str(prices), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "40 rows" in result.output
    written = pd.read_csv(out)
    assert list(written.columns) == ["Date", *SIGNAL_COLUMNS]
    assert written["Date"].iloc[0] == "2023-01-02" and written["Date"].is_monotonic_increasing
    expected = compute_signals(load_prices(prices))
    for name in SIGNAL_COLUMNS:
        np.testing.assert_allclose(written[name], expected[name], rtol=1e-12, equal_nan=True, err_msg=name)
    assert [p.name for p in out.parent.iterdir()] == ["X-signals.csv"]  # no temporary file left behind


def test_bad_price_file_exits_2_naming_the_line_and_writes_nothing(tmp_path):
    prices = write_prices(tmp_path / "X.csv")
    prices.write_text(prices.read_text() + "13/45/2023,$1,1,$1,$1,$1\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    result = CliRunner().invoke(make_app(), ["markets", "signals", "--prices", str(prices), "--out", str(out)])
    assert result.exit_code == 2
    assert f"{prices}:42:" in result.output and "does not parse" in result.output
    assert not out.exists()
