"""retrieval/fuse.py (RRF, min-max) and retrieval/rerank.py (NoRerank, LogprobRerank)."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from finharness.core.types import LoglikelihoodRequest, LoglikelihoodResponse
from finharness.retrieval.fuse import RRF_K, fuse
from finharness.retrieval.rerank import LogprobRerank, NoRerank


def test_rrf_adds_reciprocal_ranks_with_k_60():
    bm25 = np.array([3.0, 0.0, 1.0, 2.0])    # ranks: 0→1, 3→2, 2→3; doc 1 has no query term: unranked
    dense = np.array([0.1, 0.9, -0.2, 0.5])  # ranks: 1→1, 3→2, 0→3, 2→4
    fused = fuse([bm25, dense])
    expected = [1 / 61 + 1 / 63, 1 / 61, 1 / 63 + 1 / 64, 1 / 62 + 1 / 62]
    assert RRF_K == 60
    np.testing.assert_allclose(fused, expected)
    assert list(np.argsort(-fused)) == [0, 3, 2, 1]  # 1/61 + 1/63 just beats 2/62


def test_rrf_depth_limits_what_counts():
    scores = np.arange(10, 0, -1, dtype=float)
    fused = fuse([scores], depth=3)
    assert (fused[:3] > 0).all() and (fused[3:] == 0).all()


def test_minmax_sums_normalised_scores():
    fused = fuse([np.array([0.0, 5.0, 10.0]), np.array([1.0, 0.0, 0.5])], method="minmax")
    np.testing.assert_allclose(fused, [0.0 + 1.0, 0.5 + 0.0, 1.0 + 0.5])
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse([np.ones(2)], method="max")  # type: ignore[arg-type]


class _RelevanceModel:
    """A stand-in ModelHandle: ' Yes' is likely when the passage mentions 'widget'."""

    spec = "fake:relevance"

    def __init__(self):
        self.requests: list[LoglikelihoodRequest] = []

    async def loglikelihood(self, request: LoglikelihoodRequest) -> LoglikelihoodResponse:
        self.requests.append(request)
        relevant = "widget" in request.context.split("Passage:")[1].lower()
        yes, no = (-0.1, -2.5) if relevant else (-3.0, -0.2)
        return LoglikelihoodResponse(logprobs=(yes, no), is_greedy=(relevant, not relevant), continuation_tokens=(1, 1))


def test_logprob_rerank_scores_yes_against_no():
    model = _RelevanceModel()
    reranker = LogprobRerank(model)
    passages = ["Gadgets sold well.", "Widget revenue grew.", "Controls were effective."]
    scores = asyncio.run(reranker.scores("How did widgets do?", passages))
    assert scores[1] == pytest.approx(-0.1 - math.log(math.exp(-0.1) + math.exp(-2.5)))
    assert max(scores) == scores[1] and all(s <= 0 for s in scores)
    assert [r.continuations for r in model.requests] == [(" Yes", " No")] * 3
    assert "Question: How did widgets do?" in model.requests[0].context
    assert reranker.name == "logprob:fake:relevance"


def test_no_rerank_keeps_the_fused_order():
    assert asyncio.run(NoRerank().scores("q", ["a", "b"])) is None
    assert NoRerank().name == "none"
