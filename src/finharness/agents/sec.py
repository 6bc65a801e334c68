"""Agent tools over EDGAR inline-XBRL filings (FinTradeBench's SEC_Filings layout), point-in-time.

Every tool takes the episode's as-of date when it is made: nothing filed after it can be found, listed, read or
looked up, exactly as FinTradeBench's retrieval keeps the future out (retrieval/retrieve.py).

- `list_filings(ticker)`: the ticker's filings filed by the as-of date (form, filing date, period, sections).
- `search_filings(ticker, query)`: the project's point-in-time retrieval (BM25 and dense over section chunks).
- `read_section(ticker, filed, section)`: one section of one filing, whole (cut at the loop's result limit).
- `xbrl_fact(ticker, concept, [period_end])`: the values a filing tagged for a concept (the SEC-Num
  machinery, markets/xbrl.py): entity totals only (no dimensions), newest filing first, with unit and period.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ..core.types import ToolSpec
from .loop import FunctionTool, ToolError

FACTS_SHOWN = 12
"""Facts listed per xbrl_fact call at most."""


def _ticker(arguments: Mapping[str, Any], known: set[str]) -> str:
    ticker = str(arguments.get("ticker") or "").strip().upper()
    if ticker not in known:
        raise ToolError(f"no filings for ticker {ticker!r}; the tickers are {', '.join(sorted(known))}")
    return ticker


def sec_tools(data_dir: Path, as_of: dt.date, retriever: Any = None) -> list[FunctionTool]:
    """list_filings, search_filings, read_section and xbrl_fact over the filings of `data_dir` filed by `as_of`.
    `retriever`: a retrieval.Retriever to search with (default: one over `data_dir` with its defaults)."""
    from ..markets.filings import discover_filings, load_filing
    from ..markets.xbrl import parse_filing

    parse_filing = lru_cache(maxsize=32)(parse_filing)  # a fact lookup walks a ticker's filings newest first
    refs = [ref for ref in discover_filings(data_dir) if ref.filed <= as_of]
    known = {ref.ticker for ref in refs}

    def of(ticker: str) -> list[Any]:
        return [ref for ref in refs if ref.ticker == ticker]

    def list_filings(arguments: dict[str, Any]) -> str:
        ticker = _ticker(arguments, known)
        lines = []
        for ref in of(ticker):
            filing = load_filing(ref)
            lines.append(f"{ref.form} filed {ref.filed} period {filing.period_end or '?'}: "
                         + "; ".join(s.title.splitlines()[-1][:60] for s in filing.sections))
        return "\n".join(lines)

    async def search_filings(arguments: dict[str, Any]) -> str:
        ticker = _ticker(arguments, known)
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("give a query string")
        nonlocal retriever
        if retriever is None:
            from ..retrieval import Retriever

            retriever = Retriever(data_dir)
        found = await retriever.aretrieve(query, ticker, as_of)
        items = [item for item in found.items if item.track == "filings"]
        return "\n\n".join(f"[{item.source} filed {item.date}]\n{item.text}" for item in items) or "nothing found"

    def read_section(arguments: dict[str, Any]) -> str:
        ticker = _ticker(arguments, known)
        filed = str(arguments.get("filed") or "")
        matches = [ref for ref in of(ticker) if ref.filed.isoformat() == filed]
        if not matches:
            raise ToolError(f"{ticker} has no filing filed on {filed!r} by {as_of}; list_filings names them")
        filing = load_filing(matches[0])
        wanted = str(arguments.get("section") or "").lower()
        sections = [s for s in filing.sections if wanted and wanted in s.title.lower()]
        if not sections:
            titles = "; ".join(s.title.splitlines()[-1][:60] for s in filing.sections)
            raise ToolError(f"no section of that filing has {wanted!r} in its title; its sections: {titles}")
        return f"{sections[0].title}\n{sections[0].text}"

    def xbrl_fact(arguments: dict[str, Any]) -> str:
        ticker = _ticker(arguments, known)
        concept = str(arguments.get("concept") or "").strip()
        if not concept:
            raise ToolError("give a concept, e.g. us-gaap:Revenues or NetIncomeLoss")
        wanted_end = str(arguments.get("period_end") or "")
        lines = []
        for ref in reversed(of(ticker)):
            filing = parse_filing(ref.path)
            for fact in filing.facts:
                local = fact.concept.split(":")[-1]
                if (fact.concept != concept and local != concept) or fact.has_dimensions or fact.value is None:
                    continue
                end = fact.period.last_day if fact.period else None
                if wanted_end and str(end) != wanted_end:
                    continue
                shown = f"{int(fact.value):,}" if float(fact.value).is_integer() else f"{fact.value:,.6g}"
                line = f"{fact.concept} = {shown} {fact.unit or ''} period {fact.period} ({ref.form} filed {ref.filed})"
                if line not in lines:
                    lines.append(line)
            if len(lines) >= FACTS_SHOWN:
                break
        if not lines:
            raise ToolError(f"no {concept} fact in {ticker}'s filings by {as_of}" +
                            (f" for a period ending {wanted_end}" if wanted_end else ""))
        return "\n".join(lines[:FACTS_SHOWN])

    text = {"type": "string"}
    ticker_field = {"ticker": {**text, "description": "e.g. AAPL"}}
    return [
        FunctionTool(ToolSpec("list_filings", "List a company's 10-K and 10-Q filings available at the question's "
                              "date.", {"type": "object", "properties": ticker_field, "required": ["ticker"]}),
                     lambda a: asyncio.to_thread(list_filings, a)),
        FunctionTool(ToolSpec("search_filings", "Search a company's filings (those available at the question's date).",
                              {"type": "object", "properties": {**ticker_field, "query": text},
                               "required": ["ticker", "query"]}), search_filings),
        FunctionTool(ToolSpec("read_section", "Read a section of one filing, e.g. section 'Item 7'.",
                              {"type": "object", "properties": {**ticker_field, "filed": {**text, "description":
                                                                "filing date YYYY-MM-DD"}, "section": text},
                               "required": ["ticker", "filed", "section"]}),
                     lambda a: asyncio.to_thread(read_section, a)),
        FunctionTool(ToolSpec("xbrl_fact", "Look up the values a company tagged in its filings for an XBRL concept "
                              "(e.g. us-gaap:Revenues, NetIncomeLoss, Assets).",
                              {"type": "object", "properties": {**ticker_field, "concept": text,
                                                                "period_end": {**text, "description": "optional, "
                                                                               "YYYY-MM-DD"}},
                               "required": ["ticker", "concept"]}), lambda a: asyncio.to_thread(xbrl_fact, a)),
    ]
