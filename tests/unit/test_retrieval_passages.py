"""Retrieval over paged documents (retrieval/passages.py): LangChain's recursive character rule, the index cached
by content, and search within one document."""

from __future__ import annotations

from finharness.retrieval.passages import Document, SplitParams, build_passage_index, split_text


def test_pieces_come_from_the_coarsest_separator_that_fits():
    params = SplitParams(chunk_chars=40, overlap_chars=0)
    text = "First paragraph is short.\n\nSecond paragraph is short too."
    assert split_text(text, params) == ["First paragraph is short.", "Second paragraph is short too."]
    lines = "\n".join(f"line {i} of a table" for i in range(6))  # no blank line: cut at line breaks
    chunks = split_text(lines, params)
    assert all(len(c) <= 40 for c in chunks) and "line 0 of a table\nline 1 of a table" == chunks[0]


def test_overlap_carries_the_end_of_a_chunk_into_the_next():
    words = " ".join(f"w{i:02d}" for i in range(40))  # 159 characters, words of 3
    chunks = split_text(words, SplitParams(chunk_chars=40, overlap_chars=8))
    assert all(len(c) <= 40 for c in chunks)
    for before, after in zip(chunks, chunks[1:]):
        assert after.split()[0] in before.split()[-2:]  # the last words come again first


def test_an_unbroken_run_is_cut_by_characters():
    chunks = split_text("x" * 100, SplitParams(chunk_chars=30, overlap_chars=0))
    assert [len(c) for c in chunks] == [30, 30, 30, 10]


def test_the_index_is_cached_by_content_and_searches_within_a_document(tmp_path):
    docs = [Document("A_2020_10K", "a", ("Revenue rose on cloud demand.", "Capital expenditures were $5 million.")),
            Document("B_2021_10K", "b", ("Capital expenditures fell.",))]
    first = build_passage_index(docs, cache=tmp_path)
    again = build_passage_index(docs, cache=tmp_path)
    assert first.key == again.key and len(list((tmp_path / "retrieval" / "passages" / "bm25").iterdir())) == 1
    hits = first.search("capital expenditures", k=2)
    assert {h.passage.doc for h in hits} == {"A_2020_10K", "B_2021_10K"}
    only_b = first.search("capital expenditures", k=2, where=lambda p: p.doc == "B_2021_10K")
    assert [(h.passage.doc, h.passage.page) for h in only_b] == [("B_2021_10K", 0)]
    changed = build_passage_index([docs[0], Document("B_2021_10K", "b2", ("Other text.",))], cache=tmp_path)
    assert changed.key != first.key  # another digest: another index
