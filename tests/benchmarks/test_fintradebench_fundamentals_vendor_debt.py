"""Debt as the FinTradeBench vendor counts it (the lines printed on the balance sheet), Debt/Equity's
denominator with noncontrolling interest, and concept rank over filing date in `Knowledge.of`."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.markets.filings import FilingRef
from finharness.markets.fundamentals import (
    FilingNumbers,
    FundamentalsConfig,
    Knowledge,
    Observation,
    RatioAgreement,
    TickerFundamentals,
    balance_sheet_columns,
    balance_sheet_debt,
    compare_with_official,
    filing_numbers,
    format_agreement,
    quarter_inputs,
    ratios,
)
from finharness.markets.xbrl import parse_filing

NOW, BEFORE = dt.date(2024, 12, 31), dt.date(2023, 12, 31)

HEAD = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL"
 xmlns:xbrli="http://www.xbrl.org/2003/instance" xmlns:xbrldi="http://xbrl.org/2006/xbrldi"
 xmlns:us-gaap="http://fasb.org/us-gaap/2024" xmlns:dei="http://xbrl.sec.gov/dei/2024"
 xmlns:tiny="http://tiny.example/2024" xmlns:ixt="http://www.xbrl.org/inlineXBRL/transformation/2020-02-12">
<head><title>t</title></head><body>
<div style="display:none"><ix:header><ix:hidden>
 <ix:nonNumeric name="dei:DocumentType" contextRef="I1">10-K</ix:nonNumeric>
 <ix:nonNumeric name="dei:DocumentPeriodEndDate" contextRef="I1">December 31, 2024</ix:nonNumeric>
 <ix:nonFraction name="us-gaap:OperatingLeaseLiabilityCurrent" contextRef="I1" unitRef="usd" decimals="-6" scale="6">250</ix:nonFraction>
</ix:hidden><ix:resources>
 <xbrli:context id="I1"><xbrli:entity><xbrli:identifier scheme="x">1</xbrli:identifier></xbrli:entity>
  <xbrli:period><xbrli:instant>2024-12-31</xbrli:instant></xbrli:period></xbrli:context>
 <xbrli:context id="I0"><xbrli:entity><xbrli:identifier scheme="x">1</xbrli:identifier></xbrli:entity>
  <xbrli:period><xbrli:instant>2023-12-31</xbrli:instant></xbrli:period></xbrli:context>
 <xbrli:context id="R1"><xbrli:entity><xbrli:identifier scheme="x">1</xbrli:identifier>
  <xbrli:segment><xbrldi:explicitMember dimension="srt:CounterpartyNameAxis">tiny:RelatedPartyMember</xbrldi:explicitMember></xbrli:segment></xbrli:entity>
  <xbrli:period><xbrli:instant>2024-12-31</xbrli:instant></xbrli:period></xbrli:context>
 <xbrli:unit id="usd"><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unit>
</ix:resources></ix:header></div>
"""


def row(label: str, concept: str, now: str | None, before: str | None = None, context: str = "I1") -> str:
    """A balance-sheet row in millions: the column of 2024-12-31 (or `context`) and of 2023-12-31."""
    cells = f"<td>{label}</td>"
    for ctx, number in ((context, now), ("I0", before)):
        if number is not None:
            cells += (f'<td><ix:nonFraction name="{concept}" contextRef="{ctx}" unitRef="usd" decimals="-6" scale="6" '
                      f'format="ixt:num-dot-decimal">{number}</ix:nonFraction></td>')
    return f"<tr>{cells}</tr>\n"


# Hand-computed: the face shows commercial paper, the current and noncurrent parts of long-term debt, their
# subtotal ("Total debt", counted once) and a noncurrent operating lease liability.
#   2024-12-31: 2,000 + 1,000 + 9,000 + 1,200 = 13,200 million;  2023-12-31: 1,500 + 800 + 9,500 + 1,100 = 12,900.
# Not counted: the MD&A mention of long-term debt above the balance sheet, the hidden current lease part (250),
# the related-party (dimensional) breakdown, accrued interest on borrowings, and the notes after the statement.
BALANCE_SHEET = (
    "<p>MD&amp;A: total assets of "
    '<ix:nonFraction name="us-gaap:Assets" contextRef="I1" unitRef="usd" decimals="-6" scale="6">50,000</ix:nonFraction>'
    ' and long-term debt of '
    '<ix:nonFraction name="us-gaap:LongTermDebt" contextRef="I1" unitRef="usd" decimals="-6" scale="6">10,000</ix:nonFraction>'
    ".</p>\n<table>\n"
    + row("Cash", "us-gaap:CashAndCashEquivalentsAtCarryingValue", "5,000", "4,000")
    + row("Total assets", "us-gaap:Assets", "50,000", "45,000")
    + row("Accounts payable", "us-gaap:AccountsPayableCurrent", "3,000", "2,800")
    + row("Commercial paper", "us-gaap:CommercialPaper", "2,000", "1,500")
    + row("Current portion of long-term debt", "us-gaap:LongTermDebtCurrent", "1,000", "800")
    + row("Accrued interest on borrowings", "tiny:AccruedInterestOnBorrowings", "50", "40")
    + row("Total current liabilities", "us-gaap:LiabilitiesCurrent", "6,050", "5,140")
    + row("Long-term debt", "us-gaap:LongTermDebtNoncurrent", "9,000", "9,500")
    + row("Total debt", "us-gaap:LongTermDebt", "10,000", "10,300")
    + row("Operating lease liabilities", "us-gaap:OperatingLeaseLiabilityNoncurrent", "1,200", "1,100")
    + row("of which to related parties", "us-gaap:OperatingLeaseLiabilityNoncurrent", "300", context="R1")
    + row("Total liabilities", "us-gaap:Liabilities", "16,250", "15,740")
    + row("Redeemable noncontrolling interest", "us-gaap:RedeemableNoncontrollingInterestEquityCarryingAmount",
          "100", "90")
    + row("Total stockholders' equity", "us-gaap:StockholdersEquity", "25,000", "22,000")
    + row("Noncontrolling interests", "us-gaap:MinorityInterest", "400", "350")
    + row("Total liabilities and equity", "us-gaap:LiabilitiesAndStockholdersEquity", "50,000", "45,000")
    + "</table>\n<p>Debt note</p><table>\n"
    + row("Total long-term debt", "us-gaap:LongTermDebt", "10,000", "10,300")
    + row("Finance lease liabilities", "us-gaap:FinanceLeaseLiability", "700", "600")
    + "</table>\n")

NO_BALANCE_SHEET = "<p>Condensed notes only</p><table>\n" + "".join(
    row(*r) for r in [("Total assets", "us-gaap:Assets", "50,000"), ("Total debt", "us-gaap:LongTermDebt", "10,000"),
                      ("Commercial paper", "us-gaap:CommercialPaper", "2,000")]) + "</table>\n"


def write_filing(tmp_path: Path, body: str, name: str = "10-K_2025-02-01_0000000001-25-000001.htm") -> FilingRef:
    path = tmp_path / name
    path.write_text(HEAD + body + "</body></html>\n", encoding="utf-8")
    return FilingRef(ticker="TINY", form="10-K", filed=dt.date(2025, 2, 1), accession=name[-24:-4], path=path)


def test_balance_sheet_debt_counts_the_printed_lines_once(tmp_path):
    facts = parse_filing(write_filing(tmp_path, BALANCE_SHEET).path).facts
    now = balance_sheet_debt(facts, NOW)
    assert now is not None and now.total == 13_200e6
    assert [c for c, _ in now.lines] == ["CommercialPaper", "LongTermDebtCurrent", "LongTermDebtNoncurrent",
                                         "OperatingLeaseLiabilityNoncurrent"]
    assert {b.at: b.total for b in balance_sheet_columns(facts)} == {NOW: 13_200e6, BEFORE: 12_900e6}
    assert balance_sheet_debt(facts, dt.date(2022, 12, 31)) is None  # no column of that date


def test_debt_definitions_on_a_synthetic_filing(tmp_path):
    numbers = filing_numbers(write_filing(tmp_path, BALANCE_SHEET))
    knowledge = Knowledge.of([numbers])
    assert knowledge.debt(NOW) == 13_200e6
    assert knowledge.debt(BEFORE) == 12_900e6
    assert knowledge.debt(NOW, "borrowings") == 12_000e6  # LongTermDebt 10,000 + commercial paper 2,000
    # + operating leases (hidden current 250 + noncurrent 1,200) + the finance lease of the note (700)
    assert knowledge.debt(NOW, "borrowings+leases") == 14_150e6
    inputs = quarter_inputs(knowledge, NOW)
    assert not inputs.debt_fallback
    # Debt/Equity over equity + NCI + redeemable NCI (25,000 + 400 + 100); Book/Price keeps equity alone
    assert inputs.equity == 25_000e6 and inputs.leverage_equity == 25_500e6
    values = ratios(inputs, market_cap=100_000e6)
    assert values["Debt/Equity"] == pytest.approx(13_200 / 25_500)
    assert values["Debt/Assets"] == pytest.approx(13_200 / 50_000)
    assert values["Book/Price"] == pytest.approx(25_000 / 100_000)


def test_without_a_balance_sheet_debt_falls_back_and_says_so(tmp_path):
    numbers = filing_numbers(write_filing(tmp_path, NO_BALANCE_SHEET, "10-Q_2025-02-01_0000000001-25-000002.htm"))
    assert numbers.balance_sheets == ()
    knowledge = Knowledge.of([numbers])
    inputs = quarter_inputs(knowledge, NOW)
    # borrowings+leases: LongTermDebt 10,000 + commercial paper 2,000 + the hidden current operating lease 250
    assert inputs.debt_fallback and inputs.debt == 12_250e6
    assert not quarter_inputs(knowledge, NOW, debt="borrowings").debt_fallback
    with pytest.raises(ValueError, match="debt must be one of"):
        FundamentalsConfig(debt="leases")  # type: ignore[arg-type]


def numbers_of(filed: str, *observations: Observation) -> FilingNumbers:
    ref = FilingRef(ticker="TINY", form="10-Q", filed=dt.date.fromisoformat(filed), accession=filed, path=Path(filed))
    return FilingNumbers(ref, BEFORE, observations, (), None, None, False)


def test_concept_rank_wins_over_filing_date_but_a_restatement_of_the_same_concept_wins():
    parent = numbers_of("2024-02-01", Observation("equity", None, BEFORE, 100.0, 0))
    # a later equity statement states only the total including noncontrolling interest for that date
    fallback_only = numbers_of("2024-05-01", Observation("equity", None, BEFORE, 110.0, 1))
    assert Knowledge.of([parent, fallback_only]).balance("equity", BEFORE) == 100.0
    assert Knowledge.of([fallback_only]).balance("equity", BEFORE) == 110.0  # alone, the fallback is used
    restated = numbers_of("2024-08-01", Observation("equity", None, BEFORE, 105.0, 0))
    assert Knowledge.of([parent, fallback_only, restated]).balance("equity", BEFORE) == 105.0
    # a flow: the same rule per (start, end)
    q = (dt.date(2023, 10, 1), BEFORE)
    flows = [numbers_of("2024-02-01", Observation("revenue", *q, 50.0, 0)),
             numbers_of("2024-05-01", Observation("revenue", *q, 48.0, 1)),
             numbers_of("2024-08-01", Observation("revenue", *q, 51.0, 0))]
    assert Knowledge.of(flows[:2]).quarter("revenue", BEFORE) == 50.0
    assert Knowledge.of(flows).quarter("revenue", BEFORE) == 51.0


def test_format_notes_an_incomparable_ticker_instead_of_dashes():
    nan = float("nan")
    rows = [RatioAgreement("ADSK", r, 0, nan, nan, nan, 0, "not Autodesk's") for r in ("Book/Price", "Debt/Assets")]
    rows.append(RatioAgreement("AAPL", "Book/Price", 7, 0.001, 1.0, 1.0, 7))
    text = format_agreement(rows).splitlines()
    assert text[1] == "ADSK   nothing compared: not Autodesk's" and len(text) == 3
    assert text[2].startswith("AAPL   Book/Price")


def test_cli_rejects_an_unknown_debt_definition(tmp_path):
    from finharness.cli import app

    result = CliRunner().invoke(app, ["fintradebench", "fundamentals", "--data-dir", str(tmp_path), "--debt", "leases"])
    assert result.exit_code != 0 and "balance-sheet" in result.output


# --- real filings -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nvda(shared_data):
    return TickerFundamentals(shared_data, "NVDA")


def test_nvda_debt_is_the_balance_sheet_lines(nvda):
    knowledge = nvda.knowledge(max(nvda.filed_dates))
    end = dt.date(2024, 4, 28)
    # short-term debt 1.250 + long-term debt 8.460 + noncurrent operating leases 1.281 bn (the vendor's 10.991)
    assert knowledge.debt(end) == pytest.approx(10.991e9, rel=1e-4)
    assert knowledge.debt(end, "borrowings") == pytest.approx(9.710e9, rel=1e-4)  # the old default: -12 %
    assert knowledge.debt(end, "borrowings+leases") == pytest.approx(11.237e9, rel=1e-4)
    assert nvda.filings_without_balance_sheet == []


def test_tsla_equity_is_the_parent_and_leverage_adds_noncontrolling_interest(shared_data):
    tsla = TickerFundamentals(shared_data, "TSLA")
    inputs = quarter_inputs(tsla.knowledge(max(tsla.filed_dates)), BEFORE)
    # the 10-K's StockholdersEquity, not a later filing's total including NCI (63.367 bn before the fix)
    assert inputs.equity == pytest.approx(62.634e9, rel=1e-4)
    assert inputs.leverage_equity == pytest.approx(62.634e9 + 0.733e9 + 0.242e9, rel=1e-4)


def test_nvda_debt_ratios_match_the_official_quarters(shared_data):
    rows, _ = compare_with_official(shared_data, "NVDA", alignment="quarter")
    table = {r.ratio: r for r in rows}
    for ratio in ("Debt/Assets", "Debt/Equity"):
        assert table[ratio].compared >= 6 and table[ratio].within_1pct == 1.0, ratio
    old, _ = compare_with_official(shared_data, "NVDA", alignment="quarter", config=FundamentalsConfig(debt="borrowings"))
    assert {r.ratio: r for r in old}["Debt/Assets"].within_5pct == 0.0  # the old definition misses every quarter
