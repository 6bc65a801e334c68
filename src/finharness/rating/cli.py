"""`finharness rate`: ratings from a matches file, or agreement between two rating outputs."""

from __future__ import annotations

import json
import math
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.table import Table

from ..cli_common import fail
from ..util import format_number, output_console

if TYPE_CHECKING:  # scipy behind these is imported only when a rating command runs
    from .base import RatingTable
    from .compare import RatingAgreement


class MethodChoice(str, Enum):
    elo = "elo"
    bt = "bt"


class ByChoice(str, Enum):
    task = "task"


def _print_table(console: Console, title: str, table: "RatingTable") -> None:
    out = Table(title=f"{title} ({table.method}, {table.n_matches} matches)")
    for column in ("model", "rating", "95% CI", "W", "T", "L"):
        out.add_column(column, justify="left" if column == "model" else "right")
    for name, r in table.ratings.items():
        ci = f"{format_number(r.ci95[0], 1)} – {format_number(r.ci95[1], 1)}" if r.ci95 else "—"
        out.add_row(name, format_number(r.rating, 1), ci, str(r.wins), str(r.ties), str(r.losses))
    console.print(out)
    def bound(x: float) -> str:
        return format_number(x, 1) if math.isfinite(x) else ("∞" if x > 0 else "−∞")

    for gap in table.gaps:  # a gap whose interval holds 0 does not order the two: said, not implied by the order
        ci = f" [{bound(gap.ci95[0])}, {bound(gap.ci95[1])}]" if gap.ci95 else ""
        console.print(f"{gap.higher} − {gap.lower}: {format_number(gap.gap, 1)}{ci}{'  tied' if gap.tied else ''}"
                      + (f"  ! {gap.warning}" if gap.warning else ""), highlight=False, soft_wrap=True)


def _print_agreement(console: Console, agreement: "RatingAgreement", a: Path, b: Path) -> None:
    out = Table(title=f"{a} vs {b}: {agreement.n} models in both")
    for column in ("statistic", "value", "p"):
        out.add_column(column, justify="left" if column == "statistic" else "right")
    out.add_row("Pearson r", format_number(agreement.pearson, 3), format_number(agreement.pearson_p, 4))
    out.add_row("Spearman ρ", format_number(agreement.spearman, 3), format_number(agreement.spearman_p, 4))
    out.add_row("MAE (points)", format_number(agreement.mae, 1), "")
    console.print(out)
    for path, missing in ((a, agreement.only_in_a), (b, agreement.only_in_b)):
        if missing:
            console.print(f"only in {path}: {', '.join(missing)}")


def rate_command(
    matches: Optional[Path] = typer.Argument(
        None, help="JSONL matches: {task, model_a, model_b, winner: model_a|model_b|tie}."),
    method: MethodChoice = typer.Option(
        MethodChoice.elo, "--method", help="elo: online, in file order (UCFE). bt: Bradley–Terry."),
    by: Optional[ByChoice] = typer.Option(
        None, "--by", help="'task': also rate each task and the zero-/few-shot groups."),
    k: float = typer.Option(4.0, "--k", help="Elo K factor."),
    scale: float = typer.Option(400.0, "--scale", help="Rating points per factor `base` in the odds."),
    base: float = typer.Option(10.0, "--base", help="Base of the odds."),
    init: float = typer.Option(1000.0, "--init", help="Elo start rating; Bradley–Terry mean."),
    bootstrap: int = typer.Option(1000, "--bootstrap", min=0, help="Bootstrap rounds (0: no CIs)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    compare: Optional[tuple[Path, Path]] = typer.Option(
        None, "--compare", help="Compare the overall ratings of two `rate --json` outputs."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    hard: bool = typer.Option(False, "--hard", help="Rate by the hard verdicts even where a line has a soft "
                              "`outcome` (by default the outcome is used: Elo S = outcome, BT fractional wins)."),
) -> None:
    """Rate models from pairwise matches (Elo or Bradley–Terry, bootstrap 95% CIs); soft outcomes allowed."""
    from .base import RatingScale
    from .compare import compare_ratings, load_rating_values
    from .matches import MatchFileError, read_matches
    from .rate import RatingOptions, rate_matches

    console = output_console()
    if compare is not None:
        if matches is not None:
            fail("give either MATCHES.jsonl or --compare A.json B.json, not both")
        try:
            agreement = compare_ratings(*(load_rating_values(p) for p in compare))
        except ValueError as err:
            fail(str(err))
        if as_json:
            typer.echo(json.dumps(agreement.to_json(), ensure_ascii=False, indent=2))
        else:
            _print_agreement(console, agreement, *compare)
        return
    if matches is None:
        fail("missing MATCHES.jsonl (or use --compare A.json B.json)")
    try:
        loaded = read_matches(matches)
    except MatchFileError as err:
        fail(str(err))
    if not loaded:
        fail(f"{matches}: no matches in the file")
    options = RatingOptions(method=method.value, scale=RatingScale(scale, base, init), k=k,
                            bootstrap=bootstrap, seed=seed, hard=hard)
    report = rate_matches(loaded, options, by_task=by is ByChoice.task)
    if as_json:
        typer.echo(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
        return
    _print_table(console, "overall", report.overall)
    for name, table in (report.groups or {}).items():
        _print_table(console, name, table)
    for task, table in (report.by_task or {}).items():
        _print_table(console, task, table)
    for note in report.notes:
        console.print(f"note: {note}")
