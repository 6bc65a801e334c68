"""Where BizBench's datasets come from: one Spec per dataset (data/source_spec.py says each field), read by
tools/make_sources.py, which hashes a local copy of the official data into sources.json beside this file (the
entries `finharness data` lists and pulls). Never imported at run time."""

from __future__ import annotations

from ...data.source_spec import UNCONFIRMED, Remote, Rule, Spec

# Full commit ids read from the git log of each repository (FinQA, ConvFinQA) and from the Hub's pages of
# kensho/bizbench (its tree at this commit holds both parquet files).
FINQA_COMMIT = "0f16e2867befa6840783e58be38c9efb9229d742"

CONVFINQA_COMMIT = "cf3eed2d5984960bf06bb8145bcea5e80b0222a6"

BIZBENCH_COMMIT = "18e0759221aa73e75831472ba04cbe83fa82e45a"

DATASETS: tuple[Spec, ...] = (
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
)
