"""`finharness fintradebench scale|compare|agreement|fundamentals`.

Mounted as `finharness fintradebench`, its `build` group from construction/cli.py (its BENCHMARK declaration
COMMANDS); heavy imports happen inside the commands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ...cli_common import fail, resolve_data_dir

fintradebench_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                                help="FinTradeBench: scale questions, compare No-RAG vs RAG runs, judge agreement, "
                                     "fundamentals vs the official values.")


@fintradebench_app.command("scale")
def scale_command(
    n: int = typer.Option(..., "--n", help="How many variants to write."),
    seed: int = typer.Option(0, "--seed", help="Random seed (the same seed gives the same file)."),
    out: Path = typer.Option(..., "--out", help="Question CSV to write (run it with -o questions=FILE)."),
    data_dir: Optional[Path] = typer.Option(None, help="Data root holding fintradebench/ and nasdaq100_ohlcv/."),
    questions: Optional[Path] = typer.Option(None, help="Seed questions (default: the 150 seed questions)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Write N variants of the seed questions across tickers and dates, each answerable by the data."""
    from ...data.errors import DataError
    from .ideal import MarketData
    from .questions import SEED_FILE, read_questions
    from .scaling import scale_questions, write_variants

    root = resolve_data_dir(data_dir)
    try:
        seeds = read_questions(questions or root / SEED_FILE, MarketData(root).tickers_with_prices())
        variants, report = scale_questions(seeds, root, n, seed)
    except DataError as err:
        fail(str(err))
    write_variants(variants, out)
    summary = {"written": report.written, "requested": n, "attempts": report.attempts, "out": str(out),
               "skipped_seeds": dict(report.skipped_seeds), "rejected": dict(report.rejected)}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        typer.echo(f"wrote {report.written} of {n} variants to {out} ({report.attempts} draws; rejected "
                   f"{dict(report.rejected)}; seeds not scaled {dict(report.skipped_seeds)})")


@fintradebench_app.command("compare")
def compare_command(
    norag_dir: Path = typer.Argument(..., help="Run directory of the No-RAG run."),
    rag_dir: Path = typer.Argument(..., help="Run directory of the RAG run (same model, same questions)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Accuracy per category, RAG Δ % and the paired t-test (* p < 0.05, ** p < 0.01)."""
    from ...data.errors import DataError
    from .analysis import compare_modes, format_comparison

    try:
        result = compare_modes(norag_dir, rag_dir)
    except DataError as err:
        fail(str(err))
    typer.echo(json.dumps(result, indent=2) if as_json else format_comparison(result))


@fintradebench_app.command("agreement")
def agreement_command(
    human_csv: Path = typer.Argument(..., help="Human scores: question_id and correctness (1-5)."),
    run_dir: Path = typer.Argument(..., help="The judged run."),
) -> None:
    """Judge-human agreement on correctness: MAE, Spearman, Cohen's κ (JSON)."""
    from ...data.errors import DataError
    from .analysis import judge_agreement

    try:
        typer.echo(json.dumps(judge_agreement(human_csv, run_dir), indent=2))
    except DataError as err:
        fail(str(err))


@fintradebench_app.command("fundamentals")
def fundamentals_command(
    data_dir: Optional[Path] = typer.Option(None, help="Data root holding fintradebench/."),
    tickers: Optional[str] = typer.Option(None, help="Comma list (default: every ticker with filings and official "
                                                     "values)."),
    alignment: str = typer.Option("daily", help="daily (point-in-time, each day) | quarter (definitions only)."),
    debt: str = typer.Option("balance-sheet", "--debt",
                             help="Total debt: balance-sheet (the debt and lease lines printed on the balance "
                                  "sheet, as the vendor's) | borrowings | borrowings+leases."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Agreement of the ratios computed from filings with the official per-day values."""
    from ...data.errors import DataError
    from ...markets.fundamentals import DEBT_DEFINITIONS, FundamentalsConfig, agreement_table, format_agreement

    if alignment not in ("daily", "quarter"):
        fail("--alignment must be daily or quarter")
    if debt not in DEBT_DEFINITIONS:
        fail(f"--debt must be one of {', '.join(DEBT_DEFINITIONS)}, not {debt!r}")
    try:
        rows = agreement_table(resolve_data_dir(data_dir), tickers.split(",") if tickers else None,
                               alignment=alignment,  # type: ignore[arg-type]
                               config=FundamentalsConfig(debt=debt))  # type: ignore[arg-type]
    except DataError as err:
        fail(str(err))
    typer.echo(json.dumps([r.to_json() for r in rows], indent=2) if as_json else format_agreement(rows))
