"""The official BizBench data (`kensho/bizbench` on the Hugging Face hub), read from a local copy
(`finharness data pull bizbench` puts it in DATA_DIR/bizbench/data/, the layout below).

Layout: parquet with the columns question, answer (string), task, context, context_type, options
(list of strings), program; a train and a test split, published as
`data/train-00000-of-00001-<hash>.parquet` and `data/test-00000-of-00001-<hash>.parquet`.
`load_official(path)` takes one parquet file (split from its name, or given) or a folder holding
both (searched recursively), or a `datasets.save_to_disk` folder when `datasets` is installed.

Task names are mapped to finharness names in any spelling (`data.harness_task_name`); rows of
tasks this harness does not know are skipped and counted, never guessed. Ids are
'bizbench/SPLIT/TASK/N', N counting that task's rows in file order, so they are stable for a
given file. Errors name the file and row, and say what to do.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ...data.errors import DataError
from .data import BIZBENCH_COLUMNS, BizBenchItem, harness_task_name

REQUIRED_COLUMNS = ("question", "answer", "task")
"""Columns without which a row cannot be used; the others default to None."""

SPLITS = ("train", "test")


@dataclass(frozen=True)
class OfficialLoad:
    """What was read from the official files."""

    items: list[BizBenchItem]
    """Rows of known tasks, in file order (train before test)."""

    files: tuple[Path, ...]
    """The files read."""

    unknown_tasks: Counter = field(default_factory=Counter)
    """Task names this harness does not know -> rows skipped."""

    def counts(self) -> dict[str, dict[str, int]]:
        """split -> task -> rows."""
        table: dict[str, Counter] = {}
        for item in self.items:
            table.setdefault(item.split, Counter())[item.task] += 1
        return {split: dict(counter) for split, counter in table.items()}


_SPLIT_IN_NAME = re.compile(r"(?:^|[_\-.])(train|test)(?:[_\-.]|$)")


def _split_of(path: Path) -> str | None:
    """'train-00000-of-00001-x.parquet' -> 'train'; 'bizbench_test.parquet' -> 'test'."""
    match = _SPLIT_IN_NAME.search(path.name.lower())
    return match.group(1) if match else None


def _parquet_splits(folder: Path) -> list[tuple[Path, str]]:
    pairs = ((file, _split_of(file)) for file in sorted(folder.rglob("*.parquet")))
    return [(file, split) for file, split in pairs if split is not None]


def has_official_files(folder: str | Path) -> bool:
    """Whether `folder` holds a train-*.parquet or test-*.parquet (what `find_official_files` reads)."""
    return Path(folder).is_dir() and bool(_parquet_splits(Path(folder)))


def find_official_files(path: str | Path) -> list[tuple[Path, str]]:
    """(file, split) pairs under a folder, or the one file given."""
    root = Path(path)
    if root.is_file():
        split = _split_of(root)
        if split is None:
            raise DataError("cannot tell the split from the file name", path=root,
                            hint="name it train-*.parquet / test-*.parquet, or pass split='test'")
        return [(root, split)]
    if not root.is_dir():
        raise DataError("not found", path=root, hint="give the kensho/bizbench parquet file or its folder")
    found = _parquet_splits(root)
    if not found:
        raise DataError("no train-*.parquet or test-*.parquet here", path=root,
                        hint="`finharness data pull bizbench`, or give a parquet file")
    return sorted(found, key=lambda pair: (SPLITS.index(pair[1]), str(pair[0])))


def _read_parquet_rows(path: Path) -> tuple[list[str], list[dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency; pandas may still have fastparquet
        try:
            import pandas as pd

            frame = pd.read_parquet(path)
        except ImportError:
            raise DataError("reading parquet needs pyarrow", path=path, hint="pip install pyarrow") from None
        return list(frame.columns), frame.to_dict(orient="records")
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises ArrowInvalid / OSError for damaged files
        raise DataError(f"not a readable parquet file: {err}", path=path,
                        hint="re-download the file; it may be truncated") from None
    return list(table.column_names), table.to_pylist()


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def _options(value: Any, path: Path, row: int) -> tuple[str, ...] | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise DataError(f"row {row}: options must be a list of strings, got {type(value).__name__}", path=path,
                        line=row, hint="the official column is a sequence of strings")
    return tuple(str(option) for option in value)


def items_from_rows(columns: Sequence[str], rows: Iterable[dict[str, Any]], path: Path, split: str,
                    unknown: Counter, tasks: Sequence[str] | None = None) -> list[BizBenchItem]:
    """Validate official rows and turn them into items (row numbers are 1-based in errors)."""
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise DataError(f"missing column(s) {missing}; found {list(columns)}", path=path,
                        hint=f"the official BizBench parquet has {', '.join(BIZBENCH_COLUMNS)}")
    per_task: Counter = Counter()
    items = []
    for number, row in enumerate(rows, start=1):
        raw_task = _text(row.get("task"))
        task = harness_task_name(raw_task or "")
        if task is None:
            unknown[raw_task or "<empty>"] += 1
            continue
        if tasks is not None and task not in tasks:
            continue
        question, answer = _text(row.get("question")), _text(row.get("answer"))
        if question is None or answer is None:
            raise DataError(f"row {number}: empty {'question' if question is None else 'answer'}", path=path,
                            line=number, hint="every BizBench row needs a question and an answer")
        context = _text(row.get("context"))
        items.append(BizBenchItem(
            id=f"bizbench/{split}/{task}/{per_task[task]}", question=question, answer=answer, task=task,
            context=context, context_type=_text(row.get("context_type")),
            options=_options(row.get("options"), path, number), program=_text(row.get("program")), split=split,
            metadata={"source": path.name, "row": number, "dataset_task": raw_task,
                      "content_sha1": hashlib.sha1(f"{question}\x00{context or ''}".encode()).hexdigest()[:12]}))
        per_task[task] += 1
    return items


def _load_from_disk(root: Path, tasks: Sequence[str] | None) -> OfficialLoad:
    try:
        import datasets  # type: ignore[import-not-found]
    except ImportError:
        raise DataError("this is a `datasets.save_to_disk` folder, and `datasets` is not installed", path=root,
                        hint="pip install datasets, or give the parquet files instead") from None
    loaded = datasets.load_from_disk(str(root))
    unknown: Counter = Counter()
    items = []
    for split in SPLITS:
        if split in loaded:
            part = loaded[split]
            items += items_from_rows(part.column_names, iter(part), root / split, split, unknown, tasks)
    return OfficialLoad(items=items, files=(root,), unknown_tasks=unknown)


def load_official(path: str | Path, *, split: str | None = None,
                  tasks: Sequence[str] | None = None) -> OfficialLoad:
    """Read the official BizBench parquet(s); `tasks` keeps only those finharness task names."""
    root = Path(path)
    if root.is_dir() and (root / "dataset_dict.json").exists():
        return _load_from_disk(root, tasks)
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    pairs = [(root, split)] if (split is not None and root.is_file()) else find_official_files(root)
    unknown: Counter = Counter()
    items: list[BizBenchItem] = []
    for file, file_split in pairs:
        columns, rows = _read_parquet_rows(file)
        items += items_from_rows(columns, rows, file, file_split, unknown, tasks)  # type: ignore[arg-type]
    return OfficialLoad(items=items, files=tuple(file for file, _ in pairs), unknown_tasks=unknown)
