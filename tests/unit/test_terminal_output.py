"""Printed tables are as wide as the terminal the user looks at (util.terminal_width), also when the output is
piped: rich wraps cells at that width instead of cutting headers and values at 80 columns."""

from __future__ import annotations

import io

from typer.testing import CliRunner

from finharness import util
from finharness.cli import app


def test_a_piped_table_is_the_wide_default_not_80_columns(monkeypatch, tmp_path):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(util.os, "get_terminal_size", lambda fd=0: (_ for _ in ()).throw(OSError("no terminal")))
    assert util.output_console(file=io.StringIO()).width == util.WIDE_DEFAULT == 160
    result = CliRunner().invoke(app, ["data", "list", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "name" in line and "status" in line)
    assert "licence" in header and "source" in header and "…" not in header, header
    assert "TobyYang7/UCFE-Benchmark@" in result.output, "a source printed whole, on one line"


def test_columns_wins_and_a_terminal_on_stderr_counts(monkeypatch):
    monkeypatch.setenv("COLUMNS", "97")
    assert util.output_console(stderr=True).width == 97
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(util.os, "get_terminal_size", lambda fd=0: util.os.terminal_size((133, 40)))
    assert util.output_console().width == 133
