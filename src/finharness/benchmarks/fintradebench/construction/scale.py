"""Phase 3: the seed questions rewritten across NASDAQ-100 tickers and dates, to a requested size.

All rewriting and answerability checks are scaling.py's (`scale_questions`): a variant swaps the company
and the date phrase of a seed question (seeded), and is kept only where the data answers its category at
its as-of date. This module only chooses the ticker pool:
- `tickers` given: variants of single-company seeds draw their company from these tickers;
- `new_tickers=K`: K tickers drawn (seeded) among those with both filings and prices -- so fundamentals,
  trading and hybrid variants are all possible -- that none of the seed questions names; fewer when
  fewer exist (said in the report).
Universe seeds (mostly trading questions: 'which NASDAQ stocks ...') change their date only. The output
is a question CSV in the seed file's layout plus `ticker`, `as_of`, `source_id`, `category`
(scaling.write_variants), which questions.read_questions reads back.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..ideal import MarketData
from ..questions import Question
from ..scaling import ScaleReport, Variant, scale_questions, write_variants

SCALED_FILE = "scaled_questions.csv"
"""The scaled question CSV in a build directory."""


def new_tickers(market: MarketData, seeds: Sequence[Question], count: int, seed: int = 0) -> tuple[str, ...]:
    """`count` tickers with filings and prices that no seed question names (seeded draw, sorted)."""
    named = {t for q in seeds for t in q.tickers.tickers}
    pool = sorted(t for t in market.tickers_with_prices() if t not in named and market.has_filings(t))
    return tuple(sorted(random.Random(seed).sample(pool, min(count, len(pool)))))


@dataclass(frozen=True)
class ScaleResult:
    """What phase 3 wrote."""

    variants: tuple[Variant, ...]
    report: ScaleReport
    tickers: tuple[str, ...] | None
    """The ticker pool (None: every ticker the data answers for)."""
    requested: int
    path: Path
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"written": self.report.written, "requested": self.requested, "attempts": self.report.attempts,
                "tickers": list(self.tickers) if self.tickers is not None else None, "out": str(self.path),
                "skipped_seeds": dict(self.report.skipped_seeds), "rejected": dict(self.report.rejected),
                "notes": list(self.notes)}


def scale_seeds(seeds: Sequence[Question], data_dir: str | Path, size: int, out_path: Path, *, seed: int = 0,
                tickers: Sequence[str] | None = None, new_ticker_count: int | None = None) -> ScaleResult:
    """Write up to `size` variants of `seeds` to `out_path` (module docstring)."""
    if size < 0:
        raise ValueError("the scaled size must be 0 or more")
    notes = []
    pool: tuple[str, ...] | None = tuple(t.strip().upper() for t in tickers if t.strip()) if tickers else None
    if pool is not None:
        known = set(MarketData(data_dir).tickers_with_prices())
        unknown = sorted(set(pool) - known)
        if unknown:
            raise ValueError(f"ticker(s) {', '.join(unknown)} have no price file under {data_dir} "
                             f"(known: {', '.join(sorted(known)[:12])}, ...)")
    if pool is None and new_ticker_count is not None:
        pool = new_tickers(MarketData(data_dir), seeds, new_ticker_count, seed)
        if len(pool) < new_ticker_count:
            notes.append(f"only {len(pool)} ticker(s) with filings and prices are named by no seed question "
                         f"({', '.join(pool) or 'none'}); {new_ticker_count} were asked for")
    variants, report = scale_questions(seeds, data_dir, size, seed, tickers=pool) if size else ([], ScaleReport())
    if report.written < size:
        notes.append(f"{report.written} of {size} variants could be made (rejected draws: {dict(report.rejected)}; "
                     f"seeds not scaled: {dict(report.skipped_seeds)})")
    write_variants(variants, out_path)
    return ScaleResult(tuple(variants), report, pool, size, out_path, tuple(notes))
