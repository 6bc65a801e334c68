"""FinTradeBench build: the numerical audit on hand-written answers against the real signals and fundamentals."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re

import pandas as pd
import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.fintradebench.construction.audit import AuditScope, Knowledge, audit_answer, extract_claims
from finharness.benchmarks.fintradebench.ideal import MarketData
from finharness.markets.fundamentals import TickerFundamentals
from finharness.markets.prices import load_prices
from finharness.markets.signals import compute_signals
from tests.fakes import fake_models, prompts

AS_OF = dt.date(2025, 9, 30)
WINDOW = dt.date(2025, 7, 1)


@pytest.fixture(scope="module")
def knowledge(shared_data):
    return Knowledge(MarketData(shared_data))


@pytest.fixture(scope="module")
def truth(shared_data):
    """The values the audit must find, computed here from the price file and the filings directly."""
    signals = compute_signals(load_prices(shared_data / "fintradebench/history_xlsx/AAPL-history.xlsx"))
    signals.index = pd.DatetimeIndex(signals["Date"])

    def on(day: dt.date) -> pd.Series:
        return signals.loc[: pd.Timestamp(day)].iloc[-1]

    ratios = TickerFundamentals(shared_data, "AAPL").as_of(AS_OF).values
    return {"on": on, "rsi": float(on(AS_OF)["RSI"]), "macd": float(on(AS_OF)["MACD"]),
            "momentum": float(on(AS_OF)["Momentum_20D"]), "roe": float(ratios["Return on Equity"])}


def audit(text, knowledge, tickers=("AAPL",), auditor=None):
    return asyncio.run(audit_answer(text, AuditScope(tuple(tickers), AS_OF, WINDOW), knowledge, auditor))


def test_true_rsi_is_supported_and_a_wrong_one_contradicted(knowledge, truth):
    result = audit(f"Apple's RSI of {truth['rsi']:.2f} signals overbought conditions.", knowledge)
    (claim,) = result.claims
    assert (claim.status, claim.metric, claim.method) == ("SUPPORTED", "RSI", "deterministic")
    assert claim.reference == pytest.approx(truth["rsi"]) and claim.date == AS_OF.isoformat()
    assert result.accurate
    wrong = audit(f"Apple's RSI of {truth['rsi'] - 15:.2f} signals a neutral market.", knowledge)
    assert [c.status for c in wrong.claims] == ["CONTRADICTED"] and not wrong.accurate
    assert wrong.claims[0].reference == pytest.approx(truth["rsi"])


def test_unknown_metric_and_unnamed_numbers_are_not_found(knowledge, truth):
    result = audit(f"Volatility of 2.3% is moderate. Revenue grew 6.5% last year. The RSI is {truth['rsi']:.1f}.",
                   knowledge)
    statuses = {(c.metric, c.status) for c in result.claims}
    assert ("Volatility", "NOT_FOUND") in statuses and (None, "NOT_FOUND") in statuses
    assert ("RSI", "SUPPORTED") in statuses
    assert (result.supported, result.contradicted, result.not_found) == (1, 0, 2)
    assert result.accurate  # nothing contradicted, one supported
    assert not audit("Volatility of 2.3% is moderate.", knowledge).accurate  # nothing supported


def test_percent_and_fraction_are_the_same_claim(knowledge, truth):
    roe, momentum = truth["roe"], truth["momentum"]
    for text in (f"ROE of {roe * 100:.1f}%", f"return on equity of {roe:.3f}", f"ROE stands at {roe * 100:.1f}",
                 f"Momentum_20D={momentum:.4f}", f"the 20-day momentum is {momentum * 100:.2f}%"):
        (claim,) = audit(text + ".", knowledge).claims
        assert claim.status == "SUPPORTED", (text, claim)
    (claim,) = audit(f"ROE of {roe * 100 * 1.5:.1f}%.", knowledge).claims
    assert claim.status == "CONTRADICTED" and claim.metric == "Return on Equity"


def test_tolerance_edges(knowledge, truth):
    rsi, macd = truth["rsi"], truth["macd"]
    inside = audit(f"RSI of {rsi * 1.019:.4f}.", knowledge).claims[0]
    outside = audit(f"RSI of {rsi * 1.021:.4f}.", knowledge).claims[0]
    assert (inside.status, outside.status) == ("SUPPORTED", "CONTRADICTED")
    assert inside.tolerance.startswith("max(rel 2%")
    # a claim's own rounding: 'MACD of 7' covers 6.5..7.5, wider than 2% of the value
    rounded = audit(f"MACD of {round(macd)}.", knowledge).claims[0]
    off_by_one = audit(f"MACD of {round(macd) - 1}.", knowledge).claims[0]
    assert rounded.status == "SUPPORTED" and "±0.5" in rounded.tolerance
    assert off_by_one.status == "CONTRADICTED"


def test_dates_windows_parameters_thresholds_and_list_markers_are_not_claims(knowledge, truth):
    text = ("1. Trading signals\nAs of September 30, 2025, the RSI (14-day) over 14-day windows reads "
            f"{truth['rsi']:.2f}, above the 70 overbought line (an RSI between 30 and 70 is neutral); "
            f"MACD (12, 26, 9) is {truth['macd']:.2f}, MACD > 0. Level 4 of 2025.")
    claims = audit(text, knowledge).claims
    assert [(c.metric, c.status) for c in claims] == [("RSI", "SUPPORTED"), ("MACD", "SUPPORTED")]


def test_a_parenthesised_value_in_prose_is_read_as_a_parenthetical(knowledge, truth):
    signal = float(truth["on"](AS_OF)["MACD_Signal"])
    (claim,) = audit(f"The MACD crossed its signal line ({signal:.2f}).", knowledge).claims
    assert (claim.metric, claim.status) == ("MACD_Signal", "SUPPORTED") and "parenthetical" in claim.detail


def test_a_claim_naming_another_date_is_checked_on_that_date(knowledge, truth):
    day = dt.date(2025, 8, 29)
    rsi_then = float(truth["on"](day)["RSI"])
    (claim,) = audit(f"On 2025-08-29 the RSI was {rsi_then:.2f}.", knowledge).claims
    assert claim.status == "SUPPORTED" and claim.date == day.isoformat()
    assert claim.reference == pytest.approx(rsi_then)


def test_the_company_named_before_a_claim_is_the_one_checked(knowledge, truth, shared_data):
    nvda = compute_signals(load_prices(shared_data / "fintradebench/history_xlsx/NVDA-history.xlsx"))
    nvda_rsi = float(nvda[nvda["Date"] <= pd.Timestamp(AS_OF)]["RSI"].iloc[-1])
    result = audit(f"Apple's RSI is {truth['rsi']:.2f}. Nvidia's RSI is {nvda_rsi:.2f}.", knowledge,
                   tickers=("AAPL", "NVDA"))
    assert [(c.ticker, c.status) for c in result.claims] == [("AAPL", "SUPPORTED"), ("NVDA", "SUPPORTED")]
    swapped = audit(f"Nvidia's RSI is {truth['rsi']:.2f}.", knowledge, tickers=("AAPL", "NVDA"))
    if abs(truth["rsi"] - nvda_rsi) > 0.02 * nvda_rsi:
        assert swapped.claims[0].status == "CONTRADICTED"


def test_the_context_value_shown_to_the_model_is_accepted(knowledge, shared_data):
    context = MarketData(shared_data).context(("AAPL",), WINDOW, AS_OF)
    shown = float(re.search(r"F_Book/Price: ([\d.]+)", context.fundamental).group(1))
    (claim,) = audit(f"Book/Price of {shown}.", knowledge).claims
    assert claim.status == "SUPPORTED" and "median" in claim.detail


def mapping_auditor(folder, metric):
    """The shared fake (tests/fakes.py) as an LLM auditor that maps every claim it is shown to `metric`."""
    reply = json.dumps({"metric": metric})
    return fake_models(folder, auditor=FakeBackend(name=f"auditor-{metric}", reply=reply))["auditor"]


def test_llm_auditor_maps_only_what_the_checker_cannot(knowledge, truth, tmp_path):
    auditor = mapping_auditor(tmp_path / "rsi", "RSI")
    text = f"The momentum oscillator reads {truth['rsi']:.2f}. The MACD is {truth['macd']:.2f}."
    result = audit(text, knowledge, auditor=auditor)
    assert [(c.metric, c.method, c.status) for c in result.claims] == [
        ("RSI", "llm", "SUPPORTED"), ("MACD", "deterministic", "SUPPORTED")]
    (sent,) = prompts(auditor)
    assert "oscillator" in sent
    unknown = audit("Revenue grew 6.5%.", knowledge, auditor=mapping_auditor(tmp_path / "revenue", "Revenue"))
    assert [(c.method, c.status) for c in unknown.claims] == [("llm", "NOT_FOUND")]


def test_extraction_keeps_the_claim_text_and_unit():
    scope = AuditScope(("AAPL",), AS_OF, WINDOW)
    (claim,) = extract_claims("The stock trades at a P/E of 35x today.", scope)
    assert claim.mention.metrics == ("P/E",) and claim.number.unit == "x" and claim.text == "P/E of 35x"


def test_an_answer_restating_the_ideal_context_is_fully_supported(knowledge, shared_data):
    """Every number the context shows the model (signals, prices, % change, fundamental medians, two companies)
    is a claim the audit maps to its metric and company and finds in the data."""
    tickers = ("AAPL", "NVDA")
    context = MarketData(shared_data).context(tickers, WINDOW, AS_OF)
    result = audit(context.trading + "\n\n" + context.fundamental, knowledge, tickers=tickers)
    shown = len(re.findall(r"=-?\d|: -?\d", context.trading + context.fundamental))  # 'RSI=82.7', 'F_ROA: 0.07'
    assert result.supported == len(result.claims) == shown
    assert {c.ticker for c in result.claims} == set(tickers)
    assert {"RSI", "OBV", "pct_change", "close", "Return on Equity", "Dividend Yield"} <= {c.metric for c in
                                                                                          result.claims}
