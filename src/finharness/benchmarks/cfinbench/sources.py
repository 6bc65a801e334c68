"""Where CFinBench's datasets come from: one Spec per dataset (data/source_spec.py says each field), read by
tools/make_sources.py, which hashes a local copy of the official data into sources.json beside this file (the
entries `finharness data` lists and pulls). Never imported at run time."""

from __future__ import annotations

from ...data.source_spec import DERIVED, UNCONFIRMED, Rule, Spec

IDEA_UNCONFIRMED = (r"cfa_l2/subject_mapping\.json|cpa_multi/subject_mapping\.json"
                    r"|cpa_multi/test/(auditing|economic_law|strategy|tax_law)_test\.csv"
                    r"|cpa_one/test/(accounting|economic_law|financial_management|strategy)_test\.csv")

DATASETS: tuple[Spec, ...] = (
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
        name="cfinbench",
        description="CFinBench: Chinese financial exam questions (single choice, multiple choice, judgment).",
        repository="yanbinwei/CFinBench-Eval", commit=None, licence="Apache-2.0 (evaluation code)",
        layout="{dev,val,test}/{single_choice,multi_choice,judgment}/{1-1..4-11}.jsonl, one object a line "
               "with text, OptionList, Answer",
        local_dir="cfinbench/", available_here=False, homepage="https://cfinbench.github.io/",
        notes=("the questions are not public: obtain them from the CFinBench project and put them under "
               "<data dir>/cfinbench/ in the layout above",),
    ),
)
