"""BizBench (Kensho, arXiv 2311.06602): the data side.

- `data`      the official columns as `BizBenchItem`, task names, JSONL read/write
- `official`  the `kensho/bizbench` parquet from a local copy
- `secnum`    SEC-Num built from inline-XBRL filings (`finharness data build secnum`)
- `tatqa`     CodeTAT-QA (gold programs over a DataFrame) and TAT-QA(E) from TAT-QA
- `cli`       `finharness data build secnum / tatqa` (mounted by benchmarks/extensions.py)

Names are loaded on first use so that importing the CLI does not import pandas.
"""

from __future__ import annotations

from finharness.util import lazy_exports

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
