"""Point in time: nothing filed or priced after the as-of date is ever retrieved, and the cut-off is not vacuous."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from finharness.markets.filings import discover_filings, load_filing
from finharness.retrieval import RetrievalConfig, Retriever

TICKERS = ("AAPL", "ADSK", "AMZN", "GOOG", "META", "NVDA", "TSLA")
QUESTION = "How did revenue, operating income and risk factors change compared with the prior period?"


@pytest.fixture(scope="module")
def retriever(shared_data: Path, tmp_path_factory) -> Retriever:
    # dense off: the cut-off happens before any scorer runs, so BM25 alone exercises it (the dense path is
    # checked on a small corpus in test_retrieval_dense.py); the cache is shared with the other retrieval tests.
    cache = tmp_path_factory.getbasetemp() / "retrieval-cache"
    return Retriever(shared_data, RetrievalConfig(dense="off"), cache=cache)


def _as_of_dates(filed: list[dt.date]) -> list[dt.date]:
    """Before any filing, between filings (the day before one is filed), and the day a filing is made."""
    day = dt.timedelta(days=1)
    return sorted({filed[0] - day, filed[2] - day, filed[len(filed) // 2], filed[-1] - day})


@pytest.mark.parametrize("ticker", TICKERS)
def test_nothing_after_as_of_is_returned(retriever: Retriever, shared_data: Path, ticker: str):
    refs = discover_filings(shared_data, {ticker})
    for as_of in _as_of_dates([ref.filed for ref in refs]):
        result = retriever.retrieve(QUESTION, ticker, as_of)
        eligible = {ref.accession for ref in refs if ref.filed <= as_of}
        assert result.items, (ticker, as_of)
        for item in result.items:
            assert item.date <= as_of.isoformat(), (ticker, as_of, item.source, item.date)
        # the filter runs before scoring: the index holds exactly the eligible filings
        index = retriever.filing_index(ticker, as_of)
        if eligible:
            assert {parent.meta.accession for parent in index.parents} == eligible
            assert index.latest_filed <= as_of.isoformat()
        else:
            assert index is None and all(item.track == "prices" for item in result.items)
        assert result.filings_considered == len(eligible)
        # price tables stop at the last trading day on or before as-of
        assert max(item.date for item in result.items if item.track == "prices") <= as_of.isoformat()


@pytest.mark.parametrize("ticker", TICKERS)
def test_a_later_as_of_can_return_the_later_filing(retriever: Retriever, shared_data: Path, ticker: str):
    latest = discover_filings(shared_data, {ticker})[-1]
    filing = load_filing(latest, cache=retriever.cache / "filings")
    query = f"{latest.form} period {filing.period_end} filed {latest.filed}"  # names that filing's header
    before = retriever.retrieve(query, ticker, latest.filed - dt.timedelta(days=1))
    on_the_day = retriever.retrieve(query, ticker, latest.filed)
    assert not any(latest.path.name in item.source for item in before.items)
    assert any(latest.path.name in item.source for item in on_the_day.items), [i.source for i in on_the_day.items]


def test_a_violation_would_be_caught(retriever: Retriever, shared_data: Path, monkeypatch):
    """The last line of defence: if the index held later filings, retrieval raises instead of leaking them."""
    latest = discover_filings(shared_data, {"AAPL"})[-1]
    everything = retriever.filing_index("AAPL", latest.filed)
    leaky = Retriever(shared_data, RetrievalConfig(dense="off"), cache=retriever.cache)
    monkeypatch.setattr(leaky, "filing_index", lambda ticker, as_of: everything)
    filing = load_filing(latest, cache=retriever.cache / "filings")
    with pytest.raises(RuntimeError, match="point-in-time violation"):
        leaky.retrieve(f"{latest.form} period {filing.period_end} filed {latest.filed}", "AAPL",
                       latest.filed - dt.timedelta(days=1))
