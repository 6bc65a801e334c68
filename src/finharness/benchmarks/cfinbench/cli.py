"""`finharness data convert ideafinbench SRC DEST`, mounted in the `data convert` group (its BENCHMARK declaration
COMMANDS)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ...cli_common import fail
from ...data.errors import DataError
from .convert import convert_ideafinbench


def ideafinbench_command(
    src: Path = typer.Argument(..., help="IDEAFinBench folder (or its cpa_one / cpa_multi folder)"),
    dest: Path = typer.Argument(..., help="where to write the CFinBench layout"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Convert IDEAFinBench CPA exams (cpa_one, cpa_multi) into the CFinBench layout."""
    try:
        summary = convert_ideafinbench(src, dest)
    except DataError as err:
        fail(str(err))
    if as_json:
        typer.echo(json.dumps(summary.to_json(), ensure_ascii=False, indent=2))
        return
    for split, by_type in summary.counts.items():
        for question_type, subjects in by_type.items():
            typer.echo(f"{split:5} {question_type:14} {sum(subjects.values()):6} items in {len(subjects)} subjects")
    if summary.skipped_blank_rows:
        typer.echo(f"skipped {summary.skipped_blank_rows} blank CSV rows")
    typer.echo(f"wrote {dest}; run it with: finharness run cfinbench --data-dir {dest} --model SPEC")
