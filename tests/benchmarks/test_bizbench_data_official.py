"""The official kensho/bizbench parquet loader, tested on small files written in that layout."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa  # a core dependency: never skipped
import pyarrow.parquet as pq
import pytest

from finharness.benchmarks.bizbench.data import BizBenchItem, harness_task_name, read_items_jsonl, write_items_jsonl
from finharness.benchmarks.bizbench.official import load_official
from finharness.data.errors import DataError  # noqa: E402

ROWS = [
    {"question": "What is the value? (million)", "answer": "29423", "task": "TAT-QA", "context": "| a | 29,423 |",
     "context_type": "string", "options": None, "program": None},
    {"question": "Compute the ratio", "answer": "0.5", "task": "CodeTAT-QA", "context": "| x | 1 |",
     "context_type": "string", "options": None, "program": "a = 1\nb = 2\na / b"},
    {"question": "Which is an asset?", "answer": "B", "task": "FinKnow", "context": None, "context_type": None,
     "options": ["Revenue", "Cash", "Expense", "Dividend"], "program": None},
    {"question": "Net income", "answer": "93736", "task": "SEC-Num", "context": "Net income | $93,736",
     "context_type": "string", "options": None, "program": None},
    {"question": "Something new", "answer": "1", "task": "NewTask", "context": None, "context_type": None,
     "options": None, "program": None},
    {"question": "Compute more", "answer": "2.0", "task": "CodeTAT-QA", "context": "| y | 2 |",
     "context_type": "string", "options": None, "program": "2.0"},
]


def _write(path: Path, rows: list[dict], drop: tuple[str, ...] = ()) -> Path:
    columns = {key: [row[key] for row in rows] for key in rows[0] if key not in drop}
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def test_folder_with_train_and_test(tmp_path):
    _write(tmp_path / "data" / "train-00000-of-00001-aaaa.parquet", ROWS[:2])
    _write(tmp_path / "data" / "test-00000-of-00001-bbbb.parquet", ROWS)
    load = load_official(tmp_path)
    assert [f.name.split("-")[0] for f in load.files] == ["train", "test"]
    assert load.counts() == {"train": {"tatqa-e": 1, "codetatqa": 1},
                             "test": {"tatqa-e": 1, "codetatqa": 2, "finknow": 1, "secnum": 1}}
    assert dict(load.unknown_tasks) == {"NewTask": 1}
    test_items = [i for i in load.items if i.split == "test"]
    assert [i.id for i in test_items if i.task == "codetatqa"] == ["bizbench/test/codetatqa/0",
                                                                   "bizbench/test/codetatqa/1"]
    finknow = next(i for i in test_items if i.task == "finknow")
    assert finknow.options == ("Revenue", "Cash", "Expense", "Dividend") and finknow.gold_number is None
    codetatqa = test_items[1]
    assert codetatqa.program.endswith("a / b") and codetatqa.gold_number == 0.5
    assert codetatqa.metadata["row"] == 2 and codetatqa.metadata["dataset_task"] == "CodeTAT-QA"


def test_single_file_and_task_filter(tmp_path):
    path = _write(tmp_path / "bizbench_test.parquet", ROWS)
    load = load_official(path, tasks=["secnum"])
    assert [i.task for i in load.items] == ["secnum"] and load.items[0].split == "test"
    unnamed = _write(tmp_path / "bizbench.parquet", ROWS)
    with pytest.raises(DataError, match="split"):
        load_official(unnamed)
    assert len(load_official(unnamed, split="train").items) == 5


def test_missing_column_names_the_file(tmp_path):
    path = _write(tmp_path / "test.parquet", ROWS, drop=("answer",))
    with pytest.raises(DataError) as info:
        load_official(path)
    assert str(path) in str(info.value) and "answer" in str(info.value)


def test_empty_answer_names_the_row(tmp_path):
    rows = [dict(ROWS[0]), dict(ROWS[1], answer=None)]
    path = _write(tmp_path / "test.parquet", rows)
    with pytest.raises(DataError) as info:
        load_official(path)
    assert info.value.line == 2 and "empty answer" in str(info.value)


def test_no_parquet_and_damaged_parquet(tmp_path):
    with pytest.raises(DataError, match="no train"):
        load_official(tmp_path)
    damaged = tmp_path / "test-0.parquet"
    damaged.write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match="parquet"):
        load_official(damaged)


@pytest.mark.parametrize("spelling, name", [("SEC-Num", "secnum"), ("SEC-NUM", "secnum"), ("CodeTATQA", "codetatqa"),
                                            ("TAT-QA (E)", "tatqa-e"), ("ConvFinQA", "convfinqa-e"),
                                            ("FormulaEval", "formulaeval"), ("Unknown", None)])
def test_task_name_spellings(spelling, name):
    assert harness_task_name(spelling) == name


def test_jsonl_round_trip_and_errors(tmp_path):
    items = [BizBenchItem(id="u1", question="q (million)", answer="1.5", task="tatqa-e", context="c",
                          context_type="string", split="dev", metadata={"scale": "million"})]
    path = tmp_path / "items.jsonl"
    assert write_items_jsonl(items, path) == 1
    assert '"task": "TAT-QA"' in path.read_text(encoding="utf-8")
    assert read_items_jsonl(path) == items
    path.write_text('{"id": "x", "question": "q", "answer": "1", "task": "Nope"}\n', encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_items_jsonl(path)
    assert info.value.line == 1 and "Nope" in str(info.value)
