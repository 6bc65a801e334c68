"""Commands mounted in the `finharness data build` group (its BENCHMARK declaration):

  finharness data build secnum --filings DIR --out FILE.jsonl
  finharness data build tatqa  --tatqa DIR --out-dir DIR
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ...cli_common import fail
from ...data.errors import DataError


def secnum_command(
    filings: Path = typer.Option(..., "--filings", help="folder of TICKER/FORM_FILINGDATE_ACCESSION.htm filings"),
    out: Path = typer.Option(..., "--out", help="JSONL to write (BizBench columns + id, split, metadata)"),
    chars: int = typer.Option(400, "--chars", help="snippet: characters either side of the number"),
    test_fraction: float = typer.Option(0.25, "--test-fraction", help="share of filings in the test split"),
    max_per_filing: Optional[int] = typer.Option(None, "--max-per-filing", help="cap items per filing"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Build SEC-Num (BizBench) from inline-XBRL filings."""
    from .data import write_items_jsonl
    from .secnum import build_secnum_detailed

    try:
        build = build_secnum_detailed(filings, chars=chars, test_fraction=test_fraction,
                                      max_per_filing=max_per_filing)
    except DataError as err:
        fail(str(err))
    write_items_jsonl(build.items, out)
    summary = {"items": len(build.items), "splits": build.split_counts(), "filings": build.filings,
               "facts": build.facts, "dropped": dict(build.dropped), "seconds": round(build.seconds, 1),
               "out": str(out)}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(f"{summary['items']} SEC-Num items ({summary['splits']}) from {build.filings} filings, "
               f"{build.facts} facts, in {summary['seconds']} s")
    typer.echo("dropped: " + ", ".join(f"{reason} {n}" for reason, n in build.dropped.most_common()))
    typer.echo(f"wrote {out}")


def tatqa_command(
    tatqa: Path = typer.Option(..., "--tatqa", help="TAT-QA folder (or its dataset_raw): dev and test_gold files"),
    out_dir: Path = typer.Option(..., "--out-dir", help="writes codetatqa.jsonl and tatqa-e.jsonl here"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Build CodeTAT-QA and TAT-QA(E) (BizBench) from TAT-QA dev and test_gold."""
    from .data import write_items_jsonl
    from .tatqa import build_tatqa_tasks

    try:
        builds = build_tatqa_tasks(tatqa)
    except DataError as err:
        fail(str(err))
    summary = []
    for task in ("codetatqa", "tatqa-e"):
        items = [item for build in builds if build.task == task for item in build.items]
        write_items_jsonl(items, out_dir / f"{task}.jsonl")
    for build in builds:
        summary.append({"task": build.task, "split": build.split, "kept": len(build.items),
                        "candidates": build.candidates, "dropped": dict(build.dropped)})
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    for row in summary:
        reasons = ", ".join(f"{k} {v}" for k, v in row["dropped"].items()) or "none"
        typer.echo(f"{row['task']:10} {row['split']:5} kept {row['kept']}/{row['candidates']} (dropped: {reasons})")
    typer.echo(f"wrote {out_dir / 'codetatqa.jsonl'} and {out_dir / 'tatqa-e.jsonl'}")
