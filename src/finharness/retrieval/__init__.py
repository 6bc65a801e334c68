"""Point-in-time retrieval for FinTradeBench: SEC filing sections (track A) and monthly price tables (track B).

    from finharness.retrieval import Retriever
    result = Retriever(data_dir).retrieve("How did iPhone sales change?", "AAPL", "2024-12-31")

Names are loaded on first use, so importing this package (e.g. from the CLI) imports no bm25s,
onnxruntime or pandas.
"""

from __future__ import annotations

from finharness.util import lazy_exports

_EXPORTS = {
    "Retriever": "retrieve",
    "RetrievalConfig": "retrieve",
    "Retrieval": "retrieve",
    "RetrievedItem": "retrieve",
    "NoRerank": "rerank",
    "LogprobRerank": "rerank",
    "Reranker": "rerank",
    "ChunkingParams": "chunking",
    "IndexParams": "index",
    "build_index": "index",
    "count_tokens": "chunking",
}

__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
