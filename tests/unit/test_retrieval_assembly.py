"""retrieval/retrieve.py: quotas, duplicate parents, reranking, assembly under a token budget."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from finharness.core.types import LoglikelihoodResponse
from finharness.retrieval import LogprobRerank, RetrievalConfig, Retriever, count_tokens
from finharness.retrieval.retrieve import MIN_ITEM_TOKENS, _Candidate, assemble

from .retrieval_fakes import tiny_data_root


def _candidate(name: str, pieces: int, words_per_piece: int = 20, focus: int = 0) -> _Candidate:
    return _Candidate(track="filings", source=name, date="2024-01-01", score=1.0, header=f"[{name}]",
                      pieces=tuple(f"{name}-piece{i} " + "word " * (words_per_piece - 1) for i in range(pieces)),
                      focus=focus)


def test_budget_is_shared_and_small_items_leave_room_for_big_ones():
    small, big = _candidate("small", 1), _candidate("big", 40, focus=25)
    items, truncated, dropped = assemble([small, big], budget=400)
    assert sum(item.tokens for item in items) <= 400 and dropped == 0 and truncated == 1
    small_item, big_item = items
    assert not small_item.truncated and small_item.tokens == count_tokens(small_item.text)
    assert big_item.truncated and big_item.tokens > 400 // 2  # it got what the small one left
    assert "big-piece25" in big_item.text  # cut around its best piece, not from the top
    assert "big-piece0 " not in big_item.text


def test_items_too_small_to_be_useful_are_dropped_and_counted():
    items, truncated, dropped = assemble([_candidate(f"c{i}", 10) for i in range(5)], budget=5 * (MIN_ITEM_TOKENS - 1))
    assert items == [] and dropped == 5 and truncated == 0


def test_everything_fits_when_the_budget_allows():
    candidates = [_candidate("a", 2), _candidate("b", 3)]
    items, truncated, dropped = assemble(candidates, budget=10_000)
    assert (truncated, dropped) == (0, 0)
    assert [item.text.count("piece") for item in items] == [2, 3]


@pytest.fixture()
def tiny(tmp_path: Path) -> tuple[Path, Path]:
    return tiny_data_root(tmp_path / "data"), tmp_path / "cache"


def test_quotas_order_and_duplicate_parents(tiny):
    root, cache = tiny
    config = RetrievalConfig(dense="off", filing_quota=3, price_tables=1)
    result = Retriever(root, config, cache=cache).retrieve("disclosure controls effective", "ACME", "2024-06-01")
    tracks = [item.track for item in result.items]
    assert tracks == ["filings"] * tracks.count("filings") + ["prices"] and 1 <= tracks.count("filings") <= 3
    # the 10-K and the 10-Q have the same controls section: only the better-ranked one is returned
    assert sum("Disclosure controls were effective." in item.text for item in result.items) == 1
    assert result.duplicates_removed == 1


def test_real_filings_fit_the_budget_and_cuts_are_counted(shared_data: Path, tmp_path_factory):
    config = RetrievalConfig(dense="off", budget_tokens=700)
    retriever = Retriever(shared_data, config, cache=tmp_path_factory.getbasetemp() / "retrieval-cache")
    result = retriever.retrieve("Greater China iPhone net sales", "AAPL", "2024-12-31")
    assert len(result.items) == 5 and result.tokens_used <= 700
    assert result.truncated == sum(item.truncated for item in result.items) >= 1
    assert all(item.tokens == count_tokens(item.text) for item in result.items)
    assert any("Greater China" in item.text for item in result.items if item.track == "filings")


class _PrefersGadgets:
    spec = "fake:gadgets"

    async def loglikelihood(self, request):
        relevant = "gadget" in request.context.split("Passage:")[1].lower()
        return LoglikelihoodResponse(logprobs=(-0.1, -3.0) if relevant else (-3.0, -0.1),
                                     is_greedy=(relevant, not relevant), continuation_tokens=(1, 1))


def test_logprob_reranker_reorders_filings_not_prices(tiny):
    root, cache = tiny
    retriever = Retriever(root, RetrievalConfig(dense="off", filing_quota=3), cache=cache)
    query = "widget revenue grew on industrial demand"
    plain = retriever.retrieve(query, "ACME", "2024-06-01")
    assert "Widget revenue grew" in plain.items[0].text

    async def inside_a_running_loop():
        return await retriever.aretrieve(query, "ACME", "2024-06-01", reranker=LogprobRerank(_PrefersGadgets()))

    reranked = asyncio.run(inside_a_running_loop())
    assert reranked.reranker == "logprob:fake:gadgets"
    assert "Gadget revenue doubled" not in plain.items[0].text
    assert "Gadget revenue doubled" in reranked.items[0].text and reranked.items[0].score > reranked.items[1].score
    assert [i for i in reranked.items if i.track == "prices"] == [i for i in plain.items if i.track == "prices"]
