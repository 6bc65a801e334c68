"""Retrieval over the pages of whole documents (PDF filings): chunks of each page, BM25 and dense, fused.

The filing index of :mod:`.index` knows EDGAR's Item sections and the point-in-time rules of FinTradeBench;
this one knows only documents made of pages, so any set of PDFs can be searched (FinanceBench's vector stores,
an agent's search tool). A document is split page by page, as LangChain's `split_documents` splits one
document per page, with the recursive character splitter's rule (:func:`split_text`): cut at the coarsest of
blank line, line break, space or character that leaves pieces under `chunk_chars`, merge pieces back up to it,
and carry up to `overlap_chars` of each chunk into the next. Each chunk keeps its document and 0-based page.

Scores are BM25 (:mod:`.bm25`) and, with an encoder, cosine similarity of MiniLM vectors (:mod:`.dense`),
fused by reciprocal rank (:mod:`.fuse`). Work is cached under `<cache>/retrieval/passages/`: the BM25 index
by a hash of the documents' sha256s and every parameter, each document's vectors by its sha256, the split
and the encoder, so a store over many documents embeds each document once, whichever stores it is in.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from finharness.util import phase

from .bm25 import BM25Index, BM25Params, library_version
from .dense import Encoder
from .fuse import fuse
from .index import publish_folder

PASSAGES_VERSION = 1
"""Bumped when the stored layout or the chunk text changes."""

SEPARATORS = ("\n\n", "\n", " ", "")
"""The recursive splitter's separators, coarsest first ('' = between any two characters)."""


@dataclass(frozen=True)
class SplitParams:
    """How pages are cut into chunks; in every cache key."""

    chunk_chars: int = 1024
    """Most characters a chunk holds (FinanceBench's vector stores: 1,024)."""

    overlap_chars: int = 30
    """Characters of a chunk carried into the next one (FinanceBench's: 30)."""

    def __post_init__(self) -> None:
        if not 0 <= self.overlap_chars < self.chunk_chars:
            raise ValueError(f"need 0 <= overlap_chars < chunk_chars, got {self.overlap_chars}, {self.chunk_chars}")


@dataclass(frozen=True)
class Passage:
    """One chunk of one page."""

    doc: str
    """The document's name."""

    page: int
    """Its page, 0-based."""

    text: str
    """The chunk's text."""


@dataclass(frozen=True)
class Document:
    """What an index is built from: a named document, its pages, and a digest that changes when they do."""

    name: str
    digest: str
    """sha256 of the source file (or of the pages): the cache key of its chunks' vectors."""
    pages: Sequence[str] = field(repr=False)


def _split_on(text: str, separator: str) -> list[str]:
    """Pieces of `text` with each separator kept at the start of the piece after it (as LangChain keeps it)."""
    if separator == "":
        return list(text)
    parts = text.split(separator)
    return [piece for piece in (parts[0], *(separator + part for part in parts[1:])) if piece]


def _merge(pieces: Sequence[str], params: SplitParams) -> list[str]:
    """Consecutive pieces merged into chunks of at most chunk_chars, each starting with up to overlap_chars
    of the end of the one before."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        if current and size + len(piece) > params.chunk_chars:
            chunk = "".join(current).strip()
            if chunk:
                chunks.append(chunk)
            while current and (size > params.overlap_chars or size + len(piece) > params.chunk_chars):
                size -= len(current.pop(0))
        current.append(piece)
        size += len(piece)
    chunk = "".join(current).strip()
    if chunk:
        chunks.append(chunk)
    return chunks


def split_text(text: str, params: SplitParams = SplitParams(), separators: Sequence[str] = SEPARATORS) -> list[str]:
    """`text` cut into chunks of at most `chunk_chars` characters by the recursive character rule (module
    docstring); a piece no separator can cut below the limit is kept whole only at the last separator ('')."""
    separator, finer = separators[-1], ()
    for i, candidate in enumerate(separators):
        if candidate == "" or candidate in text:
            separator, finer = candidate, tuple(separators[i + 1:])
            break
    chunks: list[str] = []
    small: list[str] = []
    for piece in _split_on(text, separator):
        if len(piece) < params.chunk_chars:
            small.append(piece)
            continue
        if small:
            chunks += _merge(small, params)
            small = []
        chunks += split_text(piece, params, finer) if finer else [piece.strip()] if piece.strip() else []
    if small:
        chunks += _merge(small, params)
    return chunks


def document_passages(document: Document, params: SplitParams) -> list[Passage]:
    """Every chunk of every page of `document`, in page order."""
    return [Passage(document.name, page, text) for page, body in enumerate(document.pages)
            for text in split_text(body, params)]


@dataclass(frozen=True)
class Found:
    """A passage as ranked for a query."""

    passage: Passage
    score: float
    """Its fused score (reciprocal-rank; higher is better)."""


class PassageIndex:
    """The chunks of a set of documents with BM25 and optional dense vectors over them."""

    def __init__(self, passages: Sequence[Passage], bm25: BM25Index, dense: np.ndarray | None, key: str):
        self.passages = tuple(passages)
        self.bm25 = bm25
        self.dense = dense
        """(passages, dim) unit vectors aligned with `passages`; None: BM25 only."""
        self.key = key
        """The content hash the BM25 part is cached under."""

    def search(self, query: str, k: int = 4, encoder: Encoder | None = None,
               where: Callable[[Passage], bool] | None = None) -> list[Found]:
        """The `k` best passages for `query` (those `where` accepts), best first; ties keep document order."""
        if not self.passages:
            return []
        rankings = [self.bm25.scores(query)]
        if self.dense is not None and encoder is not None:
            rankings.append(self.dense @ encoder.encode([query])[0])
        fused = fuse(rankings)
        order = np.argsort(-fused, kind="stable")
        found = []
        for position in order:
            if fused[position] <= 0:
                break
            passage = self.passages[position]
            if where is None or where(passage):
                found.append(Found(passage, float(fused[position])))
                if len(found) == k:
                    break
        return found


def _hash(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _vectors_path(cache: Path, encoder: Encoder, digest: str, params: SplitParams) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in encoder.name)
    return cache / "dense" / safe / f"{digest}-{_hash([asdict(params), PASSAGES_VERSION])[:16]}.npy"


def _document_vectors(cache: Path, encoder: Encoder, document: Document, passages: Sequence[Passage],
                      params: SplitParams) -> np.ndarray:
    path = _vectors_path(cache, encoder, document.digest, params)
    try:
        vectors = np.load(path)
        if vectors.shape[0] == len(passages):
            return vectors
    except (OSError, ValueError):
        pass
    vectors = encoder.encode([p.text for p in passages]) if passages else np.zeros((0, 384), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npy", delete=False) as handle:
        np.save(handle, vectors.astype(np.float32))
    Path(handle.name).replace(path)
    return vectors


def build_passage_index(documents: Sequence[Document], params: SplitParams = SplitParams(), *,
                        bm25: BM25Params = BM25Params(), encoder: Encoder | None = None,
                        cache: Path | None = None, label: str = "documents") -> PassageIndex:
    """The index over `documents` (in the order given): BM25 loaded from the cache when its key is there, vectors
    per document from theirs; what is missing is computed as one progress phase counting the documents."""
    if cache is None:
        from finharness.data.registry import cache_dir

        cache = cache_dir()
    root = cache / "retrieval" / "passages"
    key = _hash({"version": PASSAGES_VERSION, "split": asdict(params), "bm25": asdict(bm25),
                 "bm25s": library_version(), "documents": [[d.name, d.digest] for d in documents]})
    per_document = [document_passages(d, params) for d in documents]
    passages = [p for found in per_document for p in found]
    folder = root / "bm25" / key
    index = None
    try:
        index = BM25Index.load(folder, bm25)
    except (OSError, ValueError, KeyError):
        pass
    vectors = None
    if encoder is not None:
        todo = {d.digest for d in documents if not _vectors_path(root, encoder, d.digest, params).is_file()}
        blocks = []
        with phase(f"retrieval: embedding {len(todo)} of {len(documents)} {label} (once per document; cached after)",
                   total=len(todo)) if todo else _nothing() as shown:
            for document, found in zip(documents, per_document):
                fresh = document.digest in todo
                blocks.append(_document_vectors(root, encoder, document, found, params))
                if fresh and shown is not None:
                    shown.advance()
        vectors = np.vstack(blocks) if blocks else None
    if index is None:
        index = BM25Index.build([p.text for p in passages] or [""], bm25)
        publish_folder(folder, index.save)
    return PassageIndex(passages, index, vectors, key)


class _nothing:
    """A stand-in for a progress phase when there is nothing to do."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
