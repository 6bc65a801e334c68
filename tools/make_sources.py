#!/usr/bin/env python3
"""Generate the dataset registry (src/finharness/data/sources.json) from a local copy of the official data.

    python tools/make_sources.py DATA_ROOT > src/finharness/data/sources.json

DATA_ROOT is a folder laid out like ../shared/data (see its README.md): each file there is byte-identical
to an upstream file at the commit recorded below, except the ones marked derived. The script hashes every
file and maps it to its in-repo upstream path with the rules in DATASETS.

How the upstream paths were checked: each rule marked `confirmed` was looked up path by path in an index of
the public repositories (every one of the 143 NASDAQ files, every IDEAFinBench file, ...), and sizes were
compared where the text could be read. Paths the index did not hold are marked `unconfirmed`: they are the
place the repository's own layout or documentation points to, recorded as `unconfirmed_path`, never as
`upstream_path`. `pull` may try them because the sha256 decides. Files that were made here from upstream
data (a column subset, a hand-made mapping) are `derived`: no upstream file has their bytes.

Every file under DATA_ROOT must belong to exactly one dataset or be listed in IGNORED; anything else is
reported on stderr and the script fails, so the registry cannot silently drift from the data.

Files that no local copy holds (the BizBench parquet, the FinQA and ConvFinQA question files) are listed as
`Remote` entries at a pinned commit, without size and sha256: the git blob ids come from the tree of that commit
(`git ls-tree` of a clone), and `finharness data pull` records size and sha256 in its lock after the first
verified download.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 1

# Files under DATA_ROOT that belong to no dataset entry.
IGNORED = {
    "README.md",  # the README of the shared copy itself
}

CONFIRMED, UNCONFIRMED, DERIVED = "confirmed", "unconfirmed", "derived"


@dataclass(frozen=True)
class Rule:
    """Maps local paths (relative to the dataset's local folder) to upstream paths."""

    pattern: str
    """Regular expression matched against the whole local path."""
    template: str | None
    """re.sub template giving the in-repo path (confirmed or unconfirmed) or, for derived files, the upstream
    file they were derived from (None when there is no single one)."""
    status: str = CONFIRMED
    """confirmed | unconfirmed | derived."""


@dataclass(frozen=True)
class Remote:
    """A file no local copy holds, registered at the spec's commit without size and sha256."""

    path: str
    """Path in the dataset's local folder (the upstream path too)."""
    git_blob: str | None = None
    """Its git blob id in the tree of the commit (GitHub); None for a Hub LFS file (the Hub sends its sha256)."""
    unpack: str | None = None
    """'zip' for an archive unpacked into the dataset's folder."""


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    repository: str | None
    commit: str | None
    licence: str
    layout: str
    local_dir: str
    rules: tuple[Rule, ...] = ()
    include: str | None = r".*"
    """Local files (under local_dir) that belong to the dataset; None: none, only `remote`."""
    notes: tuple[str, ...] = ()
    homepage: str | None = None
    available_here: bool = True
    host: str = "github"
    remote: tuple[Remote, ...] = ()


# Full commit ids read from the git log of each repository (FinQA, ConvFinQA) and from the Hub's pages of
# kensho/bizbench (its tree at this commit holds both parquet files).
FINQA_COMMIT = "0f16e2867befa6840783e58be38c9efb9229d742"
CONVFINQA_COMMIT = "cf3eed2d5984960bf06bb8145bcea5e80b0222a6"
BIZBENCH_COMMIT = "18e0759221aa73e75831472ba04cbe83fa82e45a"

IDEA_UNCONFIRMED = (r"cfa_l2/subject_mapping\.json|cpa_multi/subject_mapping\.json"
                    r"|cpa_multi/test/(auditing|economic_law|strategy|tax_law)_test\.csv"
                    r"|cpa_one/test/(accounting|economic_law|financial_management|strategy)_test\.csv")

FINANCEBENCH_COMMIT = "cc39aeb4afdf33909ee1412188bf89035950c2eb"
FINANCEBENCH_ABSENT_PDFS = (
    ("3M_2023Q2_10Q", "d902fe2dc015721ce474b354fb3c8d6fb7a6501b"),
    ("AES_2022_10K", "65ea6bb7e1ed0474779b0160a6f5101a47aec9c3"),
    ("AMCOR_2020_10K", "001df3e4572424f8ca4b8e89370ea3a535c8d67c"),
    ("AMD_2022_10K", "9cc40ffc8ed20286a2c8ae5cc860816f05b9ce6e"),
    ("COCACOLA_2021_10K", "ed330eb7fa976673895294e6d5162691b1fce08b"),
    ("COCACOLA_2022_10K", "eceb731f67dd9ca43bdab6b2eb40e6fff957022e"),
    ("JPMORGAN_2022_10K", "d5261349ab800bad30422bc05dedaa8ad2a329b5"),
    ("PAYPAL_2022_10K", "386c8e47ac482e2ffb6dad3b5be1bb2af3ecfd2d"),
    ("ULTABEAUTY_2023_10K", "da46ba0a72de42552a5c0f9ae0801f19e513d494"),
    ("WALMART_2019_10K", "7da6857bbca8b38efba99ee22a3ee14630f6a839"),
)
"""The cited filings the shared copy lacks: (doc_name, git blob id in the tree of FINANCEBENCH_COMMIT)."""
FINANCEBENCH_HELD_RESULTS = (
    ("claude-2_inContext_reverse", "31991b9bc6d135431673869676676047202ddc85"),
    ("gpt-4-1106-preview_closedBook", "e9758db6710f9549ddb0995e79fe90619f41d979"),
    ("gpt-4-1106-preview_inContext", "235c5693afde9d0d27bc9606543f421df01eb90d"),
    ("gpt-4-1106-preview_oracle_reverse", "16906f39eaa868a461352e8fbe013148d951a743"),
    ("gpt-4-1106-preview_sharedStore", "c750bff0295d0304fb1e6f9e7528e57a1812dae6"),
    ("gpt-4_oracle", "44f52b8382346ed34a22e21c31d9e5a96f52acf6"),
    ("gpt-4_singleStore", "25bfb4ac53e6bc831b959400972397b1d345063c"),
    ("llama2_singleStore", "832f08128df3ad9207dc2ee86fa5710fde3afce9"),
)
"""Released answer files the shared copy lacks (name, git blob id at FINANCEBENCH_COMMIT)."""


DATASETS: tuple[Spec, ...] = (
    Spec(
        name="ucfe",
        description="UCFE: 17 user-centred financial tasks, 330 items, with the official run settings.",
        repository="TobyYang7/UCFE-Benchmark", commit="6f6e54f", licence="Apache-2.0",
        layout="UCFE_bench.json: {task: [{role_prompt, model_prompt, information, needs, evaluation_prompt, "
               "evaluation_hints, id}]}; tasks starting with 0_ are single-turn; config/*.json: run settings "
               "(keys empty)",
        local_dir="ucfe/", include=r"UCFE_bench\.json|config/.*|LICENSE\.txt",
        rules=(Rule(r"UCFE_bench\.json|config/.*", r"\g<0>"),
               Rule(r"LICENSE\.txt", r"\g<0>", UNCONFIRMED)),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",
               "LICENSE.txt is not in the index of the repository"),
    ),
    Spec(
        name="ucfe-gpt4o-dialogues",
        description="The released GPT-4o dialogues for all 330 UCFE items.",
        repository="TobyYang7/UCFE-Benchmark", commit="6f6e54f", licence="Apache-2.0",
        layout="log/DATE_TIME_gpt-4o_eng.json: {task: [{the UCFE_bench.json fields, dialogue: [{role: 用户|AI助手, "
               "content}], dialogue_round, model, total_tokens}]}",
        local_dir="ucfe/", include=r"log/.*",
        rules=(Rule(r"log/.*", r"\g<0>"),),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",),
    ),
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
        name="tatqa",
        description="TAT-QA: hybrid table/text financial QA; dev (1,668 q), test, and test_gold with answers.",
        repository="NExTplusplus/TAT-QA", commit="870accc41953dcde885aabeb963d94aabdc0fbc3", licence="MIT",
        layout="dataset_raw/tatqa_dataset_{dev,test,test_gold}.json: [{table, paragraphs, questions: [{uid, "
               "question, answer, derivation, answer_type, scale, ...}]}]; dataset_tagop/: the TagOp dev file; "
               "sample_prediction.json",
        local_dir="tatqa/", rules=(Rule(r".*", r"\g<0>"),),
    ),
    Spec(
        name="finqa-meta",
        description="FinQA operation and constant lists and example predictions (not the question files).",
        repository="czyssrs/FinQA", commit=FINQA_COMMIT, licence="MIT",
        layout="operation_list.txt, constant_list.txt: one token a line; example_predictions.json: "
               "[{id, predicted: [program tokens]}]",
        local_dir="finqa/", include=r"(?!dataset/).*",
        rules=(Rule(r"constant_list\.txt", r"code/generator/constant_list.txt"),
               Rule(r"operation_list\.txt", r"code/retriever/operation_list.txt"),
               Rule(r"example_predictions\.json", r"code/evaluate/example_predictions.json"),
               Rule(r"LICENSE", r"LICENSE")),
        notes=("each file's git blob id equals the one in the tree of the commit",),
    ),
    Spec(
        name="bizbench-prompts",
        description="The official BizBench system prompts with one-shot samples per task, and a result sheet.",
        repository="kensho-technologies/benchmarks-pipeline", commit="cdffa9ba40851e656389b76bf2725f1ed848b363",
        licence="MIT",
        layout="prompts/TASK_{cot,code}.json (system prompt, one-shot samples); results/MODEL-cot.csv",
        local_dir="bizbench/", include=r"(?!data/).*", rules=(Rule(r".*", r"\g<0>"),),
        notes=("mc_cot.json and no_context_cot.json contain merge-conflict markers upstream",),
    ),
    Spec(
        name="cfinbench-categories",
        description="CFinBench's 43 categories (ids 1-1 ... 4-11) with Chinese and English names.",
        repository="yanbinwei/CFinBench-Eval", commit="9364f1b5eb5dbfa2dc425db3b469649f68734cbb",
        licence="Apache-2.0",
        layout="category_mapping.json: {first_level, zh, en, types, counts_per_level}",
        local_dir="cfinbench/", include=r"category_mapping\.json",
        rules=(Rule(r".*", None, DERIVED),),
        notes=("derived, no upstream file: assembled from the mapping dict in "
               "configs/datasets/CFinBench/*/cfinbench_gen_*.py and the README table (see its _source key)",),
    ),
    Spec(
        name="ucfe-release",
        description="UCFE's official code that holds its prompts and rating (follow-up templates, judge, Elo).",
        repository="TobyYang7/UCFE-Benchmark", commit="6f6e54f", licence="Apache-2.0",
        layout="run_ckpt.py (simulation loop, follow-up templates), eval_elo.py (judge call, Elo), "
               "user_simulator.py; read as data by the prompt regression tests, never imported",
        local_dir="ucfe/", include=r"release/.*",
        rules=(Rule(r"release/(run_ckpt|eval_elo)\.py", r"\1.py"),
               Rule(r"release/user_simulator\.py", r"utils/user_simulator.py")),
        notes=("commit is the short id given with the copy; the full 40-hex id was not found",),
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
    Spec(
        name="cfinbench-release",
        description="CFinBench's OpenCompass-fork configs (prompts, retrievers, PPL templates) and its loader.",
        repository="yanbinwei/CFinBench-Eval", commit="9364f1b5eb5dbfa2dc425db3b469649f68734cbb",
        licence="Apache-2.0",
        layout="configs/datasets/CFinBench/{zero_shot,few_shot}/cfinbench_{gen,ppl}_*.py; "
               "opencompass/datasets/cfinbench.py (loader and evaluator)",
        local_dir="cfinbench/", include=r"release/.*",
        rules=(Rule(r"release/(.*)", r"\1"),),
    ),
    Spec(
        name="ideafinbench",
        description="IDEAFinBench: CFA L1 (val 1,220), CFA L2 (val 664), CPA single (val 1,414) and "
                    "multi-answer (val 1,142) exams.",
        repository="IDEA-FinAI/IDEAFinBench", commit="e19ff93", licence="none stated",
        layout="{cfa_l1,cfa_l2,cpa_one,cpa_multi}/{dev,val,test}/SUBJECT_SPLIT.csv: "
               "id,question,A,B,C,D,answer (test: no answer; CPA multi answers like A,B,D); subject_mapping.json",
        local_dir="cfa_cpa/IDEAFinBench/",
        rules=(Rule(IDEA_UNCONFIRMED, r"datasets/\g<0>", UNCONFIRMED),
               Rule(r".*", r"datasets/\g<0>")),
        notes=("10 small files (2 subject_mapping.json copies, 8 test files) are not in the index of the "
               "repository; unconfirmed_path follows its datasets/ layout",
               "commit is the short id given with the copy; the full 40-hex id was not found"),
    ),
    Spec(
        name="cfa-essay",
        description="CFA question sets collected by the CFA_essay project: FinEval CFA-Easy (1,032 "
                    "multiple-choice items), CFA-Challenge, CFA Level III.",
        repository="taiwanfifi/CFA_essay", commit="5d406bdb77ec0d65ecccbd19a7ed0acbda8ccab4",
        licence="none stated",
        layout="FinEval_CFA_Easy.data.json: [{query, text, choices, answer, gold}]; "
               "FinEval_CFA_Challenge.data.json: [{query, answer, source}]; CFA_Level_III.data.json; "
               "*.README.md: the upstream dataset cards",
        local_dir="cfa_cpa/CFA_essay/",
        rules=(Rule(r"FinEval_CFA_Easy\.data\.json", r"datasets/FinEval/CFA_Easy/data.json",
                    UNCONFIRMED),
               Rule(r"FinEval_(\w+)\.(data\.json|README\.md)", r"datasets/FinEval/\1/\2"),
               Rule(r"(CFA_Level_III)\.(data\.json|README\.md)", r"datasets/\1/\2")),
        notes=("FinEval_CFA_Easy.data.json is not in the index of the repository; its path is the one the "
               "repository's own documentation gives (datasets/FinEval/CFA_Easy/data.json)",),
    ),
    # The official layout of data that is not public.
    Spec(
        name="cfinbench",
        description="CFinBench: Chinese financial exam questions (single choice, multiple choice, judgment).",
        repository="yanbinwei/CFinBench-Eval", commit=None, licence="Apache-2.0 (evaluation code)",
        layout="{dev,val,test}/{single_choice,multi_choice,judgment}/{1-1..4-11}.jsonl, one object a line "
               "with text, OptionList, Answer",
        local_dir="cfinbench/", available_here=False, homepage="https://cfinbench.github.io/",
        notes=("the questions are not public: obtain them from the CFinBench project and put them under "
               "<data dir>/cfinbench/ in the layout above",),
    ),
    Spec(
        name="bizbench",
        description="BizBench: financial program synthesis, quantity extraction and domain knowledge "
                    "(test 4.6 MB, train 19.1 MB).",
        repository="kensho/bizbench", commit=BIZBENCH_COMMIT, licence="Apache-2.0 (dataset card)",
        layout="Hugging Face dataset kensho/bizbench: data/{train,test}-00000-of-00001-*.parquet with columns "
               "question, answer, task, context, context_type, options, program",
        local_dir="bizbench/", include=None, host="huggingface",
        homepage="https://huggingface.co/datasets/kensho/bizbench",
        remote=(Remote("data/test-00000-of-00001-7b139510152259c8.parquet"),
                Remote("data/train-00000-of-00001-300a28d2e31daec3.parquet")),
        notes=("commit 18e0759 uploaded the test parquet after 55f40a7 uploaded the train parquet; the Hub's "
               "listing of data/ on main names 18e0759 as the last change, so main holds the same two files",
               "size and sha256 are recorded in the lock after the first download, checked against the LFS "
               "sha256 the Hub sends for the commit"),
    ),
    Spec(
        name="finqa",
        description="FinQA: numerical reasoning over financial reports (questions with gold programs).",
        repository="czyssrs/FinQA", commit=FINQA_COMMIT, licence="MIT",
        layout="dataset/{train,dev,test}.json: [{pre_text, post_text, table, id, qa: {question, program, "
               "exe_ans, gold_inds, ...}}]",
        local_dir="finqa/", include=None, homepage="https://github.com/czyssrs/FinQA",
        remote=(Remote("dataset/dev.json", git_blob="970f239f591c782b17df420c0d343b780737f3da"),
                Remote("dataset/test.json", git_blob="59958c7c3bb3b21f4dff6bc912a0fe0ae710aee0"),
                Remote("dataset/train.json", git_blob="a6c2c5a60f9abe3fba5a793cc4d9e1dee2e09209")),
        notes=("size and sha256 are recorded in the lock after the first download, checked against the git "
               "blob id in the tree of the commit",
               "dataset/private_test.json (questions without answers) is left out"),
    ),
    Spec(
        name="convfinqa",
        description="ConvFinQA: conversational numerical reasoning over financial reports.",
        repository="czyssrs/ConvFinQA", commit=CONVFINQA_COMMIT, licence="MIT",
        layout="data.zip upstream, unpacked beside it under the names it holds; per the README: conversation-"
               "level {train,dev,test}.json (pre_text, post_text, table, id, annotation, qa) and turn-level "
               "{train,dev,test}_turn.json (one record per turn)",
        local_dir="convfinqa/", include=r"LICENSE", rules=(Rule(r"LICENSE", r"LICENSE"),),
        homepage="https://github.com/czyssrs/ConvFinQA",
        remote=(Remote("data.zip", git_blob="bde03381e2d9ef0043796f2722f7a87633887358", unpack="zip"),),
        notes=("size and sha256 of data.zip are recorded in the lock after the first download, checked against "
               "the git blob id in the tree of the commit; its members are unpacked beside it and recorded too",),
    ),
    Spec(
        name="financebench",
        description="FinanceBench's open sample: 150 annotated questions over public companies' filings, the "
                    "document list, and the cited filings as PDFs.",
        repository="patronus-ai/financebench", commit=FINANCEBENCH_COMMIT, licence="none stated",
        layout="data/financebench_open_source.jsonl (financebench_id, question, answer, justification, "
               "question_type, question_reasoning, doc_name, evidence [{evidence_text, doc_name, evidence_page_num "
               "(0-based), evidence_text_full_page}]); data/financebench_document_information.jsonl (doc_name, "
               "doc_type, doc_period, doc_link, gics_sector); pdfs/DOC_NAME.pdf",
        local_dir="financebench/", include=r"(?!results/).*",
        rules=(Rule(r"README\.upstream\.md", r"README.md"), Rule(r"(data|pdfs)/.*", r"\g<0>")),
        remote=tuple(Remote(f"pdfs/{doc}.pdf", git_blob=blob) for doc, blob in FINANCEBENCH_ABSENT_PDFS),
        notes=("cite the paper (arXiv 2311.11944); the repository states no licence",
               "10 of the 84 filings the sample cites are not in the shared copy; they are registered at the commit "
               "by their git blob ids and pulled on demand (see `finharness financebench documents`)",
               "the upstream pdfs/ folder holds 368 filings; only the 84 the open sample cites are registered"),
    ),
    Spec(
        name="financebench-results",
        description="FinanceBench's released model answers (GPT-4-Turbo, GPT-4, Claude 2, Llama 2) under the "
                    "paper's configurations, each row labelled by a human.",
        repository="patronus-ai/financebench", commit=FINANCEBENCH_COMMIT, licence="none stated",
        layout="results/MODEL_MODE.jsonl: financebench_id, model_name, eval_mode (closedBook, oracle, "
               "oracle_reverse, inContext, inContext_reverse, singleStore, sharedStore), temp, question, gold_answer, "
               "model_answer, label (Correct Answer | Incorrect Answer | Refusal); 150 rows each",
        local_dir="financebench/", include=r"results/.*", rules=(Rule(r"results/.*", r"\g<0>"),),
        remote=tuple(Remote(f"results/{name}.jsonl", git_blob=blob) for name, blob in FINANCEBENCH_HELD_RESULTS),
        notes=("8 of the 16 released files are in the shared copy; the other 8 are registered at the commit by "
               "their git blob ids",),
    ),
)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def raw_url(repository: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repository}/{commit}/{path}"


def hub_url(repository: str, commit: str, path: str) -> str:
    """The Hub's resolve URL of a dataset file (what huggingface_hub asks for)."""
    return f"https://huggingface.co/datasets/{repository}/resolve/{commit}/{path}"


def remote_entry(spec: Spec, remote: Remote) -> dict:
    """A file no local copy holds: its URL at the commit and what verifies it, size and sha256 left to the lock."""
    url = (hub_url if spec.host == "huggingface" else raw_url)(spec.repository, spec.commit, remote.path)
    entry: dict = {"path": remote.path, "size": None, "sha256": None, "upstream_path": remote.path, "url": url}
    if remote.git_blob:
        entry["git_blob"] = remote.git_blob
    if remote.unpack:
        entry["unpack"] = remote.unpack
    return entry


def file_entry(spec: Spec, root: Path, rel: str) -> dict:
    """One file of a dataset: size, sha256, and where it comes from upstream."""
    local = root / spec.local_dir / rel
    entry: dict = {"path": rel, "size": local.stat().st_size, "sha256": sha256_of(local),
                   "upstream_path": None, "url": None}
    for rule in spec.rules:
        if not re.fullmatch(rule.pattern, rel):
            continue
        mapped = re.sub(rf"^(?:{rule.pattern})$", rule.template, rel) if rule.template else None
        if rule.status == CONFIRMED:
            entry["upstream_path"] = mapped
            entry["url"] = raw_url(spec.repository, spec.commit, mapped)
        elif rule.status == UNCONFIRMED:
            entry["unconfirmed_path"] = mapped
        else:
            entry["derived"] = True
            if mapped:
                entry["derived_from"] = mapped
        return entry
    raise SystemExit(f"{spec.name}: no rule maps {rel}")


def build(root: Path) -> tuple[dict, list[str]]:
    """The registry document and the local files no dataset claims."""
    claimed: set[str] = set()
    datasets = []
    for spec in DATASETS:
        files = [remote_entry(spec, remote) for remote in spec.remote]
        folder = root / spec.local_dir
        if spec.available_here and spec.include is not None:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                rel = path.relative_to(folder).as_posix()
                if re.fullmatch(spec.include, rel):
                    full = spec.local_dir + rel
                    if full in claimed:
                        raise SystemExit(f"{full} is claimed by two datasets")
                    claimed.add(full)
                    files.append(file_entry(spec, root, rel))
            if len(files) == len(spec.remote):
                raise SystemExit(f"{spec.name}: no files under {folder}")
        files.sort(key=lambda f: f["path"])
        datasets.append({
            "name": spec.name, "description": spec.description, "available_here": spec.available_here,
            "repository": spec.repository, "commit": spec.commit, "licence": spec.licence,
            "layout": spec.layout, "local_dir": spec.local_dir, "homepage": spec.homepage,
            "notes": list(spec.notes), "files": files,
        })
        if spec.host != "github":
            datasets[-1]["host"] = spec.host
    every = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    return {"schema": SCHEMA_VERSION, "datasets": datasets}, sorted(every - claimed - IGNORED)


def render(document: dict) -> str:
    """Indented JSON with one line per file: readable diffs, a small file."""
    parts = ['{\n "schema": %d,\n "datasets": [\n' % document["schema"]]
    for i, ds in enumerate(document["datasets"]):
        head = {k: v for k, v in ds.items() if k != "files"}
        lines = [f'   "{k}": {json.dumps(v, ensure_ascii=False)}' for k, v in head.items()]
        files = ",\n".join("    " + json.dumps(f, ensure_ascii=False) for f in ds["files"])
        lines.append('   "files": [' + (f"\n{files}\n   ]" if files else "]"))
        parts.append("  {\n" + ",\n".join(lines) + "\n  }" + ("," if i < len(document["datasets"]) - 1 else "")
                     + "\n")
    parts.append(" ]\n}\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    if not root.is_dir():
        print(f"{root}: not a directory", file=sys.stderr)
        return 2
    document, unclaimed = build(root)
    if unclaimed:
        print("files under DATA_ROOT that no dataset claims (add them to a dataset or to IGNORED):",
              *unclaimed, sep="\n  ", file=sys.stderr)
        return 1
    text = render(document)
    json.loads(text)  # the hand-rendered JSON must parse
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
