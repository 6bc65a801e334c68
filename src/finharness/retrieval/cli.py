"""`finharness retrieve`: point-in-time FinTradeBench retrieval from the command line.

Heavy libraries (bm25s, onnxruntime, pandas, lxml) are imported inside the command.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..cli_common import fail, resolve_data_dir


def retrieve_command(
    ticker: str = typer.Option(..., "--ticker", help="Ticker, e.g. AAPL (folders like Goog match GOOG)."),
    as_of: str = typer.Option(..., "--as-of", help="YYYY-MM-DD: nothing filed or priced after it is retrieved."),
    query: str = typer.Option(..., "--query", help="The question to retrieve for."),
    k: int = typer.Option(3, "--k", min=0, help="Filing sections to return (track A quota)."),
    price_tables: int = typer.Option(2, "--price-tables", min=0, help="Monthly price tables (track B quota)."),
    budget: int = typer.Option(2000, "--budget", min=1, help="Token budget of all returned texts (approx. tokens)."),
    dense: str = typer.Option("auto", "--dense", help="auto | on | off: the MiniLM dense retriever."),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="Data root holding fintradebench/ "
                                                                     "(default: $FINHARNESS_DATA_DIR)."),
    as_json: bool = typer.Option(False, "--json", help="Print the items as a JSON list."),
) -> None:
    """Retrieve filing sections and price tables for a question, as of a date.

    JSON output: a list of {"track", "source", "date", "score", "text"}; track is "filings" (A) or
    "prices" (B); date is the filing date or the last price date in the table. How retrieval ran
    (dense on or not, fusion, truncations) is printed on stderr.
    """
    import datetime as dt

    from finharness.data.errors import DataError

    from .dense import DenseUnavailable
    from .retrieve import RetrievalConfig, Retriever

    try:
        as_of_date = dt.date.fromisoformat(as_of)
    except ValueError:
        raise typer.BadParameter(f"{as_of!r} is not a date; use YYYY-MM-DD", param_hint="--as-of") from None
    if dense not in ("auto", "on", "off"):
        raise typer.BadParameter("use auto, on or off", param_hint="--dense")
    config = RetrievalConfig(filing_quota=k, price_tables=price_tables, budget_tokens=budget, dense=dense)
    try:
        result = Retriever(resolve_data_dir(data_dir), config, progress=True).retrieve(query, ticker, as_of_date)
    except (DataError, DenseUnavailable) as err:
        fail(str(err))
    typer.echo(f"retrieval: {len(result.items)} items, {result.tokens_used}/{result.budget_tokens} tokens, "
               f"{result.truncated} truncated, {result.dropped} dropped; dense {result.dense}; "
               f"fusion {result.fusion}; reranker {result.reranker}; "
               f"{result.filings_considered} filings on or before {result.as_of}", err=True)
    if as_json:
        typer.echo(json.dumps([{"track": item.track, "source": item.source, "date": item.date,
                                "score": item.score, "text": item.text} for item in result.items],
                              ensure_ascii=False, indent=2))
        return
    for item in result.items:
        typer.echo(f"--- {item.track} {item.date} {item.source} (score {item.score:.4f}"
                   f"{', truncated' if item.truncated else ''})\n{item.text}\n")
