"""Rerankers: reorder the fused filing candidates before the quota is taken.

No cross-encoder ships weights here, so reranking is pluggable:

- :class:`NoRerank` (the default) keeps the fused order;
- :class:`LogprobRerank` asks a language model, through a finharness ModelHandle (usually the
  judge or the model under test), whether each passage helps answer the question, and sorts by
  ``log P(" Yes") − log(P(" Yes") + P(" No"))`` from one log-likelihood request per passage.

The passage shown to the reranker is the candidate's best-matching child chunk (with its header), not
the whole parent: about 300 tokens per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from finharness.core.types import LoglikelihoodRequest

RERANK_PROMPT = ("Decide whether the passage contains information that helps answer the question.\n\n"
                 "Question: {question}\n\nPassage:\n{passage}\n\n"
                 "Does the passage help answer the question? Answer Yes or No.\nAnswer:")
"""The relevance prompt of LogprobRerank; the continuations scored are ' Yes' and ' No'."""


class Reranker(Protocol):
    """Scores passages for a question; higher is more relevant. ``name`` is recorded with results."""

    name: str

    async def scores(self, question: str, passages: Sequence[str]) -> list[float] | None: ...


@dataclass(frozen=True)
class NoRerank:
    """Keep the fused order (returns None: nothing to reorder by)."""

    name: str = "none"

    async def scores(self, question: str, passages: Sequence[str]) -> list[float] | None:
        return None


class LogprobRerank:
    """Relevance as the model's probability of ' Yes' against ' No' after :data:`RERANK_PROMPT`."""

    def __init__(self, model: Any, prompt: str = RERANK_PROMPT):
        self.model = model
        """A ModelHandle (or anything with ``async loglikelihood(LoglikelihoodRequest)``)."""
        self.prompt = prompt
        self.name = f"logprob:{getattr(model, 'spec', type(model).__name__)}"

    async def scores(self, question: str, passages: Sequence[str]) -> list[float]:
        requests = [LoglikelihoodRequest(context=self.prompt.format(question=question, passage=passage),
                                         continuations=(" Yes", " No")) for passage in passages]
        responses = await asyncio.gather(*(self.model.loglikelihood(request) for request in requests))
        return [float(yes - np.logaddexp(yes, no)) for yes, no in (r.logprobs for r in responses)]
