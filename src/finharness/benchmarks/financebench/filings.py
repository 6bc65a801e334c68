"""A filing's PDF as page texts, read once and cached.

PyMuPDF reads the PDFs because it is what FinanceBench itself used (the release's evaluation notebook loads each
filing with LangChain's PyMuPDFLoader, one document per page, and joins the pages with blank lines for its long-
context configurations), and because its page text is the release's own: on the 165 evidence pages of the open
sample whose filing is here, PyMuPDF 1.28's text of the cited page equals the release's `evidence_text_full_page`
up to runs of spaces on all but a few pages where it also keeps a dash the release dropped (median similarity
0.99; pypdfium2 0.95; pypdf cannot open some of the filings without the `cryptography` package). Page numbers
are 0-based, as the release's `evidence_page_num`. Tables come out as PyMuPDF lays out text blocks: one cell a
line, rows in reading order (the release's evidence has the same shape).

PyMuPDF is licensed AGPL-3.0 (or commercially by Artifex), so it is an optional dependency: `pip install
'finharness[pdf]'`. The pages of each file are cached under `<cache>/financebench/pages/` by the file's sha256
and the reader's version, so a changed file or reader is read again.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from pathlib import Path

from ...data.errors import DataError
from ...data.io import atomic_write_text
from ...data.registry import cache_dir, sha256_file

READER_VERSION = 1
"""Bumped when what is cached per page changes."""

PAGE_SEPARATOR = "\n\n"
"""How the release joins a filing's pages into the one text its long-context configurations send."""

_lock = threading.Lock()


def reader_name() -> str:
    """The PDF reader and its version ('pymupdf 1.28.2'): part of every run key that reads filings."""
    try:
        import pymupdf
    except ImportError:
        return "pymupdf (not installed)"
    return f"pymupdf {pymupdf.__version__}"


def _read_pdf(path: Path) -> list[str]:
    try:
        import pymupdf
    except ImportError:
        raise DataError("reading FinanceBench's filings needs PyMuPDF, which is not installed", path=path,
                        hint="pip install 'finharness[pdf]' (PyMuPDF is AGPL-3.0; see docs/benchmarks/financebench.md)"
                        ) from None
    try:
        with pymupdf.open(path) as document:
            return [page.get_text() for page in document]
    except (RuntimeError, ValueError) as err:  # pymupdf raises these for damaged or non-PDF files
        raise DataError(f"PyMuPDF cannot read this PDF ({type(err).__name__}: {err})", path=path,
                        hint="pull it again: `finharness data pull financebench`") from None


@lru_cache(maxsize=16)
def _pages_cached(path: str, digest: str, reader: str) -> tuple[str, ...]:
    cached = cache_dir() / "financebench" / "pages" / f"{digest}-{READER_VERSION}.json"
    try:
        stored = json.loads(cached.read_text(encoding="utf-8"))
        if stored.get("reader") == reader and isinstance(stored.get("pages"), list):
            return tuple(stored["pages"])
    except (OSError, ValueError):
        pass
    pages = _read_pdf(Path(path))
    atomic_write_text(cached, json.dumps({"reader": reader, "pages": pages}, ensure_ascii=False))
    return tuple(pages)


def read_pages(path: Path) -> tuple[str, ...]:
    """The text of each page of the PDF at `path`, 0-based (cached by the file's sha256 and the reader)."""
    if not path.is_file():
        raise DataError("the filing is not in the data root", path=path,
                        hint="`finharness data pull financebench` fetches the cited filings")
    with _lock:  # one reading of a file at a time: samples of one document arrive together
        return _pages_cached(str(path), sha256_file(path), reader_name())


def whole_text(path: Path) -> str:
    """The filing as one text, pages joined as the release joins them."""
    return PAGE_SEPARATOR.join(read_pages(path))
