"""Texts cut to the same length for validation: running prose from a filing section, in windows of one token
count under the model's own tokenizer, so that length cannot tell the two sides apart.

A PDF's extracted text breaks lines where the page did and puts each table cell on a line of its own; an inline
XBRL filing's text has a paragraph a line and a table row a line with ' | ' between cells. `prose` keeps, from
either, the lines that read as sentences (PROSE_MIN_CHARS characters or more, no ' | ', few digits) and joins
them with single spaces, so both sides reach the model in the same shape.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

PROSE_MIN_CHARS = 60
"""A line shorter than this is a heading, a table cell or a page furniture line, not prose."""

PROSE_MAX_DIGIT_SHARE = 0.15
"""A line whose characters are more than this share digits is a table row."""

_YEAR = re.compile(r"\b(?:19[5-9]\d|20[0-4]\d)\b")
_SPACES = re.compile(r"\s+")

WINDOW_CHARS_PER_TOKEN = 12
"""Characters of text looked at per token a window needs (English runs about 4-5 a token)."""

Count = Callable[[str], int | None]
"""A model's token count of a text (ModelHandle.count_tokens)."""


def prose(text: str) -> str:
    """The sentence-like lines of `text`, joined by single spaces (module docstring)."""
    kept = []
    for line in text.splitlines():
        line = _SPACES.sub(" ", line).strip()
        if len(line) < PROSE_MIN_CHARS or "|" in line:
            continue
        if sum(c.isdigit() for c in line) > PROSE_MAX_DIGIT_SHARE * len(line):
            continue
        kept.append(line)
    return " ".join(kept)


def mentions_year(text: str) -> bool:
    """The text names a year (1950-2049): a date cue that can tell an old filing from a new one without any
    model."""
    return _YEAR.search(text) is not None


def latest_year(text: str) -> int | None:
    """The latest year the text names, or None."""
    years = [int(y) for y in _YEAR.findall(text)]
    return max(years) if years else None


def cut_to_tokens(text: str, tokens: int, count: Count) -> tuple[str, int]:
    """The longest prefix of `text` ending at a word boundary with at most `tokens` tokens, and its count."""
    total = count(text) or 0
    if total <= tokens:
        return text, total
    ends = [m.end() for m in re.finditer(r"\S+", text)]
    low, high = 0, len(ends)  # ends[:low] fit, ends[:high + 1] do not
    while high - low > 1:
        mid = (low + high) // 2
        if (count(text[:ends[mid - 1]]) or 0) <= tokens:
            low = mid
        else:
            high = mid
    if low == 0:
        return "", 0
    piece = text[:ends[low - 1]]
    return piece, count(piece) or 0


def windows(text: str, tokens: int, count: Count, limit: int | None = None, slack: int = 2) -> list[str]:
    """Consecutive windows of `tokens` tokens (down to `tokens − slack`) from `text`, each starting at a word;
    with `limit`, that many spread evenly over the text (first and last included)."""
    out: list[str] = []
    rest = text.strip()
    while rest:
        # a token is rarely more than WINDOW_CHARS_PER_TOKEN characters: only so much of the rest is tokenized
        head = rest[:tokens * WINDOW_CHARS_PER_TOKEN]
        piece, n = cut_to_tokens(head, tokens, count)
        if not piece or n < tokens - slack:
            break
        out.append(piece)
        rest = rest[len(piece):].strip()
    if limit is not None and len(out) > limit:
        if limit <= 1:
            return out[:limit]
        step = (len(out) - 1) / (limit - 1)
        out = [out[round(i * step)] for i in range(limit)]
    return out


def balanced(groups: Sequence[Sequence[str]], total: int) -> list[tuple[int, str]]:
    """About `total` windows drawn round-robin from the groups (one group per filing), so no filing dominates a
    side: (group index, window) in drawing order."""
    out: list[tuple[int, str]] = []
    depth = 0
    while len(out) < total and any(depth < len(g) for g in groups):
        for i, group in enumerate(groups):
            if depth < len(group) and len(out) < total:
                out.append((i, group[depth]))
        depth += 1
    return out
