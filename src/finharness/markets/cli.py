"""`finharness markets ...`: trading signals from a price file. pandas is imported inside commands."""

from __future__ import annotations

from pathlib import Path

import typer

from ..cli_common import fail
from ..data.io import atomic_write_text

markets_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                          help="Market data: prices and the FinTradeBench trading signals.")


@markets_app.command("signals")
def signals_command(
    prices: Path = typer.Option(..., "--prices", help="Daily price file: nasdaq.com export, FinTradeBench "
                                                      "history .xlsx/.csv, or an OHLCV CSV."),
    out: Path = typer.Option(..., "--out", help="CSV to write: Date and the 14 FinTradeBench signals."),
) -> None:
    """Compute the FinTradeBench trading signals for one price file."""
    from finharness.data.errors import DataError

    from .prices import load_prices
    from .signals import compute_signals

    try:
        table = compute_signals(load_prices(prices))
    except DataError as err:
        fail(str(err))
    atomic_write_text(out, table.to_csv(index=False, date_format="%Y-%m-%d"))
    typer.echo(f"{len(table)} rows -> {out}")
