"""SEC-Num built from real inline-XBRL filings, and its CLI."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.benchmarks.bizbench.data import read_items_jsonl
from finharness.benchmarks.bizbench.secnum import build_secnum, build_secnum_detailed, is_test_filing
from finharness.data.errors import DataError
from finharness.extract.numbers import parse_number

FILES = ["AAPL/10-K_2024-11-01_0000320193-24-000123.htm", "TSLA", "NVDA"]


@pytest.fixture(scope="module")
def filings(shared_data, tmp_path_factory) -> Path:
    """Three real filings (one 10-K, two 10-Qs) linked into a small folder, to keep the build quick."""
    source = shared_data / "fintradebench" / "SEC_Filings"
    root = tmp_path_factory.mktemp("filings")
    picks = [source / FILES[0], sorted((source / "TSLA").glob("10-Q_*.htm"))[0],
             sorted((source / "NVDA").glob("10-Q_*.htm"))[0]]
    for pick in picks:
        (root / pick.parent.name).mkdir(exist_ok=True)
        (root / pick.parent.name / pick.name).symlink_to(pick)
    return root


@pytest.fixture(scope="module")
def build(filings):
    return build_secnum_detailed(filings)


def test_items_are_numbers_shown_in_their_snippet(build):
    assert build.filings == 3 and len(build.items) > 300
    for item in build.items:
        meta = item.metadata
        offset = meta["answer_offset"]
        assert item.context[offset:offset + len(meta["displayed"])] == meta["displayed"]
        shown = parse_number(meta["displayed"]).value
        assert abs(float(item.answer)) == pytest.approx(shown)
        assert item.task == "secnum" and item.context_type == "string"
        if meta["scale"] == 6:
            assert item.question.endswith("(in millions)")
            assert meta["value"] == pytest.approx(float(item.answer) * 1e6)


def test_labels_are_unambiguous_within_their_snippet(build):
    by_context = defaultdict(lambda: defaultdict(set))
    for item in build.items:
        by_context[item.context][item.question].add(item.answer)
    assert all(len(answers) == 1 for questions in by_context.values() for answers in questions.values())
    assert build.dropped["ambiguous_label"] > 0 and build.dropped["not_digits"] > 0


def test_split_is_by_filing_and_deterministic(build, filings):
    splits = defaultdict(set)
    for item in build.items:
        splits[item.metadata["accession"]].add(item.split)
        assert item.split == ("test" if is_test_filing(item.metadata["accession"], 0.25) else "train")
    assert all(len(s) == 1 for s in splits.values())
    again = build_secnum(filings, max_per_filing=50)
    assert len(again) == 150
    assert {row["id"] for row in again} <= {item.id for item in build.items}
    assert [r["id"] for r in again] == [r["id"] for r in build_secnum(filings, max_per_filing=50)]


def test_real_apple_net_income_in_text(build):
    apple = [i for i in build.items if i.metadata["ticker"] == "AAPL"]
    assert apple and all(i.id.startswith("secnum/AAPL/0000320193-24-000123/") for i in apple)
    ids = {i.id for i in build.items}
    assert len(ids) == len(build.items)


def test_cli_writes_bizbench_columns(filings, tmp_path):
    from finharness.cli import app

    out = tmp_path / "secnum.jsonl"
    result = CliRunner().invoke(app, ["data", "build", "secnum", "--filings", str(filings), "--out", str(out),
                                      "--max-per-filing", "20", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert summary["items"] == len(rows) == 60
    assert {"id", "question", "answer", "task", "context", "context_type"} <= set(rows[0])
    assert {row["task"] for row in rows} == {"SEC-NUM"}
    assert len(read_items_jsonl(out)) == 60
    bad = CliRunner().invoke(app, ["data", "build", "secnum", "--filings", str(tmp_path / "none"), "--out", str(out)])
    assert bad.exit_code == 2 and "not a folder" in bad.output


def test_bad_file_name_is_a_data_error(tmp_path, shared_data):
    source = shared_data / "fintradebench" / "SEC_Filings" / FILES[0]
    (tmp_path / "AAPL").mkdir()
    (tmp_path / "AAPL" / "apple.htm").symlink_to(source)
    with pytest.raises(DataError, match="FORM_FILINGDATE_ACCESSION"):
        build_secnum(tmp_path)
