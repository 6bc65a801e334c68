"""finharness.markets.xbrl: facts, periods, dimensions, text and labels of inline-XBRL filings."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from finharness.data.errors import DataError
from finharness.markets.xbrl import (
    concept_label,
    member_label,
    parse_filing,
    parse_filing_name,
    read_displayed,
    split_camel,
    text_around,
    words_to_number,
)

TINY = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL"
 xmlns:xbrli="http://www.xbrl.org/2003/instance" xmlns:xbrldi="http://xbrl.org/2006/xbrldi"
 xmlns:iso4217="http://www.xbrl.org/2003/iso4217" xmlns:us-gaap="http://fasb.org/us-gaap/2024"
 xmlns:dei="http://xbrl.sec.gov/dei/2024" xmlns:ixt="http://www.xbrl.org/inlineXBRL/transformation/2020-02-12"
 xmlns:ixt-sec="http://www.sec.gov/inlineXBRL/transformation/2015-08-31"
 xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<head><title>t</title></head><body>
<div style="display:none"><ix:header><ix:hidden>
 <ix:nonNumeric name="dei:DocumentType" contextRef="D">10-K</ix:nonNumeric>
 <ix:nonNumeric name="dei:TradingSymbol" contextRef="D">TINY</ix:nonNumeric>
 <ix:nonFraction name="us-gaap:HiddenThing" contextRef="D" unitRef="usd" decimals="0" id="h1">5</ix:nonFraction>
</ix:hidden><ix:resources>
 <xbrli:context id="D"><xbrli:entity><xbrli:identifier scheme="x">1</xbrli:identifier></xbrli:entity>
  <xbrli:period><xbrli:startDate>2023-10-01</xbrli:startDate><xbrli:endDate>2024-09-28</xbrli:endDate></xbrli:period></xbrli:context>
 <xbrli:context id="I"><xbrli:entity><xbrli:identifier scheme="x">1</xbrli:identifier></xbrli:entity>
  <xbrli:period><xbrli:instant>2024-09-28</xbrli:instant></xbrli:period></xbrli:context>
 <xbrli:context id="S"><xbrli:entity><xbrli:identifier scheme="x">1</xbrli:identifier>
  <xbrli:segment><xbrldi:explicitMember dimension="srt:ProductOrServiceAxis">tiny:IPhoneMember</xbrldi:explicitMember></xbrli:segment></xbrli:entity>
  <xbrli:period><xbrli:startDate>2023-10-01</xbrli:startDate><xbrli:endDate>2024-09-28</xbrli:endDate></xbrli:period></xbrli:context>
 <xbrli:unit id="usd"><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unit>
 <xbrli:unit id="eps"><xbrli:divide><xbrli:unitNumerator><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unitNumerator>
  <xbrli:unitDenominator><xbrli:measure>xbrli:shares</xbrli:measure></xbrli:unitDenominator></xbrli:divide></xbrli:unit>
</ix:resources></ix:header></div>
<p>Net income was $<ix:nonFraction name="us-gaap:NetIncomeLoss" contextRef="D" unitRef="usd" decimals="-8" scale="9" format="ixt:num-dot-decimal" id="f1">93.7</ix:nonFraction> billion  for the year.</p>
<table>
<tr><td>Other income</td><td>$</td><td>(<ix:nonFraction name="us-gaap:OtherNonoperatingIncomeExpense" contextRef="D" unitRef="usd" decimals="-6" scale="6" sign="-" format="ixt:num-dot-decimal" id="f2">1,234</ix:nonFraction></td><td>)</td></tr>
<tr><td>Legal</td><td><ix:nonFraction name="us-gaap:LossContingencyAccrualAtCarryingValue" contextRef="I" unitRef="usd" decimals="-6" scale="6" format="ixt:fixed-zero" id="f3">—</ix:nonFraction></td></tr>
<tr><td>iPhone</td><td><ix:nonFraction name="us-gaap:Revenues" contextRef="S" unitRef="usd" decimals="-6" scale="6" id="f4">201183</ix:nonFraction></td></tr>
<tr><td>EPS</td><td><ix:nonFraction name="us-gaap:EarningsPerShareDiluted" contextRef="D" unitRef="eps" decimals="2" id="f5">6.08</ix:nonFraction></td></tr>
</table>
<p>We have <ix:nonFraction name="us-gaap:NumberOfSegments" contextRef="D" unitRef="usd" decimals="INF" scale="0" format="ixt-sec:numwordsen" id="f6">twenty-two</ix:nonFraction> segments; rate <ix:nonFraction name="us-gaap:EffectiveIncomeTaxRateContinuingOperations" contextRef="D" unitRef="usd" decimals="3" scale="-2" id="f7">24.1</ix:nonFraction>%.
<ix:nonFraction name="us-gaap:Nothing" contextRef="D" unitRef="usd" xsi:nil="true" id="f8"/></p>
</body></html>
"""


@pytest.fixture()
def tiny(tmp_path: Path):
    path = tmp_path / "TINY" / "10-K_2024-11-01_0000000001-24-000123.htm"
    path.parent.mkdir()
    path.write_text(TINY, encoding="utf-8")
    return parse_filing(path)


def test_values_apply_format_scale_and_sign(tiny):
    facts = {f.element_id: f for f in tiny.facts}
    assert facts["f1"].value == 93_700_000_000.0 and facts["f1"].displayed_value == 93.7
    assert facts["f2"].value == -1_234_000_000.0 and facts["f2"].sign == -1
    assert facts["f3"].value == 0.0 and facts["f3"].displayed == "—"
    assert facts["f4"].value == 201_183_000_000.0
    assert facts["f6"].value == 22.0
    assert facts["f7"].value == pytest.approx(0.241)
    assert facts["f8"].value is None and facts["f8"].displayed_value is None
    assert facts["h1"].value == 5.0 and not facts["h1"].visible


def test_units_periods_and_dimensions(tiny):
    facts = {f.element_id: f for f in tiny.facts}
    assert facts["f1"].unit == "iso4217:USD" and facts["f5"].unit == "iso4217:USD/xbrli:shares"
    assert facts["f1"].period.start == date(2023, 10, 1) and facts["f1"].period.days == 364
    assert facts["f3"].period.is_instant and facts["f3"].period.last_day == date(2024, 9, 28)
    assert facts["f4"].dimensions == (("srt:ProductOrServiceAxis", "tiny:IPhoneMember"),)
    assert not facts["f1"].has_dimensions
    assert [f.element_id for f in tiny.facts_named("Revenues", dimensions=True)] == ["f4"]
    assert tiny.facts_named("Revenues") == []


def test_visible_text_and_fact_positions(tiny):
    for fact in tiny.facts:
        if fact.visible:
            assert tiny.text[fact.start:fact.end] == fact.displayed
    assert "Net income was $93.7 billion for the year." in tiny.text
    assert "Other income | $(1,234)" in tiny.text  # '$' and ')' cells joined to the number
    assert "HiddenThing" not in tiny.text and "10-K" not in tiny.text  # the ix:header stays hidden
    eps = next(f for f in tiny.facts if f.element_id == "f5")
    assert text_around(tiny, eps, 30).splitlines()[-1] == "EPS | 6.08"
    with pytest.raises(ValueError, match="hidden"):
        text_around(tiny, next(f for f in tiny.facts if f.element_id == "h1"))


def test_dei_and_file_name(tiny):
    assert tiny.ticker == "TINY" and tiny.document_type == "10-K"
    assert tiny.name.form == "10-K" and tiny.name.filing_date == date(2024, 11, 1)
    assert tiny.name.accession == "0000000001-24-000123"
    assert parse_filing_name("notes.htm") is None


def test_malformed_file_is_a_data_error_with_its_line(tmp_path):
    path = tmp_path / "bad.htm"
    path.write_text("<html>\n<body>\n<p>unclosed\n</body></html>", encoding="utf-8")
    with pytest.raises(DataError) as info:
        parse_filing(path)
    assert str(path) in str(info.value) and info.value.line == 4
    with pytest.raises(DataError, match="not found"):
        parse_filing(tmp_path / "missing.htm")


@pytest.mark.parametrize("text, fmt, expected", [
    ("1,234.5", "num-dot-decimal", 1234.5), ("1.234,5", "num-comma-decimal", 1234.5), ("—", "fixed-zero", 0),
    ("no", "numwordsen", 0), ("one hundred and two", "numwordsen", 102), ("42", None, 42), ("4 2 x", None, None),
])
def test_read_displayed(text, fmt, expected):
    value = read_displayed(text, fmt)
    assert (None if value is None else float(value)) == expected


def test_words_and_labels():
    assert words_to_number("twenty-five") == 25 and words_to_number("three million") == 3_000_000
    assert words_to_number("several") is None
    assert split_camel("NetIncomeLoss") == "Net Income Loss"
    assert split_camel("EBITDAMargin") == "EBITDA Margin"
    label = concept_label("us-gaap:NetIncomeLoss")
    assert label.words == "Net Income Loss" and label.text == "net income (loss)"
    assert concept_label("aapl:SomethingRare").text == "Something Rare"
    assert member_label("aapl:IPhoneMember") == "IPhone" and member_label("us-gaap:ProductMember") == "Product"


def test_real_apple_10k_2024(shared_data):
    path = shared_data / "fintradebench" / "SEC_Filings" / "AAPL" / "10-K_2024-11-01_0000320193-24-000123.htm"
    filing = parse_filing(path)
    assert filing.ticker == "AAPL" and filing.document_type == "10-K" and filing.fiscal_year == "2024"
    assert filing.period_end == date(2024, 9, 28) and filing.fiscal_period == "FY"
    fy2024 = [f for f in filing.facts_named("us-gaap:NetIncomeLoss") if f.period.end == date(2024, 9, 28)
              and f.period.days > 360]
    assert fy2024 and {f.value for f in fy2024} == {93_736_000_000.0}
    assert all(f.displayed == "93,736" and f.scale == 6 and f.unit == "iso4217:USD" for f in fy2024)
    revenue = [f for f in filing.facts_named("RevenueFromContractWithCustomerExcludingAssessedTax")
               if f.period.end == date(2024, 9, 28) and f.period.days > 360]
    assert {f.value for f in revenue} == {391_035_000_000.0}
    # every visible fact sits exactly where the text shows it
    visible = [f for f in filing.facts if f.visible]
    assert len(visible) > 0.95 * len(filing.facts)
    assert all(filing.text[f.start:f.end] == f.displayed for f in visible)
    assert "Net income | $93,736 | $96,995 | $99,803" in filing.text
