"""Golden indicators: the 25 spellings of the seed file, their 20 canonical names, and F1 two ways.

The seed file writes one indicator several ways ('ROA' and 'Return on Assets', 'Medium Term
Momentum' and 'Medium-term momentum', ...): 25 distinct strings, 20 indicators. `canonical()` maps
every spelling (case, hyphens and spaces ignored) to one name; an unknown one raises, so a new
spelling in a scaled question file is never silently dropped from the golden set.

F1 (golden-indicator coverage):
- `official`: as evaluate_rag_pipeline.py of the FinTradeBench release computes it from the judge's
  own counts -- recall = indicators_found_count / total_golden_indicators (a total of 0 counts as 1),
  precision = 1 if found > 0 else 0, F1 = 2PR / (P + R). Precision is a constant, so the number
  rewards any single hit; it is kept for comparison with the paper.
- `proper` (ours): the indicators the *answer* names (matched by `SYNONYMS` below, canonicalised),
  against the golden set: precision = |named ∩ golden| / |named|, recall = |named ∩ golden| /
  |golden|; an answer naming none has F1 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

FUNDAMENTAL_INDICATORS: tuple[str, ...] = (
    "Cash Flow/Assets", "Book/Price", "Earnings/Price", "Sales/Assets", "Debt/Assets", "Debt/Equity",
    "Dividend Yield", "Return on Assets", "Return on Equity")
"""Canonical fundamental indicators (the official F_* ratio names; Forecast Earnings/Price is never golden)."""

TRADING_INDICATORS: tuple[str, ...] = (
    "MA", "EMA", "MACD", "RSI", "OBV", "One Day Reversal", "Max Return", "Volatility",
    "Short Term Momentum", "Medium Term Momentum", "Long Term Mean Reversal")
"""Canonical trading-signal indicators."""

CANONICAL: tuple[str, ...] = FUNDAMENTAL_INDICATORS + TRADING_INDICATORS
"""All 20 canonical indicator names."""

_SEED_SPELLINGS: Mapping[str, str] = {
    "ROA": "Return on Assets",
    "ROE": "Return on Equity",
    "Long-term Mean Reversal": "Long Term Mean Reversal",
    "Medium-term momentum": "Medium Term Momentum",
    "Short-term momentum": "Short Term Momentum",
}
"""Seed-file spellings that are not canonical names themselves (the other 20 are)."""


def _key(name: str) -> str:
    return re.sub(r"[\s\-_]+", " ", name.strip().lower())


_LOOKUP: dict[str, str] = {_key(name): name for name in CANONICAL}
_LOOKUP.update({_key(spelling): name for spelling, name in _SEED_SPELLINGS.items()})


def canonical(name: str) -> str:
    """The canonical indicator for one spelling; ValueError names the known ones for anything else."""
    found = _LOOKUP.get(_key(name))
    if found is None:
        raise ValueError(f"unknown golden indicator {name!r}; known: {', '.join(CANONICAL)} "
                         f"(and the spellings {', '.join(_SEED_SPELLINGS)})")
    return found


def split_indicators(field: str) -> tuple[str, ...]:
    """A golden_indicators cell ('ROA|ROE|Earnings/Price') -> canonical names, in order, without repeats."""
    out: list[str] = []
    for part in field.split("|"):
        if part.strip():
            name = canonical(part)
            if name not in out:
                out.append(name)
    return tuple(out)


SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "Cash Flow/Assets": (r"cash[\s-]*flow\s*(?:/|to|-to-|over)\s*(?:total\s+)?assets", r"cfo\s*/\s*assets",
                         r"operating\s+cash\s+flow\s*(?:/|to|relative to)\s*(?:total\s+)?assets"),
    "Book/Price": (r"book\s*(?:/|to|-to-)\s*price", r"price\s*(?:/|to|-to-)\s*book", r"\bp\s*/\s*b\b",
                   r"\bb\s*/\s*p\b"),
    "Earnings/Price": (r"earnings\s*(?:/|to|-to-)\s*price", r"price\s*(?:/|to|-to-)\s*earnings", r"\bp\s*/\s*e\b",
                       r"\be\s*/\s*p\b", r"earnings\s+yield", r"\bpe\s+ratio"),
    "Sales/Assets": (r"sales\s*(?:/|to|-to-)\s*(?:total\s+)?assets", r"asset\s+turnover",
                     r"revenue\s*(?:/|to|-to-)\s*(?:total\s+)?assets"),
    "Debt/Assets": (r"debt\s*(?:/|to|-to-)\s*(?:total\s+)?assets",),
    "Debt/Equity": (r"debt\s*(?:/|to|-to-)\s*equity", r"\bd\s*/\s*e\b"),
    "Dividend Yield": (r"dividend\s+yield",),
    "Return on Assets": (r"\broa\b", r"return\s+on\s+(?:total\s+)?assets"),
    "Return on Equity": (r"\broe\b", r"return\s+on\s+(?:shareholders'?\s+|stockholders'?\s+)?equity"),
    "MA": (r"\bma[\s_-]?\d*\b", r"\bsma\b", r"(?<!exponential )(?<!exponential-)\bmoving\s+average"),
    "EMA": (r"\bema[\s_-]?\d*\b", r"exponential\s+moving\s+average"),
    "MACD": (r"\bmacd\b",),
    "RSI": (r"\brsi\b", r"relative\s+strength\s+index"),
    "OBV": (r"\bobv\b", r"on[\s-]balance\s+volume"),
    "One Day Reversal": (r"one[\s-]day\s+(?:reversal|return)", r"1[\s-]day\s+(?:reversal|return)"),
    "Max Return": (r"max(?:imum)?\s+(?:daily\s+|1[\s-]day\s+|one[\s-]day\s+)?return",),
    "Volatility": (r"volatility",),
    "Short Term Momentum": (r"short[\s-]term\s+momentum", r"(?:5|20)[\s-]day\s+momentum", r"momentum[\s_]?(?:5|20)d",
                            r"short[\s-]term\s+reversal"),
    "Medium Term Momentum": (r"medium[\s-]term\s+momentum", r"2[\s-]?(?:month)?\s*(?:to|-)\s*12[\s-]month\s+momentum",
                             r"12[\s-]month\s+momentum"),
    "Long Term Mean Reversal": (r"long[\s-]term\s+(?:mean\s+)?revers(?:al|ion)", r"mean[\s-]revers(?:al|ion)"),
}
"""How an answer names each indicator (case-insensitive regular expressions); used by `proper` F1 only."""

_SYNONYM_PATTERNS = {name: re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)
                     for name, patterns in SYNONYMS.items()}


def named_indicators(text: str) -> tuple[str, ...]:
    """Canonical indicators an answer names, in canonical order."""
    return tuple(name for name in CANONICAL if _SYNONYM_PATTERNS[name].search(text or ""))


@dataclass(frozen=True)
class F1:
    """Precision, recall and their harmonic mean."""

    precision: float
    recall: float

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 0.0 if total == 0 else 2 * self.precision * self.recall / total


def f1_official(found_count: int, total_golden: int) -> F1:
    """The release's rule (evaluate_rag_pipeline.py process_batch): precision 1 if anything was found."""
    total = total_golden or 1
    return F1(precision=1.0 if found_count > 0 else 0.0, recall=found_count / total)


def f1_proper(named: Iterable[str], golden: Iterable[str]) -> F1:
    """Set F1 of the canonical indicators an answer names against the golden set."""
    named_set, golden_set = set(named), set(golden)
    hits = len(named_set & golden_set)
    return F1(precision=hits / len(named_set) if named_set else 0.0,
              recall=hits / len(golden_set) if golden_set else 0.0)
