"""retrieval/chunking.py: the token approximation, children tiling parents, the metadata header."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from finharness.markets.filings import Filing, FilingRef, Section
from finharness.retrieval.chunking import ChunkingParams, chunk_filing, count_tokens, truncate_tokens


def _filing(sections: list[Section]) -> Filing:
    ref = FilingRef(ticker="AAPL", form="10-K", filed=dt.date(2024, 11, 1), accession="0000320193-24-000123",
                    path=Path("AAPL/10-K_2024-11-01_0000320193-24-000123.htm"))
    return Filing(ref=ref, period_end=dt.date(2024, 9, 28), sections=tuple(sections), sha256="0" * 64)


def test_token_approximation_counts_words_and_punctuation():
    assert count_tokens("Total net sales | $391,035 | 2%") == 11  # Total net sales | $ 391 , 035 | 2 %
    assert count_tokens("Management's") == 3
    assert truncate_tokens("one two, three four", 3) == "one two,"
    assert truncate_tokens("short", 10) == "short"
    assert truncate_tokens("anything", 0) == ""


def test_children_stay_under_the_limit_and_tile_their_parent():
    lines = [f"Line {i} says revenue was {i},000 dollars." for i in range(200)]
    lines.insert(50, " ".join(f"word{i}" for i in range(700)))  # one paragraph longer than two children
    params = ChunkingParams(child_tokens=60, parent_tokens=250)
    parents = chunk_filing(_filing([Section("Item 7. MD&A", "\n".join(lines))]), params)
    children = [child for parent in parents for child in parent.children]
    assert all(count_tokens(child.text) <= 60 for child in children)
    # nothing lost or repeated: the children, in order, hold exactly the section's tokens
    assert sum(count_tokens(child.text) for child in children) == count_tokens("\n".join(lines))
    assert " ".join(" ".join(c.text.split()) for c in children) == " ".join(" ".join(lines).split())
    # a long section becomes numbered parts of about equal size
    assert len(parents) == -(-count_tokens("\n".join(lines)) // 250)
    assert parents[0].title == f"Item 7. MD&A (part 1/{len(parents)})"
    sizes = [sum(count_tokens(c.text) for c in p.children) for p in parents]
    assert max(sizes) <= 250 + 60 and min(sizes[:-1]) >= 250 * 0.5


def test_every_chunk_carries_the_metadata_header():
    parents = chunk_filing(_filing([Section("Cover", "Apple Inc."), Section("Item 1. Business", "We make phones.")]),
                           ChunkingParams())
    assert [p.title for p in parents] == ["Cover", "Item 1. Business"]
    text = parents[1].indexed_text(parents[1].children[0])
    assert text == "[AAPL 10-K period 2024-09-28 filed 2024-11-01] Item 1. Business\nWe make phones."
    assert parents[1].id == "0000320193-24-000123#1.0"
    assert parents[1].meta.source == "AAPL/10-K_2024-11-01_0000320193-24-000123.htm"


def test_nonsense_chunking_parameters_are_refused():
    with pytest.raises(ValueError):
        ChunkingParams(child_tokens=500, parent_tokens=100)
