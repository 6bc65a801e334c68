"""BizBench items in the official layout, the task names, and the JSONL files the builders write.

The official dataset (`kensho/bizbench` parquet) has the columns question, answer, task, context,
context_type, options, program; `answer` is a string (a number for every numeric task, a letter for
FinKnow). Items built here from local sources (SEC-Num, CodeTAT-QA, TAT-QA(E)) use the same
columns plus `id`, `split` and `metadata`, so one reader serves both.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ...data.errors import DataError
from ...data.io import iter_jsonl

BIZBENCH_COLUMNS = ("question", "answer", "task", "context", "context_type", "options", "program")
"""The columns of the official parquet, in its order."""

DATASET_TASK_NAMES: dict[str, str] = {
    "fincode": "FinCode",
    "codefinqa": "CodeFinQA",
    "codetatqa": "CodeTAT-QA",
    "secnum": "SEC-NUM",
    "tatqa-e": "TAT-QA",
    "convfinqa-e": "ConvFinQA",
    "finknow": "FinKnow",
    "formulaeval": "FormulaEval",
}
"""finharness task name -> the `task` value in the official data (spellings as in the official
pipeline's config.py; SEC-Num's is written 'SEC-NUM' here and matched in any spelling)."""

_SPELLING_TO_HARNESS = {re.sub(r"[^a-z0-9]", "", dataset.lower()): harness
                        for harness, dataset in DATASET_TASK_NAMES.items()}
_SPELLING_TO_HARNESS.update({"tatqae": "tatqa-e", "convfinqae": "convfinqa-e", "tatqaextract": "tatqa-e",
                             "convfinqaextract": "convfinqa-e"})


def harness_task_name(dataset_task: str) -> str | None:
    """The finharness name of a dataset task, in any spelling ('SEC-Num', 'SEC-NUM', 'CodeTATQA',
    'TAT-QA (E)'); None when unknown."""
    return _SPELLING_TO_HARNESS.get(re.sub(r"[^a-z0-9]", "", str(dataset_task).lower()))


@dataclass(frozen=True)
class BizBenchItem:
    """One BizBench question in the official columns, with an id and split."""

    id: str
    """Stable id: the TAT-QA question uid for TAT-QA tasks, 'secnum/TICKER/ACCESSION/ELEMENT' for SEC-Num,
    'bizbench/SPLIT/TASK/N' for rows of the official parquet."""

    question: str
    """The question as the model sees it (a scale note such as '(million)' included)."""

    answer: str
    """The gold answer as a string, as in the official parquet (a number for numeric tasks)."""

    task: str
    """The finharness task name ('codetatqa', 'tatqa-e', 'secnum', ...)."""

    context: str | None = None
    """The document context (text and markdown tables), if any."""

    context_type: str | None = None
    """The official context_type ('string' for text/markdown contexts)."""

    options: tuple[str, ...] | None = None
    """Multiple-choice options (FinKnow), else None."""

    program: str | None = None
    """The gold Python program (program-synthesis tasks), else None."""

    split: str = "test"
    """'train' or 'test' (for TAT-QA tasks: 'test' = TAT-QA test_gold, 'dev' = TAT-QA dev)."""

    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Where the item came from and how it was built (source file, scale, table, concept...)."""

    @property
    def gold_number(self) -> float | None:
        """The answer as a float (None when it is not a number, e.g. a FinKnow letter)."""
        try:
            value = float(self.answer)
        except (TypeError, ValueError):
            return None
        return value if math.isfinite(value) else None

    def to_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["task"] = DATASET_TASK_NAMES.get(self.task, self.task)  # files carry the dataset's name
        row["options"] = list(self.options) if self.options is not None else None
        return row


def format_answer(value: float) -> str:
    """A number as the answer string: integers without '.0', others as Python's shortest repr."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def write_items_jsonl(items: Iterable[BizBenchItem], path: str | Path) -> int:
    """Write items one JSON object per line (dataset task names); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item.to_json(), ensure_ascii=False) + "\n")
            count += 1
    return count


_REQUIRED_JSONL = ("id", "question", "answer", "task")


def read_items_jsonl(path: str | Path, tasks: Sequence[str] | None = None) -> list[BizBenchItem]:
    """Read a JSONL written by `write_items_jsonl` (or by hand in the same columns).

    A missing column or an unknown task name is a DataError naming the file and line."""
    items = []
    for line, row in iter_jsonl(path):
        missing = [key for key in _REQUIRED_JSONL if key not in row]
        if missing:
            raise DataError(f"missing field(s) {missing}; a BizBench JSONL row needs "
                            f"{', '.join(_REQUIRED_JSONL)}", path=path, line=line)
        task = harness_task_name(row["task"])
        if task is None:
            raise DataError(f"unknown BizBench task {row['task']!r}",
                            path=path, line=line, hint=f"use one of {sorted(DATASET_TASK_NAMES.values())}")
        if tasks is not None and task not in tasks:
            continue
        options = row.get("options")
        items.append(BizBenchItem(
            id=str(row["id"]), question=str(row["question"]), answer=str(row["answer"]), task=task,
            context=row.get("context"), context_type=row.get("context_type"),
            options=tuple(options) if options is not None else None, program=row.get("program"),
            split=str(row.get("split", "test")), metadata=row.get("metadata") or {}))
    return items
