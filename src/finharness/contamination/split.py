"""The validation split of filings: text a model had the chance to see against text it cannot have seen, of one
genre and one length.

- Seen side (published well before the models' releases): FinanceBench's 10-K and 10-Q filings of fiscal years
  2015-2023 (`financebench/pdfs/`, read by the benchmark's own PDF reader). Publication is necessary, not
  sufficient, for membership: whether a given filing was in a model's training data is not known, so an AUC
  measured here is a lower bound of what the probe could show on text it certainly saw.
- Unseen side: the FinTradeBench filings (`fintradebench/SEC_Filings/`, inline XBRL, markets.filings) filed after
  the cutoff (default CUTOFF, the day after the latest release among the shipped models).
- Genre: both sides' Management's Discussion and Analysis only (Item 7 of a 10-K, Item 2 of a 10-Q), and of it the
  prose lines only (windows.prose), so tables, headings and the two extractions' layouts do not tell the sides
  apart.
- Length: windows of one token count under the probed model's tokenizer (windows.windows), at most
  MAX_PER_FILING per filing and drawn round-robin across filings, so no filing dominates its side.
- Date: a window that names a year can be told by its years alone; `year_free` marks the windows that name none,
  on which each probe is measured again.

Reading the PDFs needs the benchmark's reader, so the seen side's page texts are passed in (`read_pages`): the
command line (commands/contamination.py) gives it benchmarks.financebench.filings.read_pages.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..markets.filings import discover_filings, load_filing
from .windows import Count, balanced, mentions_year, prose, windows

CUTOFF = dt.date(2024, 11, 13)
"""Unseen side: filings filed on or after this day. Releases: Qwen2.5-Coder-1.5B-Instruct 2024-09-19,
Qwen2.5-Coder-0.5B-Instruct 2024-11-12 (the Qwen2.5-Coder report, arXiv 2409.12186, and the model cards),
SmolLM2-135M-Instruct 2024-11-01 (Hugging Face, release of 2024-10-31/11-01)."""

SEEN_LAST_YEAR = 2023
"""Seen side: fiscal years up to this one (a 2024 filing may be near a release)."""

MAX_PER_FILING = 12
"""Windows at most from one filing."""

RELEASES: dict[str, tuple[str, str]] = {
    "embedded": ("Qwen2.5-Coder-0.5B-Instruct Q4_K_M", "2024-11-12"),
    "embedded:1.5b": ("Qwen2.5-Coder-1.5B-Instruct Q4_K_M", "2024-09-19"),
    "smollm2": ("SmolLM2-135M-Instruct Q4_1", "2024-11-01"),
}
"""The shipped models: what they are and the day each was released."""


def release_of(spec: str) -> tuple[str, str | None]:
    """(what the model is, its release day) of a spec among RELEASES (SmolLM2 by its GGUF's name), else (spec,
    None)."""
    base = spec.split("?", 1)[0]
    if base in RELEASES:
        return RELEASES[base]
    if "smollm2-135m" in base.lower():
        return RELEASES["smollm2"]
    return spec, None

TECH = {"ACTIVISIONBLIZZARD", "ADOBE", "AMAZON", "AMD", "BLOCK", "MICROSOFT", "NETFLIX"}
"""Seen-side companies of the unseen side's sector (technology), for the sector control."""

_PDF_NAME = re.compile(r"^(?P<company>.+?)_(?P<year>\d{4})(?P<quarter>Q\d)?_(?P<form>10K|10Q)\.pdf$", re.IGNORECASE)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Window:
    """One text of the validation split."""

    id: str
    """'<document>#<k>'."""

    text: str
    seen: bool
    """The side: published before the releases (True) or filed after the cutoff."""

    document: str
    """The filing it comes from."""

    company: str
    year: int
    """Fiscal year (seen side) or filing year (unseen side)."""

    form: str
    """'10-K' or '10-Q'."""

    @property
    def year_free(self) -> bool:
        """The window names no year."""
        return not mentions_year(self.text)

    @property
    def tech(self) -> bool:
        return self.company.upper() in TECH or not self.seen


def _norm(line: str) -> str:
    return _SPACES.sub(" ", line).strip().lower().replace("’", "'")


def _is_toc(page: str) -> bool:
    """A table of contents: many Item lines on one page."""
    return sum(bool(re.match(r"^item\s*\d", _norm(line))) for line in page.splitlines()) >= 6


MDNA_MAX_PAGES = 40
"""Pages an MD&A runs at most when no Item heading ends it."""


def _heading(line: str) -> bool:
    """A heading line: short, and not a sentence that cites an Item."""
    return len(line) < 120 and not any(c in line for c in ",“\"")


def _joined_lines(page: str) -> list[str]:
    """A page's lines, normalised, a bare 'Item 7.' joined with the heading text on the line after it."""
    lines = [_norm(line) for line in page.splitlines()]
    out = []
    for k, line in enumerate(lines):
        if re.fullmatch(r"item\s*\d+[a-c]?\s*\.?", line) and k + 1 < len(lines):
            line = f"{line} {lines[k + 1]}"
        out.append(line)
    return out


def mdna_text(pages: Sequence[str], form: str) -> str:
    """The MD&A of a filing's PDF pages: from the first non-contents page with a heading line 'Item 7.
    Management's Discussion...' (10-K; 'Item 2.' for a 10-Q), or else one that starts 'Management's Discussion and
    Analysis', up to the next heading of Item 7A/8 (10-K) or Item 3/4 (10-Q), at most MDNA_MAX_PAGES pages;
    '' when none is found."""
    item = "7" if form == "10-K" else "2"
    headings = (re.compile(rf"^item\s*{item}\s*\.?\s*management'?s? discussion"),
                re.compile(r"^management'?s? discussion and analysis"))
    end_heading = re.compile(r"^item\s*(7a|8)\b" if form == "10-K" else r"^item\s*(3|4)\b")
    start = None
    for pattern in headings:
        for index, page in enumerate(pages):
            if _is_toc(page):
                continue
            at = next((k for k, line in enumerate(_joined_lines(page)) if _heading(line) and pattern.match(line)), None)
            if at is not None:
                start = (index, at)
                break
        if start is not None:
            break
    if start is None:
        return ""
    out: list[str] = []
    for index in range(start[0], min(len(pages), start[0] + MDNA_MAX_PAGES)):
        raw = pages[index].splitlines()
        lines = _joined_lines(pages[index])
        for k in range(start[1] + 1 if index == start[0] else 0, len(raw)):
            if _heading(lines[k]) and end_heading.match(lines[k]):
                return "\n".join(out)
            out.append(raw[k])
    return "\n".join(out)


def seen_documents(pdf_dir: Path) -> list[tuple[Path, str, int, str]]:
    """(path, company, fiscal year, form) of the FinanceBench 10-K/10-Q PDFs up to SEEN_LAST_YEAR, by name."""
    out = []
    for path in sorted(pdf_dir.glob("*.pdf")):
        m = _PDF_NAME.match(path.name)
        if not m or int(m["year"]) > SEEN_LAST_YEAR:
            continue
        out.append((path, m["company"].upper(), int(m["year"]), "10-K" if m["form"].upper() == "10K" else "10-Q"))
    return out


def build_split(data_dir: Path, count: Count, read_pages: Callable[[Path], Sequence[str]], *, tokens: int = 128,
                per_side: int = 200, cutoff: dt.date = CUTOFF) -> tuple[list[Window], dict[str, object]]:
    """The windows of both sides (at most `per_side` each) and what was used and skipped."""
    seen_groups: list[list[Window]] = []
    skipped: list[str] = []
    for path, company, year, form in seen_documents(Path(data_dir) / "financebench" / "pdfs"):
        text = prose(mdna_text(read_pages(path), form))
        cut = windows(text, tokens, count, MAX_PER_FILING) if text else []
        if not cut:
            skipped.append(f"{path.name}: no MD&A prose found")
            continue
        seen_groups.append([Window(f"{path.stem}#{k}", w, True, path.stem, company, year, form)
                            for k, w in enumerate(cut)])
    unseen_groups: list[list[Window]] = []
    for ref in discover_filings(data_dir):
        if ref.filed < cutoff:
            continue
        filing = load_filing(ref)
        mdna = "\n".join(s.text for s in filing.sections
                         if "management" in s.title.lower() and "discussion" in s.title.lower())
        cut = windows(prose(mdna), tokens, count, MAX_PER_FILING) if mdna else []
        name = f"{ref.ticker}_{ref.form}_{ref.filed.isoformat()}"
        if not cut:
            skipped.append(f"{name}: no MD&A prose found")
            continue
        unseen_groups.append([Window(f"{name}#{k}", w, False, name, ref.ticker, ref.filed.year, ref.form)
                              for k, w in enumerate(cut)])
    seen = [w for _, w in balanced(seen_groups, per_side)]
    unseen = [w for _, w in balanced(unseen_groups, per_side)]
    about = {"tokens": tokens, "cutoff": cutoff.isoformat(), "seen_last_year": SEEN_LAST_YEAR,
             "seen_filings": len({w.document for w in seen}), "unseen_filings": len({w.document for w in unseen}),
             "seen_windows": len(seen), "unseen_windows": len(unseen), "skipped": skipped,
             "seen_year_free": sum(w.year_free for w in seen), "unseen_year_free": sum(w.year_free for w in unseen),
             "seen_tech": sum(w.tech for w in seen)}
    return seen + unseen, about
