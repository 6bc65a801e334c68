"""Where FinTradeBench's datasets come from: one Spec per dataset (data/source_spec.py says each field), read by
tools/make_sources.py, which hashes a local copy of the official data into sources.json beside this file (the
entries `finharness data` lists and pulls). Never imported at run time."""

from __future__ import annotations

from ...data.source_spec import DERIVED, UNCONFIRMED, Rule, Spec

DATASETS: tuple[Spec, ...] = (
    Spec(
        name="fintradebench-seed",
        description="FinTradeBench: 150 expert seed questions (F 50, FT 50, T 50) with golden indicators.",
        repository="fintradebench-anonymous/PaperSubmission", commit="a6134bb", licence="none stated",
        layout="FinTradeBench_Golden_Seed_150.csv: question_id,question,golden_indicators,response "
               "(indicators separated by |); README_dummy_data.md: the upstream data README",
        local_dir="fintradebench/", include=r"FinTradeBench_Golden_Seed_150\.csv|README_dummy_data\.md",
        rules=(Rule(r"FinTradeBench_Golden_Seed_150\.csv", r"dummy_data/\g<0>"),
               Rule(r"README_dummy_data\.md", r"dummy_data/README.md")),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",),
    ),

    Spec(
        name="fintradebench-history",
        description="FinTradeBench daily OHLCV for AAPL, ADSK, AMZN, GOOG, META, NVDA, TSLA to 2025-10-03.",
        repository="fintradebench-anonymous/PaperSubmission", commit="a6134bb", licence="none stated",
        layout="history_xlsx/TICKER-history.xlsx: Date,Open,High,Low,Close,Adj. Close,Change,Volume",
        local_dir="fintradebench/", include=r"history_xlsx/.*",
        rules=(Rule(r"history_xlsx/(.*)", r"dummy_data/Raw_RAG_Documents/history/\1"),),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",),
    ),

    Spec(
        name="fintradebench-fundamentals",
        description="FinTradeBench quarterly fundamental ratios (F_* columns), forward-filled per trading day.",
        repository="fintradebench-anonymous/PaperSubmission", commit="a6134bb", licence="none stated",
        layout="fundamentals/TICKER.csv: Date (MM/DD/YYYY) and the F_* ratio columns",
        local_dir="fintradebench/", include=r"fundamentals/.*",
        rules=(Rule(r"fundamentals/(.*)\.csv",
                    r"dummy_data/Precomputed_Contexts/\1-daily_with_fundamentals.csv", DERIVED),),
        notes=("derived, no upstream file: the fundamental (F_*) columns of the upstream "
               "Precomputed_Contexts/TICKER-daily_with_fundamentals.csv; pull it from a local copy (--from)",),
    ),

    Spec(
        name="fintradebench-sec-filings",
        description="55 raw EDGAR 10-K/10-Q filings (inline XBRL HTML), 2024-2025, for the 7 FinTradeBench firms.",
        repository="fintradebench-anonymous/PaperSubmission", commit="a6134bb", licence="public domain (SEC)",
        layout="SEC_Filings/TICKER/FORM_FILINGDATE_ACCESSION.htm (folders Goog and Meta are mixed case)",
        local_dir="fintradebench/", include=r"SEC_Filings/.*",
        rules=(Rule(r"SEC_Filings/(.*)", r"dummy_data/Raw_RAG_Documents/SEC_Filings/\1", UNCONFIRMED),),
        notes=("no filing is in the index of the repository; unconfirmed_path follows the folder structure "
               "its dummy_data/README.md documents (Raw_RAG_Documents/SEC_Filings/TICKER/)",
               "each file is the primary document of the EDGAR filing whose accession number is in its name",
               "commit is the short id given with the copy; the full 40-hex id was not found"),
    ),

    Spec(
        name="nasdaq100-ohlcv",
        description="Daily prices for 143 NASDAQ-100 members (current and former), 2014-03 to 2024-03.",
        repository="dieperdev/nasdaq-stock-data", commit="0352380b59129a878249aedbb1723696c893f920",
        licence="Unlicense",
        layout="TICKER.csv: nasdaq.com export Date,Close,Volume,Open,High,Low; MM/DD/YYYY, "
               "$ prices, thousands separators in volumes, newest first",
        local_dir="nasdaq100_ohlcv/nasdaq_com_2014_2024/",
        rules=(Rule(r"README\.md", r"README.md"),
               Rule(r"LICENSE", r"LICENSE", UNCONFIRMED),
               Rule(r".*\.csv", r"data/\g<0>")),
        notes=("a selection of the upstream data/ folder (about 6,700 tickers): the NASDAQ-100 members",
               "LICENSE is not in the index of the repository"),
    ),

    Spec(
        name="fintradebench-release",
        description="FinTradeBench's release scripts that hold its prompts and definitions.",
        repository="fintradebench-anonymous/PaperSubmission", commit="a6134bb", licence="none stated",
        layout="generate_benchmark_responses.py, run_snowflake_rag_pipeline.py (TELeR prompts, self-selection), "
               "evaluate_rag_pipeline.py, evaluate_llm_as_judge.py (judges), generate_question_variants.py "
               "(scaling), compute_financial_signals.py (signals); read as data (they import cloud SDKs)",
        local_dir="fintradebench/", include=r"release/.*",
        rules=(Rule(r"release/(.*)", r"\1"),),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",),
    ),
)
