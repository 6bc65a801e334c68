"""retrieval/cli.py: `finharness retrieve ... --json` and a fast start-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from .retrieval_fakes import tiny_data_root


def _app() -> typer.Typer:
    from finharness.cli import app

    return app


def test_retrieve_prints_the_documented_json(tmp_path: Path, monkeypatch):
    root = tiny_data_root(tmp_path / "data")
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    result = CliRunner().invoke(_app(), ["retrieve", "--ticker", "acme", "--as-of", "2024-03-15", "--query",
                                         "widget revenue", "--k", "2", "--data-dir", str(root), "--dense", "off",
                                         "--json"])
    assert result.exit_code == 0, result.output
    items = json.loads(result.stdout)
    assert [item["track"] for item in items] == ["filings", "filings", "prices", "prices"]
    for item in items:
        assert set(item) == {"track", "source", "date", "score", "text"}
        assert item["date"] <= "2024-03-15" and isinstance(item["score"], float)
    assert items[0]["text"].startswith("[ACME 10-K period 2023-12-31 filed 2024-02-01]")
    assert items[2]["date"] == "2024-03-15" and items[2]["source"] == "ACME-history.xlsx#monthly 2023-10..2024-03"
    assert "dense off" in result.stderr and "1 filings on or before 2024-03-15" in result.stderr


def test_bad_input_exits_2_with_a_message(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    runner = CliRunner()
    bad_date = runner.invoke(_app(), ["retrieve", "--ticker", "A", "--as-of", "2024-13-01", "--query", "q"])
    assert bad_date.exit_code == 2 and "YYYY-MM-DD" in bad_date.output
    no_data = runner.invoke(_app(), ["retrieve", "--ticker", "A", "--as-of", "2024-01-01", "--query", "q",
                                     "--data-dir", str(tmp_path), "--dense", "off"])
    assert no_data.exit_code == 2 and "SEC filings folder not found" in no_data.output


def test_importing_the_command_loads_no_heavy_library():
    code = ("import sys, finharness.retrieval.cli, finharness.retrieval; "
            "print(sorted(m for m in ('bm25s', 'onnxruntime', 'pandas', 'lxml', 'numpy') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
