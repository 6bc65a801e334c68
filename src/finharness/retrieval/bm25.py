"""Lexical retrieval: BM25 over child chunks with the `bm25s` package (sparse-matrix BM25, Lucene variant).

Text is lower-cased, split into words of two or more characters (bm25s' default pattern), English
stop words are removed and the rest Snowball-stemmed (PyStemmer), so ``revenues`` matches ``revenue``.
Parameters are Lucene's defaults (k1 = 1.5, b = 0.75).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer


@dataclass(frozen=True)
class BM25Params:
    """BM25 settings; part of every index cache key."""

    k1: float = 1.5
    """Term-frequency saturation."""

    b: float = 0.75
    """Length normalisation."""

    stemmer: str = "english"
    """Snowball stemmer language ('' for none)."""


def library_version() -> str:
    """bm25s version, recorded in cache keys and reports (its on-disk format may change)."""
    return bm25s.__version__


class BM25Index:
    """A BM25 index over a fixed list of texts; scores come back in the order the texts were given."""

    def __init__(self, retriever: bm25s.BM25, params: BM25Params):
        self._retriever = retriever
        self.params = params
        self._stemmer = Stemmer.Stemmer(params.stemmer) if params.stemmer else None

    @classmethod
    def build(cls, texts: Sequence[str], params: BM25Params = BM25Params()) -> BM25Index:
        stemmer = Stemmer.Stemmer(params.stemmer) if params.stemmer else None
        tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, show_progress=False)
        retriever = bm25s.BM25(k1=params.k1, b=params.b, method="lucene")
        retriever.index(tokens, show_progress=False)
        return cls(retriever, params)

    def save(self, folder: Path) -> None:
        self._retriever.save(str(folder), show_progress=False)

    @classmethod
    def load(cls, folder: Path, params: BM25Params) -> BM25Index:
        return cls(bm25s.BM25.load(str(folder), show_progress=False), params)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed text for ``query`` (0 where no query term occurs)."""
        terms = bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer, return_ids=False,
                               show_progress=False)[0]
        return np.asarray(self._retriever.get_scores(terms), dtype=np.float64)
