"""Printed tables are as wide as the terminal the user looks at (util.terminal_width), also when the output is
piped: rich wraps cells at that width instead of cutting headers and values at 80 columns."""

from __future__ import annotations

import io
import os

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


def test_terminal_width_reads_columns_then_a_terminal_then_the_wide_default(monkeypatch):
    monkeypatch.setenv("COLUMNS", "93")
    assert util.terminal_width() == 93
    assert util.output_console(stderr=True).width == 93
    monkeypatch.delenv("COLUMNS")

    def no_terminal(fd: int = 0):
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    monkeypatch.setattr(util.sys, "stdout", io.StringIO())
    assert util.terminal_width() == util.WIDE_DEFAULT == 160
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=0: os.terminal_size((211, 40)))
    assert util.terminal_width() == 211  # stdout piped, the terminal still there
    assert util.output_console().width == 211
