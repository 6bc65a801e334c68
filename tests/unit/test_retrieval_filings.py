"""markets/filings.py: filing discovery, readable text from inline XBRL, Item/Part sections, the parse cache."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from finharness.data.errors import DataError
from finharness.markets import filings
from finharness.markets.filings import discover_filings, extract_text, load_filing, split_sections

from .retrieval_fakes import filing_html, tiny_data_root, write_filing


def test_discovery_reads_ticker_form_date_accession_from_the_path(tmp_path: Path):
    root = tiny_data_root(tmp_path)
    refs = discover_filings(root)
    assert [(r.ticker, r.form, r.filed, r.accession) for r in refs] == [
        ("ACME", "10-K", dt.date(2024, 2, 1), "0000000001-24-000001"),
        ("ACME", "10-Q", dt.date(2024, 5, 1), "0000000001-24-000002"),
    ]  # the folder "Acme" is upper-cased
    assert discover_filings(root, {"acme"}) == refs
    assert discover_filings(root, {"OTHER"}) == []


def test_a_misnamed_filing_is_an_error_naming_the_file(tmp_path: Path):
    root = tiny_data_root(tmp_path)
    bad = root / "fintradebench" / "SEC_Filings" / "Acme" / "annual-report.htm"
    bad.write_text("<html/>")
    with pytest.raises(DataError, match=re.escape(str(bad))):
        discover_filings(root)


def test_missing_filings_folder_says_what_to_pass(tmp_path: Path):
    with pytest.raises(DataError, match="--data-dir"):
        discover_filings(tmp_path)


def test_text_drops_hidden_header_scripts_styles_and_keeps_table_rows():
    html = filing_html(dt.date(2024, 9, 28), {"Item 7. MD&A": ["Net sales rose."]})
    html = html.replace("</body>", "<table><tr><td>iPhone</td><td>$</td><td>201,183</td><td></td>"
                                   "<td>(2</td><td>)%</td></tr></table></body>")
    period, lines = extract_text(html.encode(), Path("x.htm"))
    assert period == dt.date(2024, 9, 28)
    text = "\n".join(lines)
    assert "HIDDENHEADERTEXT" not in text and "hiddenScript" not in text and "color: red" not in text
    assert "iPhone | $201,183 | (2)%" in lines  # lone "$" and ")%" cells glued to their neighbours
    assert "Net sales rose." in lines


def test_sections_split_at_item_and_part_headers_not_at_toc_rows_or_citations():
    lines = ["Cover text", "Item 1. | Business | 3", "PART II", "Item 7. Management's Discussion",
             "Revenue grew.", "Item 1A of this report describes risks in more detail than anyone would like to read, "
             "and this sentence goes on for well over one hundred and sixty characters in total length.",
             "Item 8. Financial Statements", "Totals."]
    sections = split_sections(lines)
    assert [s.title for s in sections] == ["Cover", "PART II / Item 7. Management's Discussion",
                                           "Item 8. Financial Statements"]
    assert sections[0].text == "Cover text\nItem 1. | Business | 3"
    assert sections[1].text.startswith("Revenue grew.\nItem 1A of this report")


def test_parse_is_cached_by_content_and_redone_when_the_file_changes(tmp_path: Path, monkeypatch):
    root = tiny_data_root(tmp_path / "data")
    ref = discover_filings(root)[0]
    first = load_filing(ref, cache=tmp_path / "cache")
    calls = []
    real_extract = filings.extract_text
    monkeypatch.setattr(filings, "extract_text", lambda *a: calls.append(1) or real_extract(*a))
    assert load_filing(ref, cache=tmp_path / "cache") == first
    assert calls == []  # served from the cache
    ref.path.write_text(ref.path.read_text().replace("widgets to industrial", "sprockets to industrial"))
    changed = load_filing(ref, cache=tmp_path / "cache")
    assert calls == [1] and changed.sha256 != first.sha256
    assert "sprockets" in "\n".join(s.text for s in changed.sections)


def test_period_end_that_is_not_a_date_names_the_file(tmp_path: Path):
    path = write_filing(tmp_path, "Acme", "10-K", "2024-02-01", "0000000001-24-000001", dt.date(2023, 12, 31),
                        {"Item 1. Business": ["x"]})
    path.write_text(path.read_text().replace("December 31, 2023", "sometime soon"))
    with pytest.raises(DataError, match="DocumentPeriodEndDate"):
        extract_text(path.read_bytes(), path)


def test_every_shared_filing_parses_with_period_and_mdna(shared_data: Path, tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "retrieval-cache" / "filings"  # shared with the other retrieval tests
    refs = discover_filings(shared_data)
    assert len(refs) == 55 and {r.ticker for r in refs} == {"AAPL", "ADSK", "AMZN", "GOOG", "META", "NVDA", "TSLA"}
    for ref in refs:
        filing = load_filing(ref, cache=cache)
        # the period ends before the filing date (ADSK filed one 10-K 131 days late)
        assert filing.period_end is not None and dt.timedelta(0) < ref.filed - filing.period_end < dt.timedelta(200)
        titles = [s.title for s in filing.sections]
        assert any(re.search(r"management.s discussion", t, re.IGNORECASE) for t in titles), (ref.path, titles)
        assert len(filing.sections) >= 8


def test_a_line_break_inside_a_table_cell_separates_words():
    from lxml import etree

    from finharness.markets.filings import _row_text

    row = etree.fromstring("<tr><td>December 30,<br/>2023</td><td>jurisdiction<br/>of</td><td>$</td><td>1,234</td></tr>")
    assert _row_text(row) == "December 30, 2023 | jurisdiction of | $1,234"
