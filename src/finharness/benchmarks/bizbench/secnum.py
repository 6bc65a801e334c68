"""SEC-Num: find the number for a label in a snippet of an SEC filing, built from inline XBRL.

BizBench's recipe (arXiv 2311.06602, SEC-Num): the XBRL tags of 10-K/10-Q filings mark numeric
spans and name their concept; a question is the concept's label, the context a snippet of the
filing around the tagged number, the answer the number as the snippet shows it; labels that are
ambiguous in their snippet are dropped; the split is by filing. Followed here on the filings in a
folder of FORM_FILINGDATE_ACCESSION.htm files (one folder per ticker):

- every visible `ix:nonFraction` fact whose display is a number (digits) is a candidate;
  facts shown as a dash (ixt:fixed-zero), as words ('two'), nil or hidden are dropped and counted;
- question = the concept's label (the short human description where `markets.xbrl` has one, else
  the concept name split into words), plus the dimension members for breakdowns
  ('Revenue from contracts with customers — IPhone'), plus a scale note when the filing shows the
  number scaled ('(in millions)', '(in percent)'), in the manner of TAT-QA(E)'s '(million)';
- answer = the number as displayed, with the fact's sign: '93,736' tagged scale=6 gives 93736 with
  '(in millions)' in the question, not 93736000000. The task is span identification, and the
  displayed number is what the snippet contains; the plain-unit value is kept in metadata
  (`value`) so a scale-aware scorer can accept either;
- context = `markets.xbrl.text_around(fact, chars)`: the filing's text within `chars` characters
  either side, whole lines where they fit (table rows read 'Net income | $93,736 | $96,995');
- a label that occurs in the snippet with two different answers (e.g. the same line item for
  three fiscal years in one table, or a number and a '—' for zero) is ambiguous and dropped; the
  same (question, context) twice is kept once;
- the answer's sign is the fact's (XBRL) sign, not the display: an 'unrealized loss' tagged as a
  positive amount and shown as '(1,953)' has the answer 1953;
- split: a filing is 'test' when the first 8 hex digits of sha256(accession) / 2**32 fall below
  `test_fraction` (0.25 by default; the paper's SEC-Num is 2,000 test / 6,845 train), else 'train'.

Deviations from the paper, because the data here differ: the paper sampled filings from EDGAR at
large and its label and snippet wording are not published; here the labels come from the concept
names and a short description table, the snippet is a character window of our own plain-text
rendering, and `max_per_filing` (off by default) can cap the items per filing.
"""

from __future__ import annotations

import bisect
import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ...data.errors import DataError
from ...markets.xbrl import Fact, Filing, concept_label, member_label, parse_filing, span_around
from .data import BizBenchItem, format_answer

SCALE_NOTES = {3: "in thousands", 6: "in millions", 9: "in billions", 12: "in trillions", -2: "in percent"}
"""The note added to a question for a fact displayed at a scale (scale 0: no note)."""


@dataclass(frozen=True)
class SecNumBuild:
    """The items built from a folder of filings, and what was dropped on the way."""

    items: list[BizBenchItem]
    """The SEC-Num items, filings in name order, facts in document order."""

    filings: int
    """How many filings were read."""

    facts: int
    """How many ix:nonFraction facts they hold."""

    dropped: Counter = field(default_factory=Counter)
    """Why facts did not become items: hidden, nil_or_unreadable, not_digits, ambiguous_label,
    duplicate, over_cap."""

    seconds: float = 0.0
    """Wall time of the build."""

    def split_counts(self) -> dict[str, int]:
        return dict(Counter(item.split for item in self.items))


def scale_note(scale: int) -> str:
    if scale == 0:
        return ""
    return SCALE_NOTES.get(scale, f"in units of 10^{scale}")


def fact_label(fact: Fact) -> str:
    """The question text of a fact, without the scale note."""
    text = concept_label(fact.concept).text
    text = text[:1].upper() + text[1:]
    if fact.dimensions:
        text += " — " + ", ".join(member_label(member) for _, member in fact.dimensions)
    return text


def fact_answer(fact: Fact) -> float:
    """The signed number as displayed (the fact's value in the filing's displayed scale)."""
    assert fact.displayed_value is not None
    return fact.sign * fact.displayed_value


def is_test_filing(accession: str, test_fraction: float) -> bool:
    """The deterministic split: a hash of the accession number, not the order of the files."""
    digest = hashlib.sha256(accession.encode("utf-8")).hexdigest()
    return int(digest[:8], 16) / 2 ** 32 < test_fraction


def _ticker(filing: Filing) -> str:
    """The ticker folder upper-cased ('Goog' -> 'GOOG', FinTradeBench's convention), else dei:TradingSymbol."""
    return (filing.path.parent.name or filing.ticker or "UNKNOWN").upper()


def items_from_filing(filing: Filing, *, chars: int = 400, test_fraction: float = 0.25,
                      dropped: Counter | None = None) -> list[BizBenchItem]:
    """SEC-Num items of one parsed filing (see the module docstring)."""
    dropped = dropped if dropped is not None else Counter()
    if filing.name is None:
        raise DataError("file name is not FORM_FILINGDATE_ACCESSION.htm", path=filing.path,
                        hint="name EDGAR documents like 10-K_2024-11-01_0000320193-24-000123.htm")
    ticker = _ticker(filing)
    split = "test" if is_test_filing(filing.name.accession, test_fraction) else "train"

    # Every readable visible fact counts when judging ambiguity (a '—' shown for the same label is a
    # second answer); only those displayed with digits become items.
    shown: list[Fact] = []
    for fact in filing.facts:
        if not fact.visible:
            dropped["hidden"] += 1
        elif fact.displayed_value is None or fact.value is None:
            dropped["nil_or_unreadable"] += 1
        else:
            shown.append(fact)
    shown.sort(key=lambda f: f.start)  # type: ignore[arg-type, return-value]
    starts = [f.start for f in shown]
    labels = [fact_label(f) for f in shown]

    items, seen = [], set()
    for index, fact in enumerate(shown):
        if not any(char.isdigit() for char in fact.displayed):
            dropped["not_digits"] += 1
            continue
        low, high = span_around(filing.text, fact.start, fact.end, chars)  # type: ignore[arg-type]
        first, last = bisect.bisect_left(starts, low), bisect.bisect_left(starts, high)
        answers = {fact_answer(shown[j]) for j in range(first, last)
                   if labels[j] == labels[index] and shown[j].end <= high}  # type: ignore[operator]
        if len(answers) > 1:
            dropped["ambiguous_label"] += 1
            continue
        note = scale_note(fact.scale)
        question = labels[index] + (f" ({note})" if note else "")
        context = filing.text[low:high]
        if (question, context) in seen:
            dropped["duplicate"] += 1
            continue
        seen.add((question, context))
        items.append(BizBenchItem(
            id=f"secnum/{ticker}/{filing.name.accession}/{fact.element_id or fact.start}",
            question=question, answer=format_answer(fact_answer(fact)), task="secnum", context=context,
            context_type="string", split=split,
            metadata={"ticker": ticker, "trading_symbol": filing.ticker, "form": filing.name.form,
                      "filing_date": filing.name.filing_date.isoformat(),
                      "accession": filing.name.accession, "file": filing.path.name, "concept": fact.concept,
                      "dimensions": [list(pair) for pair in fact.dimensions], "period": str(fact.period),
                      "unit": fact.unit, "scale": fact.scale, "decimals": fact.decimals,
                      "displayed": fact.displayed, "value": fact.value,
                      "answer_offset": fact.start - low}))  # type: ignore[operator]
    return items


def _cap(items: list[BizBenchItem], max_per_filing: int | None, dropped: Counter) -> list[BizBenchItem]:
    if max_per_filing is None or len(items) <= max_per_filing:
        return items
    keep = set(sorted(range(len(items)), key=lambda i: hashlib.sha256(items[i].id.encode()).hexdigest())
               [:max_per_filing])
    dropped["over_cap"] += len(items) - len(keep)
    return [item for i, item in enumerate(items) if i in keep]


def filing_paths(filings_dir: str | Path) -> list[Path]:
    """Every .htm/.html below the folder, sorted (ticker folders, then names)."""
    root = Path(filings_dir)
    if not root.is_dir():
        raise DataError("not a folder", path=root, hint="give the folder of ticker folders with EDGAR .htm files")
    paths = sorted(p for p in root.rglob("*") if p.suffix.lower() in (".htm", ".html") and p.is_file())
    if not paths:
        raise DataError("no .htm filings found", path=root,
                        hint="expected TICKER/FORM_FILINGDATE_ACCESSION.htm files (inline XBRL)")
    return paths


def build_secnum_detailed(filings_dir: str | Path, *, chars: int = 400, test_fraction: float = 0.25,
                          max_per_filing: int | None = None) -> SecNumBuild:
    """Build SEC-Num from every filing in the folder, with counts of what was dropped and why."""
    began = time.perf_counter()
    dropped: Counter = Counter()
    items: list[BizBenchItem] = []
    paths = filing_paths(filings_dir)
    facts = 0
    for path in paths:
        filing = parse_filing(path)
        facts += len(filing.facts)
        items.extend(_cap(items_from_filing(filing, chars=chars, test_fraction=test_fraction, dropped=dropped),
                          max_per_filing, dropped))
    return SecNumBuild(items=items, filings=len(paths), facts=facts, dropped=dropped,
                       seconds=time.perf_counter() - began)


def build_secnum(filings_dir: str | Path, **options) -> list[dict]:
    """SEC-Num rows (id, question, answer, task, context, context_type, options, program, split, metadata)."""
    return [item.to_json() for item in build_secnum_detailed(filings_dir, **options).items]
