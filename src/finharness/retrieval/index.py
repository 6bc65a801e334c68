"""The filing index: parents and child chunks of a set of filings, a BM25 index and dense vectors.

An index covers exactly the filings it is built from. Point-in-time retrieval builds one over the
filings filed on or before the as-of date only, so nothing later can be scored, and even BM25's corpus
statistics (IDF, mean length) come from documents that existed then. A ticker has one such set per
filing date, so a handful of indexes serve every as-of date.

Caching, all under ``<cache>/retrieval`` (``$FINHARNESS_CACHE`` or ~/.cache/finharness):

- ``index/<key>/``: the parents (JSON) and the bm25s index files. ``key`` is a sha256 over the
  sorted (ticker, form, filing date, accession, **file sha256**) of every filing, the chunking and
  BM25 parameters, the parser and index versions and the bm25s version: editing any file, or any
  parameter, gives a new key and a fresh build.
- ``dense/<encoder>/<filing sha256>-<chunking>.npy``: the embeddings of one filing's children, so
  each filing is embedded once whatever set it is indexed in. The encoder's name says its model file
  and how many word pieces it reads; ``<chunking>`` hashes the chunking parameters and the version of
  what the encoder sees of a child (:func:`dense_text`). Within one build a text already embedded (a
  section repeated unchanged in a later filing) is not embedded again.

The parsed HTML itself is cached by :mod:`finharness.markets.filings`.

Work is lazy and per filing: a build parses, chunks and embeds only the filings of its set, one after
the other, as one progress phase (util.phase) that counts them; a filing already parsed or embedded
costs a file read. So the first RAG question of a run pays for its own tickers' filings filed by its
as-of date, nothing else, and later questions and later runs reuse what is cached.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from finharness.data.errors import DataError
from finharness.data.registry import sha256_file
from finharness.markets.filings import PARSER_VERSION, FilingRef, load_filing
from finharness.util import phase

from .bm25 import BM25Index, BM25Params, library_version
from .chunking import Child, ChunkingParams, FilingMeta, Parent, chunk_filing
from .dense import Encoder
from .fuse import FusionMethod, fuse

INDEX_VERSION = 1
"""Bumped whenever the stored layout or the chunk text changes."""

DENSE_TEXT_VERSION = 2
"""Bumped whenever what the dense encoder sees of a child changes (2: the section title and body, see dense_text)."""


@dataclass(frozen=True)
class IndexParams:
    """Everything that changes what an index holds; all of it is in the cache key."""

    chunking: ChunkingParams = field(default_factory=ChunkingParams)
    """How filings are cut into parents and children."""

    bm25: BM25Params = field(default_factory=BM25Params)
    """BM25 settings."""


@dataclass(frozen=True)
class Hit:
    """One parent as ranked for a query: its best child and the fused score."""

    parent: Parent
    """The parent section (part) to return."""

    best_child: int
    """Index of its best-scoring child within ``parent.children``."""

    score: float
    """Fused score of that child."""


class FilingIndex:
    """Parents, their children in one flat order, a BM25 index over the children, optional dense vectors."""

    def __init__(self, key: str, parents: Sequence[Parent], bm25: BM25Index, from_cache: bool):
        self.key = key
        """Content hash this index is stored under."""
        self.parents = tuple(parents)
        self.bm25 = bm25
        self.from_cache = from_cache
        """True when it was loaded, not built."""
        self.children: list[tuple[int, int]] = [(p, c) for p, parent in enumerate(self.parents)
                                                for c in range(len(parent.children))]
        """(parent index, child index) of every child, in index order."""
        self.dense: np.ndarray | None = None
        """(children, dim) unit vectors, aligned with ``children``; None when dense is off or unavailable."""
        self.encoder_name: str | None = None

    @property
    def latest_filed(self) -> str | None:
        """The latest filing date in the index (ISO), None for an empty index."""
        return max((parent.meta.filed for parent in self.parents), default=None)

    def child_text(self, position: int) -> str:
        parent_index, child_index = self.children[position]
        parent = self.parents[parent_index]
        return parent.indexed_text(parent.children[child_index])

    def rank(self, query: str, encoder: Encoder | None = None, fusion: FusionMethod = "rrf",
             depth: int = 200) -> list[Hit]:
        """Parents ranked by their best child's fused BM25 (+ dense) score, best first; unmatched ones left out."""
        if not self.children:
            return []
        rankings = [self.bm25.scores(query)]
        if self.dense is not None and encoder is not None:
            rankings.append(self.dense @ encoder.encode([query])[0])
        fused = fuse(rankings, method=fusion, depth=depth)
        best: dict[int, tuple[float, int]] = {}
        for position in np.flatnonzero(fused > 0):
            parent_index, child_index = self.children[position]
            score = float(fused[position])
            if parent_index not in best or score > best[parent_index][0]:
                best[parent_index] = (score, child_index)
        ordered = sorted(best.items(), key=lambda item: (-item[1][0], item[0]))
        return [Hit(parent=self.parents[p], best_child=c, score=s) for p, (s, c) in ordered]


def index_key(refs_with_hashes: Sequence[tuple[FilingRef, str]], params: IndexParams) -> str:
    filings = [[ref.ticker, ref.form, ref.filed.isoformat(), ref.accession, digest]
               for ref, digest in refs_with_hashes]
    return _hash({"index_version": INDEX_VERSION, "parser_version": PARSER_VERSION,
                  "bm25s": library_version(), "params": asdict(params), "filings": filings})


def build_index(refs: Sequence[FilingRef], params: IndexParams = IndexParams(), *, cache: Path | None = None,
                encoder: Encoder | None = None, progress: bool = False) -> FilingIndex:
    """The index over exactly ``refs``: loaded from the cache when its content hash is there, else built and stored.

    ``cache`` is the finharness cache folder (default: ``cache_dir()``); parsed filings go to its
    ``filings/``, indexes and embeddings to its ``retrieval/``. With an ``encoder``, dense vectors
    are attached (cached per filing, see the module docstring). Work is done filing by filing, as one
    phase (util.phase) counting the filings that needed any; when everything is cached, nothing is announced.
    ``progress``: also print a line per filing embedded (the `retrieve` command).
    """
    if cache is None:
        from finharness.data.registry import cache_dir

        cache = cache_dir()
    cache_root = cache / "retrieval"
    ordered = sorted(refs, key=lambda ref: (ref.ticker, ref.filed, ref.accession))
    hashed = [(ref, sha256_file(ref.path)) for ref in ordered]
    key = index_key(hashed, params)
    folder = cache_root / "index" / key
    index = _load(folder, key, params)
    store = DenseStore(cache_root, encoder, params) if encoder is not None else None
    parents: dict[str, list[Parent]] = {}  # accession -> its parents, in document order
    for parent in index.parents if index is not None else ():
        parents.setdefault(parent.meta.accession, []).append(parent)
    vectors = {} if store is None or index is None else {
        digest: store.load(digest, _dense_texts(parents.get(ref.accession, []))) for ref, digest in hashed}
    todo = [(ref, digest) for ref, digest in hashed if index is None or (store is not None and vectors[digest] is None)]
    if todo:
        tickers = ", ".join(sorted({ref.ticker for ref in ordered}))
        latest = max(ref.filed for ref in ordered).isoformat()
        work = "chunking and embedding" if store is not None else "chunking"
        with phase(f"retrieval: {work} {len(todo)} of the {len(ordered)} filings of {tickers} filed by {latest} "
                   "(once per filing; cached after)", total=len(todo)) as shown:
            for ref, digest in todo:
                if index is None:
                    parents[ref.accession] = chunk_filing(load_filing(ref, cache=cache / "filings"), params.chunking)
                if store is not None:
                    texts = _dense_texts(parents.get(ref.accession, []))
                    found = store.load(digest, texts)
                    if found is None and progress:
                        print(f"dense: embedding {ref.ticker} {ref.form} filed {ref.filed} ({len(texts)} chunks)",
                              file=sys.stderr)
                    vectors[digest] = found if found is not None else store.compute(digest, texts)
                shown.advance()
    if index is None:
        flat = [parent for ref in ordered for parent in parents[ref.accession]]
        texts = [parent.indexed_text(child) for parent in flat for child in parent.children]
        if not texts:
            raise DataError("no text to index in these filings",
                            path=ordered[0].path.parent if ordered else None,
                            hint="check that the .htm files are EDGAR filings")
        index = FilingIndex(key, flat, BM25Index.build(texts, params.bm25), from_cache=False)
        _store(folder, index)
    if store is not None:
        blocks = [vectors[digest] for _, digest in hashed]
        index.dense = np.vstack(blocks) if blocks else np.zeros((0, store.dim), dtype=np.float32)
        index.encoder_name = store.encoder.name
    return index


def dense_text(parent: Parent, child: Child) -> str:
    """What the dense encoder sees for one child: the section title and the body. The filing header that BM25
    also indexes is left out: within one ticker's index it says nothing about meaning, it would take about a
    fifth of the encoder's word pieces, and without it a section repeated unchanged in the next filing has the
    same text, so it is embedded once."""
    return f"{parent.title}\n{child.text}"


def _dense_texts(parents: Sequence[Parent]) -> list[str]:
    return [dense_text(parent, child) for parent in parents for child in parent.children]


class DenseStore:
    """Each filing's child embeddings, cached in ``dense/<encoder>/<filing sha256>-<chunking>.npy``; within one
    store, a text already embedded (a section repeated unchanged in a later filing) is not embedded again."""

    def __init__(self, cache_root: Path, encoder: Encoder, params: IndexParams):
        self.encoder = encoder
        self.dim = 384
        self.folder = cache_root / "dense" / _slug(encoder.name)
        self.chunking = _hash(asdict(params.chunking), INDEX_VERSION, DENSE_TEXT_VERSION)[:16]
        self._known: dict[str, np.ndarray] = {}
        """sha256 of a dense text -> its vector, for every text loaded or computed here."""

    def _path(self, digest: str) -> Path:
        return self.folder / f"{digest}-{self.chunking}.npy"

    def load(self, digest: str, texts: Sequence[str]) -> np.ndarray | None:
        """The filing's cached vectors (one row per text), or None when absent or stale."""
        vectors = _load_npy(self._path(digest), len(texts))
        if vectors is not None:
            self.dim = vectors.shape[1] if vectors.size else self.dim
            self._known.update(zip(map(_text_key, texts), vectors))
        return vectors

    def compute(self, digest: str, texts: Sequence[str]) -> np.ndarray:
        """Embed the texts not seen before (each distinct text once), store the filing's vectors, return them."""
        keys = [_text_key(text) for text in texts]
        new = list(dict.fromkeys(k for k in keys if k not in self._known))
        if new:
            text_of = dict(zip(keys, texts))
            self._known.update(zip(new, self.encoder.encode([text_of[k] for k in new])))
        vectors = (np.stack([self._known[k] for k in keys]).astype(np.float32) if keys
                   else np.zeros((0, self.dim), dtype=np.float32))
        _save_npy(self._path(digest), vectors)
        return vectors


def publish_folder(folder: Path, write: Callable[[Path], None]) -> None:
    """Make `folder` by `write(staging)` into a temporary folder beside it, then a rename: a crash or a concurrent
    build never leaves half of it (another process that published the same content-keyed folder first wins)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        write(staging)
        try:
            staging.rename(folder)
        except OSError:  # another process stored the same key first: theirs is identical
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _store(folder: Path, index: FilingIndex) -> None:
    def write(staging: Path) -> None:
        index.bm25.save(staging / "bm25")
        parents = [{"id": p.id, "meta": asdict(p.meta), "title": p.title, "children": [c.text for c in p.children]}
                   for p in index.parents]
        (staging / "parents.json").write_text(json.dumps(parents), encoding="utf-8")

    publish_folder(folder, write)


def _load(folder: Path, key: str, params: IndexParams) -> FilingIndex | None:
    try:
        stored = json.loads((folder / "parents.json").read_text(encoding="utf-8"))
        parents = [Parent(id=item["id"], meta=FilingMeta(**item["meta"]), title=item["title"],
                          children=tuple(Child(parent_id=item["id"], text=text) for text in item["children"]))
                   for item in stored]
        return FilingIndex(key, parents, BM25Index.load(folder / "bm25", params.bm25), from_cache=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent or damaged: rebuild


def _load_npy(path: Path, rows: int) -> np.ndarray | None:
    try:
        vectors = np.load(path)
    except (OSError, ValueError):
        return None
    return vectors if vectors.shape[0] == rows else None


def _save_npy(path: Path, vectors: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npy", delete=False) as handle:
        np.save(handle, vectors)
    Path(handle.name).replace(path)


def _hash(value: object, *more: object) -> str:
    return hashlib.sha256(json.dumps([value, *more], sort_keys=True, default=str).encode()).hexdigest()


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in name)


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
