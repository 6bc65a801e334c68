"""`finharness data ...`: the dataset registry on the command line (list, pull), and the `convert` and `build`
groups that benchmarks add commands to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..cli_common import fail
from ..data.registry import resolve_data_dir
from ..util import output_console

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
    from ..data.registry import human_size, load_registry, resolved, verify

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
    names: Optional[list[str]] = typer.Argument(None, metavar="[NAME]...", help="Dataset name(s) (see `finharness "
                                                "data list`)."),
    suite: Optional[str] = typer.Option(None, "--suite", help="Every dataset the rows of this suite read that the "
                                        "data root lacks (quick | standard | full, or a suite file)."),
    source: Optional[str] = typer.Option(None, "--from",
                                         help="A mirror laid out like the data root: a directory or an http(s) "
                                              "URL. Default: the upstream URLs."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir",
                                            help="Where to put the data (default $FINHARNESS_DATA_DIR or the cache)."),
) -> None:
    """Download or copy datasets into the data dir, checking every file's sha256.

    With --suite: what that suite needs and the data root lacks, one line per dataset; what can never be pulled
    (no public copy, files only a mirror holds) is named too. Every host is asked once whether it can be reached,
    so offline the pull stops at once, one line per dataset."""
    from ..data.errors import DataError
    from ..data.pull import pull

    if not names and suite is None:
        fail("give dataset NAME(s) or --suite SUITE (`finharness data list` shows the datasets)")
    if suite is not None:
        _pull_suite(suite, list(names or []), source, data_dir)
        return
    if len(names or []) > 1:
        _pull_several(list(names or []), source, data_dir)
        return
    try:
        report = pull(names[0], data_dir, source)  # type: ignore[index]
    except DataError as err:
        fail(str(err))
    recorded = f", {len(report.recorded)} recorded in the registry lock" if report.recorded else ""
    typer.echo(f"{report.name}: {len(report.fetched)} fetched, {len(report.skipped)} already present{recorded} "
               f"-> {report.dest}")


def _pull_several(names: list[str], source: str | None, data_dir: Path | None) -> None:
    from ..suite.data_check import pull_all

    failures = pull_all(names, resolve_data_dir(data_dir), progress=typer.echo, source=source)
    for line in failures:
        typer.secho(f"error: {line}", fg="red", err=True)
    if failures:
        raise typer.Exit(2)


def _pull_suite(name: str, also: list[str], source: str | None, data_dir: Path | None) -> None:
    """`data pull --suite NAME`: the suite's missing pullable datasets (and any named beside it), then what is left."""
    from ..suite.data_check import pull_all, report_lines
    from ..suite.run import check_suite_data, prepare_rows
    from ..suite.spec import SuiteError, load_suite

    root = resolve_data_dir(data_dir)
    try:
        spec = load_suite(name)
        rows = prepare_rows(spec, root)
    except (SuiteError, ValueError) as err:
        fail(str(err))
    check = check_suite_data(rows, root, judged=True)
    wanted = list(dict.fromkeys([*(n.dataset for n in check.of("missing")), *also]))
    if not wanted:
        typer.echo(f"suite {spec.name}: every dataset its rows read is in {root}")
    failures = pull_all(wanted, root, progress=typer.echo, source=source) if wanted else []
    for line in failures:
        typer.secho(f"error: {line}", fg="red", err=True)
    after = check_suite_data(prepare_rows(spec, root), root, judged=True)
    for line in report_lines(after, pull=f"finharness data pull --suite {name} --data-dir {root}"):
        typer.echo(line, err=True)
    if failures:
        raise typer.Exit(2)
