"""What every `finharness` command group shares. The groups cannot import `finharness.cli`: it imports them."""

from __future__ import annotations

from typing import NoReturn

import typer


def fail(message: str) -> NoReturn:
    """Print `error: MESSAGE` to stderr (red on a terminal) and exit with status 2, the CLI's usage-error code."""
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)
