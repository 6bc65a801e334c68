"""retrieval/index.py: the index is cached by content hash, reused, and rebuilt when a file changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from finharness.retrieval import RetrievalConfig, Retriever
from finharness.retrieval import index as index_module

QUERY = "iPhone net sales Greater China"
AS_OF = "2024-12-31"


@pytest.fixture()
def aapl_copy(shared_data: Path, tmp_path: Path) -> Path:
    """A data root with two real AAPL 10-Qs and the AAPL price history (copied: one gets edited)."""
    source = shared_data / "fintradebench"
    target = tmp_path / "data" / "fintradebench"
    (target / "SEC_Filings" / "AAPL").mkdir(parents=True)
    for name in ("10-Q_2024-05-03_0000320193-24-000069.htm", "10-Q_2024-08-02_0000320193-24-000081.htm"):
        shutil.copy(source / "SEC_Filings" / "AAPL" / name, target / "SEC_Filings" / "AAPL" / name)
    (target / "history_xlsx").mkdir()
    shutil.copy(source / "history_xlsx" / "AAPL-history.xlsx", target / "history_xlsx")
    return tmp_path / "data"


def _retrieve(data: Path, cache: Path, query: str = QUERY):
    return Retriever(data, RetrievalConfig(dense="off"), cache=cache).retrieve(query, "AAPL", AS_OF)


def test_second_build_loads_from_cache_with_identical_results(aapl_copy: Path, tmp_path: Path, monkeypatch):
    cache = tmp_path / "cache"
    cold = _retrieve(aapl_copy, cache)
    assert cold.index_from_cache is False
    assert (cache / "retrieval" / "index" / cold.index_key / "parents.json").is_file()

    # A cached load must not parse or chunk anything (checked by behaviour, not by timing: machines are noisy).
    monkeypatch.setattr(index_module, "load_filing", lambda *a, **k: pytest.fail("parsed although cached"))
    warm = _retrieve(aapl_copy, cache)
    assert warm.index_from_cache is True and warm.index_key == cold.index_key
    assert warm.items == cold.items


def test_editing_a_file_invalidates_the_index(aapl_copy: Path, tmp_path: Path):
    cache = tmp_path / "cache"
    before = _retrieve(aapl_copy, cache, "zorblax initiative")
    assert not any("zorblax" in item.text.lower() for item in before.items)

    edited = aapl_copy / "fintradebench" / "SEC_Filings" / "AAPL" / "10-Q_2024-05-03_0000320193-24-000069.htm"
    html = edited.read_text(encoding="ascii")
    edited.write_text(html.replace("</body>", "<div>The Zorblax initiative expanded services revenue.</div></body>"),
                      encoding="ascii")
    after = _retrieve(aapl_copy, cache, "zorblax initiative")
    assert after.index_key != before.index_key and after.index_from_cache is False
    top = after.items[0]
    assert top.track == "filings" and edited.name in top.source and "Zorblax initiative" in top.text


def test_changing_chunk_parameters_changes_the_key(aapl_copy: Path, tmp_path: Path):
    from finharness.retrieval import ChunkingParams, IndexParams

    cache = tmp_path / "cache"
    default = _retrieve(aapl_copy, cache)
    smaller = Retriever(aapl_copy, RetrievalConfig(dense="off", index=IndexParams(ChunkingParams(child_tokens=150))),
                        cache=cache).retrieve(QUERY, "AAPL", AS_OF)
    assert smaller.index_key != default.index_key and smaller.index_from_cache is False
