"""BizBench (Kensho, arXiv 2311.06602): the data side.

- `data`      the official columns as `BizBenchItem`, task names, JSONL read/write
- `official`  the `kensho/bizbench` parquet from a local copy
- `secnum`    SEC-Num built from inline-XBRL filings (`finharness data build secnum`)
- `tatqa`     CodeTAT-QA (gold programs over a DataFrame) and TAT-QA(E) from TAT-QA
- `cli`       `finharness data build secnum / tatqa` (mounted by the BENCHMARK declaration)

Names are loaded on first use so that importing the CLI does not import pandas.
"""

from __future__ import annotations

from finharness.util import lazy_exports

from ..declaration import Benchmark

_EXPORTS = {
    "BizBenchItem": "data",
    "DATASET_TASK_NAMES": "data",
    "harness_task_name": "data",
    "read_items_jsonl": "data",
    "write_items_jsonl": "data",
    "load_official": "official",
    "build_secnum": "secnum",
    "build_secnum_detailed": "secnum",
    "build_codetatqa": "tatqa",
    "build_tatqa_e": "tatqa",
    "build_tatqa_tasks": "tatqa",
    "table_frame": "tatqa",
    "gold_program": "tatqa",
    "evaluate_gold_program": "tatqa",
}

__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)

BENCHMARK = Benchmark(
    name="bizbench", suite_rows="finharness.benchmarks.bizbench:suites.toml", display="BizBench",
    tasks={"bizbench/codetatqa": "finharness.benchmarks.bizbench.task:CodeTatqaTask",
           "bizbench/tatqa-e": "finharness.benchmarks.bizbench.task:TatqaETask",
           "bizbench/secnum": "finharness.benchmarks.bizbench.task:SecNumTask",
           "bizbench/fincode": "finharness.benchmarks.bizbench.task:FinCodeTask",
           "bizbench/codefinqa": "finharness.benchmarks.bizbench.task:CodeFinQATask",
           "bizbench/convfinqa-e": "finharness.benchmarks.bizbench.task:ConvFinQAETask",
           "bizbench/finknow": "finharness.benchmarks.bizbench.finknow:FinKnowTask",
           "bizbench/formulaeval": "finharness.benchmarks.bizbench.formulaeval.task:FormulaEvalTask"},
    commands={"data.build.secnum": "finharness.benchmarks.bizbench.cli:secnum_command",
              "data.build.tatqa": "finharness.benchmarks.bizbench.cli:tatqa_command"},
    report_section="finharness.benchmarks.bizbench.report:SECTION",
    datasets=("bizbench", "bizbench-prompts", "tatqa", "finqa", "finqa-meta", "convfinqa", "cfa-essay",
              "fintradebench-sec-filings"),
    hooks="finharness.benchmarks.bizbench.suite_hooks:HOOKS")
