"""Point-in-time retrieval for one ticker and one question: filing sections (track A) and price tables (track B).

1. **Cut-off first.** Candidates are only filings with filing date ≤ as-of (the index is built over
   exactly those, see :mod:`.index`) and price rows dated ≤ as-of (cut before monthly aggregation).
   Every returned item is checked against the as-of date again; a later one is a bug and raises.
2. **Track A (filings):** child chunks scored by BM25 and, when available, dense cosine; the two
   rankings fused (RRF, k = 60, by default); a parent scores as its best child; parents with the same
   body text (a section repeated unchanged in the next 10-Q) are removed as duplicates, the better
   ranked kept; the top ``rerank_depth`` are reordered by the reranker (default :class:`NoRerank`);
   the first ``filing_quota`` are kept.
3. **Track B (prices):** the ``price_tables`` most recent monthly blocks before as-of; not reranked.
4. **Assembly under a token budget** (approximate tokens, :mod:`.chunking`): each item gets an equal
   share, and what small items leave is shared among the rest (water-filling). An item over its
   share is cut around what matched (a filing parent keeps its best child and as many neighbouring
   children as fit; a price table keeps its most recent months); each cut is counted in
   ``truncated``, and an item whose share is too small to be useful is dropped and counted in ``dropped``.

Items come back filings first (in rank order), then price tables (most recent first).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from finharness.markets.filings import discover_filings

from .chunking import count_tokens, truncate_tokens
from .dense import DenseUnavailable, Encoder, default_encoder
from .fuse import RRF_K, FusionMethod
from .index import FilingIndex, Hit, IndexParams, build_index
from .prices_track import history_path, price_tables
from .rerank import NoRerank, Reranker

Track = Literal["filings", "prices"]

MIN_ITEM_TOKENS = 48
"""An item given fewer tokens than this is dropped rather than cut to a stub."""


@dataclass(frozen=True)
class RetrievalConfig:
    """Every knob of retrieval, with its default."""

    filing_quota: int = 3
    """Track A: how many filing parents to return."""

    price_tables: int = 2
    """Track B: how many monthly price tables to return."""

    months_per_table: int = 6
    """Months in one price table."""

    budget_tokens: int = 2000
    """Token budget of all returned texts together (approximate tokens)."""

    fusion: FusionMethod = "rrf"
    """'rrf' (reciprocal rank fusion, k = 60) or 'minmax' (normalised score sum)."""

    fusion_depth: int = 200
    """How many top children of each ranking take part in RRF."""

    rerank_depth: int = 10
    """How many fused parents the reranker reorders (the rest keep their fused order after them)."""

    dense: Literal["auto", "on", "off"] = "auto"
    """'auto': use the dense model when it loads, else BM25 only (recorded); 'on': fail without it."""

    index: IndexParams = field(default_factory=IndexParams)
    """Chunking and BM25 parameters."""


@dataclass(frozen=True)
class RetrievedItem:
    """One returned passage."""

    track: Track
    """'filings' (track A) or 'prices' (track B)."""

    source: str
    """Filing file and section (``AAPL/10-K_….htm#Item 7. …``) or price file and months."""

    date: str
    """ISO date: the filing date, or the last trading day in the price table."""

    score: float
    """Track A: reranker score, else fused score; track B: recency score."""

    text: str
    """The passage, starting with its metadata header."""

    tokens: int
    """Approximate tokens of ``text``."""

    truncated: bool
    """True when the text was cut to fit the budget."""


@dataclass(frozen=True)
class Retrieval:
    """What one retrieval returned, and how."""

    items: tuple[RetrievedItem, ...]
    """Filings first (rank order), then price tables (most recent first)."""

    query: str
    ticker: str
    as_of: str
    """The as-of date (ISO): nothing dated after it is in ``items``."""

    dense: str
    """'on (<model>)', 'off', or 'unavailable (<reason>)' (then track A is BM25 only)."""

    fusion: str
    """The fusion used, e.g. 'rrf(k=60)'."""

    reranker: str
    """Reranker name ('none' for NoRerank)."""

    budget_tokens: int
    tokens_used: int
    truncated: int
    """Items cut to fit the budget."""

    dropped: int
    """Items left out because their share of the budget was too small."""

    duplicates_removed: int
    """Filing parents removed because a better-ranked one had the same text."""

    filings_considered: int
    """Filings on or before as-of that track A searched."""

    index_key: str | None
    """Content hash of the filing index used (None when no filing was eligible)."""

    index_from_cache: bool | None
    """Whether that index was loaded from the cache."""


@dataclass(frozen=True)
class _Candidate:
    """An item before assembly: a header that is always kept and pieces that may be cut."""

    track: Track
    source: str
    date: str
    score: float
    header: str
    pieces: tuple[str, ...]
    focus: int
    """The piece kept first when cutting (best child / most recent month)."""


class Retriever:
    """Retrieval over one data root; indexes and the dense model are loaded once and kept."""

    def __init__(self, data_dir: str | Path, config: RetrievalConfig = RetrievalConfig(), *,
                 cache: Path | None = None, encoder: Encoder | None = None, progress: bool = False):
        self.data_dir = Path(data_dir)
        self.config = config
        self.cache = cache
        self.progress = progress
        self._encoder = encoder
        self._dense_status: str | None = f"on ({encoder.name})" if encoder is not None else None
        self._indexes: dict[tuple[str, ...], FilingIndex] = {}
        self._prices: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def dense_status(self) -> str:
        self._resolve_encoder()
        return self._dense_status or "off"

    def _resolve_encoder(self) -> Encoder | None:
        if self._dense_status is None:
            if self.config.dense == "off":
                self._dense_status = "off"
            else:
                try:
                    self._encoder = default_encoder()
                    self._dense_status = f"on ({self._encoder.name})"
                except DenseUnavailable as err:
                    if self.config.dense == "on":
                        raise
                    self._dense_status = f"unavailable ({err})"
        return self._encoder

    def filing_index(self, ticker: str, as_of: dt.date) -> FilingIndex | None:
        """The index over the ticker's filings filed on or before ``as_of`` (None when there are none)."""
        eligible = [ref for ref in discover_filings(self.data_dir, {ticker}) if ref.filed <= as_of]
        if not eligible:
            return None
        memo_key = tuple(str(ref.path) for ref in eligible)
        if memo_key not in self._indexes:
            self._indexes[memo_key] = build_index(eligible, self.config.index, cache=self.cache,
                                                  encoder=self._resolve_encoder(), progress=self.progress)
        return self._indexes[memo_key]

    def _search(self, query: str, ticker: str,
                as_of: dt.date) -> tuple[FilingIndex | None, list[Hit], list[_Candidate]]:
        """(index, ranked filing parents, price-table candidates), all cut at ``as_of``."""
        config = self.config
        with self._lock:
            index = self.filing_index(ticker, as_of)
            prices = self._price_frame(ticker) if config.price_tables > 0 else None
        hits = [] if index is None or config.filing_quota <= 0 else index.rank(
            query, self._encoder if index.dense is not None else None, config.fusion, config.fusion_depth)
        tables = [] if prices is None else [
            _Candidate(track="prices", source=table.source, date=table.last_date, score=table.score,
                       header=table.header, pieces=table.rows, focus=len(table.rows) - 1)
            for table in price_tables(prices, ticker, as_of, months_per_table=config.months_per_table,
                                      count=config.price_tables, source_name=history_path(self.data_dir, ticker).name)]
        return index, hits, tables

    def _price_frame(self, ticker: str) -> Any:
        """The ticker's whole daily history, loaded once (the as-of cut happens in price_tables)."""
        if ticker not in self._prices:
            from finharness.markets.prices import load_prices

            self._prices[ticker] = load_prices(history_path(self.data_dir, ticker))
        return self._prices[ticker]

    def retrieve(self, query: str, ticker: str, as_of: dt.date | str, reranker: Reranker | None = None) -> Retrieval:
        """Synchronous :meth:`aretrieve` (for the CLI and scripts; inside an event loop use ``aretrieve``)."""
        return asyncio.run(self.aretrieve(query, ticker, as_of, reranker))

    async def aretrieve(self, query: str, ticker: str, as_of: dt.date | str,
                        reranker: Reranker | None = None, budget_tokens: int | None = None) -> Retrieval:
        """budget_tokens: this call's budget instead of the config's (a question spread over tickers)."""
        as_of = as_of if isinstance(as_of, dt.date) else dt.date.fromisoformat(as_of)
        ticker = ticker.upper()
        reranker = reranker or NoRerank()
        config = self.config if budget_tokens is None else replace(self.config, budget_tokens=budget_tokens)

        # Index builds, BM25 and embeddings are blocking work: off the event loop, one build at a time.
        index, hits, tables = await asyncio.to_thread(self._search, query, ticker, as_of)
        hits, duplicates = _remove_duplicates(hits, enough=max(config.filing_quota, config.rerank_depth))
        ranked = await _rerank(query, hits, reranker, config.rerank_depth) if hits else []
        filings = [_Candidate(track="filings", source=f"{hit.parent.meta.source}#{hit.parent.title}",
                              date=hit.parent.meta.filed, score=score, header=hit.parent.label,
                              pieces=tuple(child.text for child in hit.parent.children), focus=hit.best_child)
                   for hit, score in ranked[: config.filing_quota]]
        items, truncated, dropped = assemble([*filings, *tables], config.budget_tokens)
        late = [item for item in items if item.date > as_of.isoformat()]
        if late:  # cannot happen unless the cut-off above is broken: never hand the future to a model
            raise RuntimeError(f"point-in-time violation: {late[0].source} dated {late[0].date} > {as_of}")
        fusion = f"rrf(k={RRF_K})" if config.fusion == "rrf" else config.fusion
        if index is None or index.dense is None:
            fusion = "bm25 only"
        return Retrieval(items=tuple(items), query=query, ticker=ticker, as_of=as_of.isoformat(),
                         dense=self.dense_status, fusion=fusion, reranker=reranker.name,
                         budget_tokens=config.budget_tokens, tokens_used=sum(item.tokens for item in items),
                         truncated=truncated, dropped=dropped, duplicates_removed=duplicates,
                         filings_considered=len({p.meta.accession for p in index.parents}) if index else 0,
                         index_key=index.key if index else None,
                         index_from_cache=index.from_cache if index else None)


def _remove_duplicates(hits: list[Hit], enough: int) -> tuple[list[Hit], int]:
    """Drop parents whose body repeats a better-ranked one's; stop once ``enough`` distinct are found."""
    seen: set[str] = set()
    kept, removed = [], 0
    for hit in hits:
        body = "\n".join(child.text for child in hit.parent.children)
        digest = hashlib.sha256(" ".join(body.split()).lower().encode()).hexdigest()
        if digest in seen:
            removed += 1
            continue
        seen.add(digest)
        kept.append(hit)
        if len(kept) >= enough:
            break
    return kept, removed


async def _rerank(query: str, hits: list[Hit], reranker: Reranker, depth: int) -> list[tuple[Hit, float]]:
    """(hit, score) pairs: the top ``depth`` reordered by the reranker when it scores, the rest after."""
    head, tail = hits[:depth], hits[depth:]
    scores = await reranker.scores(query, [h.parent.indexed_text(h.parent.children[h.best_child]) for h in head])
    if scores is None:
        return [(hit, hit.score) for hit in hits]
    ranked = sorted(zip(head, scores, strict=True), key=lambda pair: -pair[1])  # stable: ties keep the fused order
    return [*ranked, *((hit, hit.score) for hit in tail)]


def assemble(candidates: Sequence[_Candidate], budget: int) -> tuple[list[RetrievedItem], int, int]:
    """(items, truncated count, dropped count) under ``budget`` tokens (see the module docstring)."""
    sizes = [[count_tokens(piece) for piece in c.pieces] for c in candidates]
    needs = [count_tokens(c.header) + sum(s) for c, s in zip(candidates, sizes, strict=True)]
    shares = [0] * len(candidates)
    remaining = budget
    for position, i in enumerate(sorted(range(len(candidates)), key=lambda i: needs[i])):
        shares[i] = min(needs[i], remaining // (len(candidates) - position))
        remaining -= shares[i]
    items, truncated, dropped = [], 0, 0
    for candidate, piece_sizes, need, share in zip(candidates, sizes, needs, shares, strict=True):
        text = _fit(candidate, piece_sizes, share) if share >= min(need, MIN_ITEM_TOKENS) else None
        if text is None:
            dropped += 1
            continue
        cut = share < need
        truncated += cut
        items.append(RetrievedItem(track=candidate.track, source=candidate.source, date=candidate.date,
                                   score=candidate.score, text=text, tokens=count_tokens(text), truncated=cut))
    return items, truncated, dropped


def _fit(candidate: _Candidate, sizes: list[int], limit: int) -> str | None:
    """Header plus the focus piece and its neighbours (after, then before, alternately) within ``limit`` tokens;
    room left over goes to the start of the next piece."""
    room = limit - count_tokens(candidate.header)
    focus = candidate.focus
    if room < min(sizes[focus], MIN_ITEM_TOKENS // 2):
        return None
    if sizes[focus] > room:
        return f"{candidate.header}\n{truncate_tokens(candidate.pieces[focus], room)}"
    low, high, used = focus, focus, sizes[focus]
    grew = True
    while grew:
        grew = False
        for step in (high + 1, low - 1):
            if 0 <= step < len(sizes) and used + sizes[step] <= room:
                low, high, used, grew = min(low, step), max(high, step), used + sizes[step], True
    kept = list(candidate.pieces[low: high + 1])
    if high + 1 < len(sizes) and room - used >= MIN_ITEM_TOKENS // 2:  # spend what is left on the next piece
        kept.append(truncate_tokens(candidate.pieces[high + 1], room - used))
    return "\n".join((candidate.header, *kept))
