"""`finharness data ...`: the dataset registry on the command line (list, pull), and the `convert` and `build`
groups that benchmarks add commands to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..cli_common import fail
from ..util import output_console
from .registry import resolve_data_dir

data_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                       help="Benchmark data: official sources, checksums, licences; pull into the data dir.")
# groups the benchmarks mount their commands in (`data.convert.NAME`, `data.build.NAME`: cli_plugins.py)
data_app.add_typer(typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                               help="Convert other exam layouts into a benchmark's official layout."), name="convert")
data_app.add_typer(typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                               help="Build benchmark items from public sources (SEC-Num, CodeTAT-QA...)."), name="build")


@data_app.command("list")
def list_command(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir",
                                            help="Data root to check (default $FINHARNESS_DATA_DIR or the cache)."),
    checksums: bool = typer.Option(False, "--verify", help="Check every sha256 too (slower), not only sizes."),
) -> None:
    """Every known dataset: files, size, licence, and whether it is in the data dir."""
    from .registry import human_size, load_registry, resolved, verify

    root = resolve_data_dir(data_dir)
    rows = []
    for entry in load_registry():
        dataset = resolved(entry.name)  # sizes recorded by a first pull, unpacked members
        report = verify(dataset.name, root, checksums=checksums)
        rows.append({
            "name": dataset.name, "available_here": dataset.available_here, "files": len(dataset.files),
            "total_size": dataset.total_size, "sizes_known": dataset.sizes_known, "licence": dataset.licence,
            "host": dataset.host, "repository": dataset.repository, "commit": dataset.commit,
            "pinned": dataset.pinned, "pullable": dataset.pullable, "local_dir": dataset.local_dir,
            "status": report.status, "files_ok": report.n_ok, "description": dataset.description,
        })
    if as_json:
        typer.echo(json.dumps({"data_dir": str(root), "checksums": checksums, "datasets": rows},
                              ensure_ascii=False, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"datasets (data dir: {root})")
    for column in ("name", "files", "size", "licence", "status", "source"):
        table.add_column(column, justify="right" if column in ("files", "size") else "left",
                         no_wrap=column in ("name", "status"))
    for row in rows:
        status = row["status"] if row["status"] != "partial" else f"partial ({row['files_ok']}/{row['files']})"
        if row["status"] in ("missing", "partial") and not row["pullable"]:
            status += " (--from)"  # derived files: only a mirror holds them
        source = ("hf:" if row["host"] == "huggingface" else "") + (row["repository"] or "—")
        if row["repository"] and row["commit"]:
            source += "@" + row["commit"][:7]  # the full id is in --json
        files = str(row["files"]) if row["available_here"] else "—"
        size = human_size(row["total_size"]) if row["total_size"] else "—"
        if not row["sizes_known"]:
            size = "?" if not row["total_size"] else f"{size} + ?"  # recorded by the first pull
        table.add_row(row["name"], files, size, row["licence"], status, source)
    output_console().print(table)
    typer.echo("missing: `finharness data pull NAME`; ? = size recorded by the first pull; "
               "(--from) = derived files, pull from a mirror")


@data_app.command("pull")
def pull_command(
    name: str = typer.Argument(..., help="Dataset name (see `finharness data list`)."),
    source: Optional[str] = typer.Option(None, "--from",
                                         help="A mirror laid out like the data root: a directory or an http(s) "
                                              "URL. Default: the upstream URLs."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir",
                                            help="Where to put the data (default $FINHARNESS_DATA_DIR or the cache)."),
) -> None:
    """Download or copy one dataset into the data dir, checking every file's sha256."""
    from .errors import DataError
    from .pull import pull

    try:
        report = pull(name, data_dir, source)
    except DataError as err:
        fail(str(err))
    recorded = f", {len(report.recorded)} recorded in the registry lock" if report.recorded else ""
    typer.echo(f"{report.name}: {len(report.fetched)} fetched, {len(report.skipped)} already present{recorded} "
               f"-> {report.dest}")
