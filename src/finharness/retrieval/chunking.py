"""Parent sections and ~300-token child chunks of a filing, each labelled with the filing it came from.

Tokens here are an approximation, the same everywhere in retrieval (chunk sizes, the context budget):
a token is a run of word characters or a single other non-space character (``\\w+|[^\\w\\s]``), so
``$391,035`` is 4 tokens and ``Management's`` 3. It needs no model and is deterministic, but it
undercounts real tokenizers: on a sample of FinTradeBench child chunks (bench/retrieval_bench.py) MiniLM's
WordPiece gives 1.12 and Qwen2.5's BPE 1.20 tokens per approximate token (BPE splits numbers digit by
digit). Budgets stated in approximate tokens are therefore about 20% larger in a Qwen prompt.

A *parent* is an Item/Part section of a filing; a section longer than ``parent_tokens`` is cut into
consecutive parts (``Item 7. … (part 2/5)``) so that a returned parent fits a prompt. *Children* are
consecutive runs of whole lines of a parent, at most ``child_tokens`` long (a longer line is split at
token boundaries); they tile their parent exactly. Children are what the retrievers score; the parent
is what retrieval returns.

Every child and parent carries a metadata header, ``[AAPL 10-K period 2024-09-28 filed 2024-11-01]``,
followed by the section title, so a query that names the firm, the form or the period matches it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from finharness.markets.filings import Filing

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
"""What counts as one token (see the module docstring)."""


def count_tokens(text: str) -> int:
    """Approximate token count of ``text``."""
    return sum(1 for _ in TOKEN_PATTERN.finditer(text))


def truncate_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` holding at most ``limit`` tokens (no trailing partial token)."""
    if limit <= 0:
        return ""
    for index, match in enumerate(TOKEN_PATTERN.finditer(text)):
        if index == limit - 1:
            return text[: match.end()]
    return text


@dataclass(frozen=True)
class ChunkingParams:
    """How filings are cut; part of every index cache key."""

    child_tokens: int = 300
    """Upper bound on a child chunk's body, in approximate tokens (the header is extra)."""

    parent_tokens: int = 1200
    """Sections longer than this are split into ``ceil(tokens / parent_tokens)`` parts of about equal size
    (a part can pass it by less than one child, since parts end at child boundaries)."""

    def __post_init__(self) -> None:
        if self.child_tokens < 20 or self.parent_tokens < self.child_tokens:
            raise ValueError(f"need 20 <= child_tokens <= parent_tokens, got {self.child_tokens}, "
                             f"{self.parent_tokens}")


@dataclass(frozen=True)
class FilingMeta:
    """What every chunk of one filing is labelled with."""

    ticker: str
    """Upper-case ticker."""

    form: str
    """10-K or 10-Q."""

    filed: str
    """Filing date, ISO ``YYYY-MM-DD``: the date the point-in-time filter compares."""

    period_end: str | None
    """End of the period the filing reports on, ISO; None when the document does not say."""

    accession: str
    """EDGAR accession number."""

    source: str
    """``<TICKER folder>/<file name>``, relative to the SEC_Filings folder."""

    @property
    def header(self) -> str:
        period = f" period {self.period_end}" if self.period_end else ""
        return f"[{self.ticker} {self.form}{period} filed {self.filed}]"

    @classmethod
    def of(cls, filing: Filing) -> FilingMeta:
        ref = filing.ref
        return cls(ticker=ref.ticker, form=ref.form, filed=ref.filed.isoformat(),
                   period_end=filing.period_end.isoformat() if filing.period_end else None,
                   accession=ref.accession, source=f"{ref.path.parent.name}/{ref.path.name}")


@dataclass(frozen=True)
class Child:
    """A ~``child_tokens`` piece of a parent: the unit the retrievers score."""

    parent_id: str
    """The parent it belongs to."""

    text: str
    """Body text (without the header)."""


@dataclass(frozen=True)
class Parent:
    """An Item/Part section (or one part of a long one): the unit retrieval returns."""

    id: str
    """``<accession>#<section index>.<part index>``: unique across the corpus."""

    meta: FilingMeta
    """The filing it comes from."""

    title: str
    """Section title, with ``(part i/n)`` when the section was split."""

    children: tuple[Child, ...]
    """Its children in order; their texts joined by newlines are the parent's body."""

    @property
    def label(self) -> str:
        """The header and title that start every chunk of this parent."""
        return f"{self.meta.header} {self.title}"

    def indexed_text(self, child: Child) -> str:
        """What the retrievers see for one child: the label, then the child's body."""
        return f"{self.label}\n{child.text}"


def chunk_filing(filing: Filing, params: ChunkingParams) -> list[Parent]:
    """Parents (with their children) of one filing, in document order."""
    meta = FilingMeta.of(filing)
    parents = []
    for section_index, section in enumerate(filing.sections):
        children = _children(section.text, params.child_tokens)
        if not children:
            continue
        groups = _group(children, params.parent_tokens)
        for part_index, group in enumerate(groups):
            title = section.title if len(groups) == 1 else f"{section.title} (part {part_index + 1}/{len(groups)})"
            parent_id = f"{meta.accession}#{section_index}.{part_index}"
            parents.append(Parent(id=parent_id, meta=meta, title=title,
                                  children=tuple(Child(parent_id=parent_id, text=text) for text, _ in group)))
    return parents


def _children(text: str, limit: int) -> list[tuple[str, int]]:
    """(text, tokens) pieces of whole lines, each at most ``limit`` tokens; long lines are split."""
    pieces: list[tuple[str, int]] = []
    lines: list[str] = []
    size = 0
    for line in text.split("\n"):
        spans = [match.span() for match in TOKEN_PATTERN.finditer(line)]
        if not spans:
            continue
        if size + len(spans) > limit and lines:
            pieces.append(("\n".join(lines), size))
            lines, size = [], 0
        while len(spans) > limit:  # a paragraph longer than a child: cut it at token boundaries
            pieces.append((line[spans[0][0]: spans[limit - 1][1]], limit))
            line, spans = line[spans[limit][0]:], [(start - spans[limit][0], end - spans[limit][0])
                                                  for start, end in spans[limit:]]
        lines.append(line)
        size += len(spans)
    if lines:
        pieces.append(("\n".join(lines), size))
    return pieces


def _group(children: list[tuple[str, int]], limit: int) -> list[list[tuple[str, int]]]:
    """Consecutive children split into ``ceil(total / limit)`` parts of about equal token count."""
    total = sum(tokens for _, tokens in children)
    parts = max(1, math.ceil(total / limit))
    target = total / parts
    groups: list[list[tuple[str, int]]] = [[]]
    filled = 0
    for child in children:
        # Start a new part once this one has reached its share (never more parts than planned).
        if groups[-1] and filled >= target * len(groups) and len(groups) < parts:
            groups.append([])
        groups[-1].append(child)
        filled += child[1]
    return groups
