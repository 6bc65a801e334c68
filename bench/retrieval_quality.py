"""FinTradeBench retrieval quality: can point-in-time retrieval find the passage that states a reported figure?
(run by hand)

    .venv/bin/python bench/retrieval_quality.py [DATA_DIR] [--as-of 2025-06-01] [--dense auto|on|off] [--json F]

The queries are made from the filings themselves, so the relevance labels need no hand judgement: for
each ticker, the latest 10-K and the latest 10-Q filed on or before ``--as-of`` give one question per
reported figure of CONCEPTS (revenue, net income, R&D, buybacks, cash, ...) for the filing's own period,
asked in plain words ("How much did Tesla spend buying back its own stock in the fiscal year ended
December 31, 2024?"), never with the statement's line label. A returned filing section is relevant when
its text shows the figure as the filing prints it (``391,035``; only figures of four digits or more, so a
match is not a coincidence). Retrieval runs as FinTradeBench's does (point in time at ``--as-of``: every
filing of the ticker filed by then is a candidate), with a quota of 10 sections, no price tables and a
budget large enough that nothing is cut.

Per query: the rank of the first relevant section (duplicates removed). Printed: recall@1, recall@3 (3 is
the retriever's default filing quota), recall@10 and MRR@10, each over every query, with n; with
``--dense both`` the BM25-only figures beside the hybrid ones. Everything runs in a fresh temporary cache
unless ``--cache`` is given. Uses only the retriever's public API, so the same script measures an older
checkout (``PYTHONPATH=OLD/src``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from benchlib import DATA_DIR

COMPANIES = {"AAPL": "Apple", "ADSK": "Autodesk", "AMZN": "Amazon", "GOOG": "Alphabet", "META": "Meta",
             "NVDA": "NVIDIA", "TSLA": "Tesla"}

CONCEPTS = {
    "RevenueFromContractWithCustomerExcludingAssessedTax": "What were {name}'s total revenues for the {period}?",
    "Revenues": "What were {name}'s total revenues for the {period}?",
    "NetIncomeLoss": "How much profit did {name} make in the {period}?",
    "ResearchAndDevelopmentExpense": "How much did {name} spend on research and development in the {period}?",
    "OperatingIncomeLoss": "What was {name}'s operating income in the {period}?",
    "GrossProfit": "What gross profit did {name} earn in the {period}?",
    "IncomeTaxExpenseBenefit": "What was {name}'s income tax expense in the {period}?",
    "PaymentsForRepurchaseOfCommonStock": "How much did {name} spend buying back its own stock in the {period}?",
    "NetCashProvidedByUsedInOperatingActivities": "How much cash did {name}'s operations generate in the {period}?",
    "PaymentsToAcquirePropertyPlantAndEquipment": "How much did {name} invest in capital expenditures in the {period}?",
    "CashAndCashEquivalentsAtCarryingValue": "How much cash did {name} hold {period}?",
    "Assets": "What were {name}'s total assets {period}?",
    "StockholdersEquity": "How large was {name}'s shareholders' equity {period}?",
}
"""Concept -> question; each asked at most once per filing (the first revenue concept a filing uses)."""


def period_words(fact, period_end: dt.date) -> str | None:
    """'fiscal year ended ...' / 'three months ended ...' / 'at the end of ...', or None for another period."""
    when = f"{period_end:%B} {period_end.day}, {period_end.year}"
    period = fact.period
    if period is None:
        return None
    if period.is_instant:
        return f"at the end of {when}" if period.instant == period_end else None
    if period.end != period_end or period.days is None:
        return None
    months = round(period.days / 30.4)
    return {3: f"three months ended {when}", 6: f"six months ended {when}", 9: f"nine months ended {when}",
            12: f"fiscal year ended {when}"}.get(months)


def make_queries(data_dir: Path, as_of: dt.date, tickers: list[str]) -> list[dict]:
    from finharness.markets.filings import discover_filings
    from finharness.markets.xbrl import parse_filing

    queries = []
    for ticker in tickers:
        refs = [ref for ref in discover_filings(data_dir, {ticker}) if ref.filed <= as_of]
        targets = [max((r for r in refs if r.form == form), key=lambda r: r.filed, default=None)
                   for form in ("10-K", "10-Q")]
        for ref in filter(None, targets):
            filing = parse_filing(ref.path)
            asked: set[str] = set()
            for concept, template in CONCEPTS.items():
                question = template.split(" for the ")[0]
                if question in asked:
                    continue
                # the shortest period ending at the filing's period end (a 10-Q's quarter before its year to date)
                candidates = [(fact, words) for fact in filing.facts_named(concept)
                              if (words := period_words(fact, filing.period_end)) and fact.displayed_value
                              and abs(fact.displayed_value) >= 1000]
                if not candidates:
                    continue
                fact, words = min(candidates, key=lambda pair: pair[0].period.days or 0)
                asked.add(question)
                queries.append({"ticker": ticker, "filing": ref.path.name, "concept": concept,
                                "query": template.format(name=COMPANIES[ticker], period=words),
                                "figure": fact.displayed.strip()})
    return queries


def first_relevant(items, figure: str) -> int | None:
    pattern = re.compile(rf"(?<![\d.,]){re.escape(figure)}(?![\d]|,\d)")
    ranks = [rank for rank, item in enumerate(items, 1) if pattern.search(item.text)]
    return ranks[0] if ranks else None


def evaluate(data_dir: Path, as_of: dt.date, queries: list[dict], dense: str, cache: Path) -> dict:
    from finharness.retrieval import RetrievalConfig, Retriever

    config = RetrievalConfig(filing_quota=10, price_tables=0, budget_tokens=10**7, dense=dense)
    retriever = Retriever(data_dir, config, cache=cache)
    started = time.perf_counter()
    ranks, status = [], None
    for query in queries:
        result = retriever.retrieve(query["query"], query["ticker"], as_of)
        status = result.dense
        ranks.append(first_relevant([i for i in result.items if i.track == "filings"], query["figure"]))
    n = len(ranks)
    return {"dense": status, "n": n, "seconds": round(time.perf_counter() - started, 1),
            **{f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in (1, 3, 10)},
            "mrr@10": sum(1 / r for r in ranks if r is not None) / n, "ranks": ranks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", default=str(DATA_DIR))
    parser.add_argument("--as-of", default="2025-06-01")
    parser.add_argument("--dense", default="both", choices=("both", "on", "off"),
                        help="hybrid (on), BM25 only (off), or both side by side")
    parser.add_argument("--tickers", default=",".join(COMPANIES),
                        help="comma list (embedding all seven cold takes a while on 2 cores)")
    parser.add_argument("--cache", type=Path, help="cache folder (default: a fresh temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures and per-query ranks here")
    args = parser.parse_args()
    data_dir, as_of = Path(args.data_dir), dt.date.fromisoformat(args.as_of)
    cache = args.cache or Path(tempfile.mkdtemp(prefix="finharness-retrieval-quality-"))
    queries = make_queries(data_dir, as_of, [t.strip().upper() for t in args.tickers.split(",") if t.strip()])
    print(f"{len(queries)} queries over {len({q['ticker'] for q in queries})} tickers, as of {as_of}; cache {cache}")
    results = {}
    for dense in (("off", "on") if args.dense == "both" else (args.dense,)):
        results[dense] = result = evaluate(data_dir, as_of, queries, dense, cache)
        print(f"dense {result['dense']}: recall@1 {result['recall@1']:.3f}  recall@3 {result['recall@3']:.3f}  "
              f"recall@10 {result['recall@10']:.3f}  MRR@10 {result['mrr@10']:.3f}  (n {result['n']}, "
              f"{result['seconds']} s incl. index builds)")
    by_concept: dict[str, list] = {}
    last = results[list(results)[-1]]
    for query, rank in zip(queries, last["ranks"]):
        by_concept.setdefault(query["concept"], []).append(rank)
    for concept, ranks in by_concept.items():
        hits = sum(1 for r in ranks if r is not None and r <= 3)
        print(f"  {concept:<52} recall@3 {hits}/{len(ranks)}"
              f"  median rank {statistics.median([r or 11 for r in ranks]):g}")
    if args.json:
        args.json.write_text(json.dumps({"as_of": str(as_of), "queries": queries, "results": results}, indent=1))


if __name__ == "__main__":
    main()
