"""`finharness batch status OUT` and `finharness batch cancel OUT`: the provider batches a run or suite recorded in its
store (backends/batch.py)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import typer

from ..cli_common import fail
from ..core.store import ACTIVE_BATCH_STATES, RunStore
from ..util import output_console

batch_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                        help="Provider batches of a run (--batch): list them, cancel the ones still running.")


def _rows(out: Path) -> tuple[Path, list[dict[str, Any]]]:
    from .batch import store_of

    path = store_of(out)
    if not path.is_file():
        fail(f"{out}: no run store here (OUT/store.sqlite, or give the store file)")
    with RunStore(path) as store:
        return path, store.batches()


def _backend(spec: str) -> Any:
    from . import from_spec

    return from_spec(spec, batch=True)


@batch_app.command("status")
def status_command(out: Path = typer.Argument(..., help="A run or suite folder (or its store file)."),
                   refresh: bool = typer.Option(True, "--refresh/--no-refresh", help="Ask the provider for the "
                                                "current state of the batches still running (default)."),
                   as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the batches recorded in OUT's store: state, the provider's status and counts, when created, the deadline."""
    from .batch import describe

    path, rows = _rows(out)
    if refresh:
        rows = asyncio.run(_refreshed(path, rows))
    if as_json:
        typer.echo(json.dumps([{k: row[k] for k in ("id", "backend", "provider", "state", "batch_id", "status",
                                                   "requests", "counts", "deadline", "created", "input_file",
                                                   "output_file", "error_file")} for row in rows], indent=2))
        return
    console = output_console()
    if not rows:
        console.print(f"no batches in {path}", highlight=False)
        return
    for row in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["created"]))
        console.print(f"{row['id'][:8]}  {row['state']:<9}  {row['provider']:<9}  {row['batch_id'] or '—'}  "
                      f"{row['requests']} request(s)  created {when}  {describe(row)}  {row['backend']}",
                      highlight=False, soft_wrap=True)
    active = [row for row in rows if row["state"] in ACTIVE_BATCH_STATES]
    if active:
        console.print(f"{len(active)} still at the provider: rerun the run's command to collect them, or "
                      f"`finharness batch cancel {out}`", highlight=False)


async def _refreshed(path: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows, with the provider's current status of each submitted batch recorded (a status request is free)."""
    from ..core.backend import BackendError, SpecError

    with RunStore(path) as store:
        for row in rows:
            if row["state"] != "submitted" or not row["batch_id"]:
                continue
            try:
                backend = _backend(row["backend"])
                found = await backend.api.status(row["batch_id"])
            except (BackendError, SpecError) as err:
                typer.echo(f"{row['id'][:8]}: the provider cannot be asked now: {err}", err=True)
                continue
            store.update_batch(row["id"], status=found.status, counts=dict(found.counts), deadline=found.deadline)
        return store.batches()


@batch_app.command("cancel")
def cancel_command(out: Path = typer.Argument(..., help="A run or suite folder (or its store file).")) -> None:
    """Cancel every batch of OUT's store still running at its provider. What they processed before the cancel is
    paid for and is stored by the next run of the same command; the rest is sent again then (a new batch)."""
    path, rows = _rows(out)
    active = [row for row in rows if row["state"] == "submitted" and row["batch_id"]]
    if not active:
        typer.echo(f"no batch of {path} is running at a provider")
        return
    failed = asyncio.run(_cancel(active))
    if failed:
        raise typer.Exit(1)


async def _cancel(rows: list[dict[str, Any]]) -> int:
    from ..core.backend import BackendError, SpecError

    failed = 0
    for row in rows:
        try:
            backend = _backend(row["backend"])
            found = await backend.api.cancel(row["batch_id"])
        except (BackendError, SpecError) as err:
            typer.echo(f"{row['id'][:8]} ({row['batch_id']}): not cancelled: {err}", err=True)
            failed += 1
            continue
        typer.echo(f"{row['id'][:8]} ({row['batch_id']}): {found.status}")
    return failed
