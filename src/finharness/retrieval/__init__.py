"""Point-in-time retrieval for FinTradeBench: SEC filing sections (track A) and monthly price tables (track B).

    from finharness.retrieval import Retriever
    result = Retriever(data_dir).retrieve("How did iPhone sales change?", "AAPL", "2024-12-31")

Names are loaded on first use, so importing this package (e.g. from the CLI) imports no bm25s,
onnxruntime or pandas.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

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

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
