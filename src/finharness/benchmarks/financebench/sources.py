"""Where FinanceBench's datasets come from: one Spec per dataset (data/source_spec.py says each field), read by
tools/make_sources.py, which hashes a local copy of the official data into sources.json beside this file (the
entries `finharness data` lists and pulls). Never imported at run time."""

from __future__ import annotations

from ...data.source_spec import Remote, Rule, Spec

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
