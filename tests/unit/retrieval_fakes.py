"""Tiny FinTradeBench-layout data roots for the retrieval tests: inline-XBRL filings and a price file."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd

_TEMPLATE = """<?xml version='1.0' encoding='ASCII'?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL"
      xmlns:dei="http://xbrl.sec.gov/dei/2024"><head><title>t</title><style>p {{color: red}}</style></head><body>
<div style="display:none"><ix:header><ix:hidden>
<ix:nonNumeric name="dei:EntityCentralIndexKey">HIDDENHEADERTEXT</ix:nonNumeric></ix:hidden></ix:header></div>
<script>var hiddenScript = 1;</script>
<div><span>UNITED STATES SECURITIES AND EXCHANGE COMMISSION</span></div>
<div>For the period ended <ix:nonNumeric name="dei:DocumentPeriodEndDate"
    format="ixt:date-monthname-day-year-en"><span>{period_text}</span></ix:nonNumeric></div>
<table><tr><td>Item 1.</td><td>Business</td><td>3</td></tr></table>
{sections}
</body></html>
"""


def filing_html(period_end: dt.date, sections: dict[str, list[str]]) -> str:
    """An inline-XBRL-like 10-K/10-Q: a hidden header, a TOC row, then one <div> header and <p>s per section."""
    blocks = []
    for title, paragraphs in sections.items():
        blocks.append(f"<div><span>{title}</span></div>")
        blocks.extend(f"<p>{text}</p>" for text in paragraphs)
    return _TEMPLATE.format(period_text=f"{period_end:%B} {period_end.day}, {period_end.year}",
                            sections="\n".join(blocks))


def write_filing(root: Path, ticker_folder: str, form: str, filed: str, accession: str, period_end: dt.date,
                 sections: dict[str, list[str]]) -> Path:
    path = root / "fintradebench" / "SEC_Filings" / ticker_folder / f"{form}_{filed}_{accession}.htm"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(filing_html(period_end, sections), encoding="ascii")
    return path


def write_prices(root: Path, ticker: str, start: str = "2023-01-02", end: str = "2025-06-30") -> Path:
    """A FinTradeBench-layout history CSV with a steady rise (close = 100 + trading-day number)."""
    days = pd.bdate_range(start, end)
    close = 100 + np.arange(len(days), dtype=float)
    frame = pd.DataFrame({"Date": days.strftime("%Y-%m-%d"), "Open": close - 0.5, "High": close + 1,
                          "Low": close - 1, "Close": close, "Adj. Close": close, "Change": 1.0,
                          "Volume": 1_000_000})
    path = root / "fintradebench" / "history_xlsx" / f"{ticker}-history.xlsx"
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_excel(path, index=False)
    return path


def tiny_data_root(root: Path) -> Path:
    """Ticker ACME: a 10-K filed 2024-02-01 (about widgets) and a 10-Q filed 2024-05-01 (about gadgets)."""
    write_filing(root, "Acme", "10-K", "2024-02-01", "0000000001-24-000001", dt.date(2023, 12, 31), {
        "PART I": [],
        "Item 1. Business": ["Acme sells widgets to industrial customers worldwide."] * 3,
        "Item 7. Management's Discussion and Analysis": [
            "Widget revenue grew 12% because industrial demand for widgets was strong.",
            "Operating margin improved on lower widget input costs."],
        "Item 9A. Controls and Procedures": ["Disclosure controls were effective."],
    })
    write_filing(root, "Acme", "10-Q", "2024-05-01", "0000000001-24-000002", dt.date(2024, 3, 31), {
        "PART I": [],
        "Item 2. Management's Discussion and Analysis": [
            "Gadget revenue doubled in the first quarter after the new gadget launch.",
            "Widget revenue was flat."],
        "Item 4. Controls and Procedures": ["Disclosure controls were effective."],
    })
    write_prices(root, "ACME")
    return root
