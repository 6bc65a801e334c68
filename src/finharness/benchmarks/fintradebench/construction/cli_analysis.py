"""`finharness fintradebench build calibrate|metrics`: phase 2 and the construction metrics of a build.

construction/cli.py calls `register(build_app)`; heavy imports (numpy, scipy) happen inside the commands.
Both commands write their JSON into the build directory (atomically) and print a table, or the JSON
with --json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Optional, Sequence

import typer

from ....cli_common import fail
from ....util import output_console

CALIBRATION_FILE = "calibration.json"
METRICS_FILE = "metrics.json"


def _print_table(title: str, rows: Iterable[Sequence[str]], header: Sequence[str], *, left: int) -> None:
    """A rich table; the first `left` columns are labels (left-aligned), the rest figures."""
    from rich.table import Table

    table = Table(title=title)
    for i, column in enumerate(header):
        table.add_column(column, justify="left" if i < left else "right", overflow="fold")
    for row in rows:
        table.add_row(*row)
    output_console().print(table)


def _write(path: Path, data: dict, as_json: bool) -> bool:
    """Write the result file; with --json also print it (True: the caller prints nothing more)."""
    from ....data.io import atomic_write_text

    text = json.dumps(data, indent=2, ensure_ascii=False)
    atomic_write_text(path, text + "\n")
    if as_json:
        typer.echo(text)
    return as_json


def _build_dir(out: Path) -> Path:
    if not out.is_dir():
        fail(f"{out}: no build directory (run `finharness fintradebench build` first)")
    return out


def register(app: typer.Typer) -> None:
    """Add `calibrate` and `metrics` to the `build` sub-app."""

    @app.command("calibrate")
    def calibrate_command(
        out: Path = typer.Argument(..., help="Build directory holding judged.jsonl (and questions.jsonl)."),
        human: Path = typer.Option(..., "--human", help="Human scores: question_id,model,dimension,score,rater "
                                                        "(or a `finharness ui export --rubric` CSV)."),
        judge: Optional[str] = typer.Option(None, "--judge", help="Compare only this judge's rows (needed when "
                                                                  "judged.jsonl holds several judges)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON instead of the table."),
    ) -> None:
        """Phase 2: the judge against human Likert scores (MAE, bias, Spearman; Table 11).

        When the build was judged with `--judge-scores expected`, the expected scores are compared too, side by
        side with the written ones. Writes OUT/calibration.json (the expected comparison under "expected")."""
        from ....data.errors import DataError
        from .calibration import calibrate_both, format_calibration

        try:
            result, expected = calibrate_both(_build_dir(out), human, judge=judge)
        except DataError as err:
            fail(str(err))
        data = result.to_json()
        if expected is not None:
            data["expected"] = expected.to_json()
        if _write(out / CALIBRATION_FILE, data, as_json):
            return
        header, *rows = list(format_calibration(result, expected))
        _print_table(f"judge vs humans: {result.items} items, {len(result.raters)} raters "
                     f"(judge {', '.join(result.judges) or '—'})", rows, header, left=3)
        coverage = expected.coverage_note() if expected is not None else None
        for note in result.notes() + ([coverage] if coverage else []):
            typer.echo(f"note: {note}")
        typer.echo(f"wrote {out / CALIBRATION_FILE}")

    @app.command("metrics")
    def metrics_command(
        out: Path = typer.Argument(..., help="Build directory (questions, candidates, audit, judged JSONL)."),
        human: Optional[Path] = typer.Option(None, "--human", help="Human scores for the judge MAE (Eq. 6-7); "
                                                                   "without it those terms are left out."),
        judge: Optional[str] = typer.Option(None, "--judge", help="Judge whose rows the MAE uses."),
        weights: Optional[str] = typer.Option(None, "--weights", help="Composite weights, e.g. accuracy=2,judge=0.5 "
                                                                      "(terms: accuracy, extraction, judge, "
                                                                      "self_critique, stability; default 1 each)."),
        as_json: bool = typer.Option(False, "--json", help="Print the JSON instead of the table."),
    ) -> None:
        """Construction metrics, equations 1-10 of the paper's E.1: accuracy before/after self-filtering,
        extraction F1, judge MAE, SCR, prompt sensitivity, composite.

        Writes OUT/metrics.json."""
        from ....data.errors import DataError
        from .metrics import construction_metrics, parse_weights, table_rows

        try:
            parsed = parse_weights(weights)
        except ValueError as err:
            fail(f"--weights: {err}")
        try:
            result = construction_metrics(_build_dir(out), human_csv=human, judge=judge, weights=parsed)
        except DataError as err:
            fail(str(err))
        if _write(out / METRICS_FILE, result.to_json(), as_json):
            return
        _print_table(f"construction metrics of {out}", table_rows(result), ("metric", "group", "value", "95% CI", "n"),
                     left=2)
        for name, why in result.missing.items():
            typer.echo(f"note: {name}: {why}")
        for note in result.notes:
            typer.echo(f"note: {note}")
        typer.echo(f"wrote {out / METRICS_FILE}")
