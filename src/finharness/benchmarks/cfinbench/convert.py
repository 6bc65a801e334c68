"""Convert IDEAFinBench's CPA exams into the CFinBench layout, so they run through this task.

Source layout (IDEA-FinAI/IDEAFinBench): `cpa_one/` (single choice) and `cpa_multi/` (multiple
choice, answers like 'A,B,D'), each with `{dev,val,test}/{subject}_{split}.csv` files
(`id,question,A,B,C,D,answer[,explanation]`; test has no `answer`) and `subject_mapping.json`
(`subject: [english, chinese, english]`).

Result: `DEST/{split}/{single_choice|multi_choice}/{subject}.jsonl` with `text`, `OptionList`
('A. …', empty options left out), `Answer` ('ABD'), `explanation` when present, and the source
`id`; plus `DEST/categories.json` naming each subject in Chinese (the prompt's `{}`), group 'CPA'.
Fully blank CSV rows (a few in the source) are skipped and counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...data.errors import DataError
from ...data.io import read_csv_rows, read_json, write_jsonl
from .categories import CATEGORIES_FILE

SOURCES: dict[str, str] = {"cpa_one": "single_choice", "cpa_multi": "multi_choice"}
"""IDEAFinBench folder -> CFinBench question type."""

SPLITS: tuple[str, ...] = ("dev", "val", "test")
OPTION_COLUMNS: tuple[str, ...] = ("A", "B", "C", "D")
GROUP = "CPA"
"""First-level group given to every converted subject."""


@dataclass(frozen=True)
class ConversionSummary:
    """What a conversion wrote."""

    dest: str
    """The CFinBench-layout root that was written."""

    counts: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    """counts[split][type][subject] = items written."""

    skipped_blank_rows: int = 0
    """Source rows with every field empty (not questions)."""

    files: tuple[str, ...] = ()
    """Every file written, relative to dest."""

    def total(self, split: str, question_type: str | None = None) -> int:
        by_type = self.counts.get(split, {})
        return sum(sum(subjects.values()) for t, subjects in by_type.items()
                   if question_type is None or t == question_type)

    def to_json(self) -> dict[str, Any]:
        return {"dest": self.dest, "counts": self.counts, "skipped_blank_rows": self.skipped_blank_rows,
                "files": list(self.files)}


def _source_folders(src: Path) -> dict[str, Path]:
    if src.name in SOURCES:
        return {src.name: src}
    found = {name: src / name for name in SOURCES if (src / name).is_dir()}
    if not found:
        raise DataError(f"no {' or '.join(SOURCES)} folder", path=src,
                        hint="pass the IDEAFinBench folder or one of its cpa_one / cpa_multi folders")
    return found


def _answer(raw: str, letters: set[str], path: Path, line: int) -> str:
    answer = "".join(re.findall(r"[A-Z]", raw.upper()))
    if not answer or re.sub(r"[A-Z,，、\s]", "", raw.upper()):
        raise DataError(f"answer {raw!r} is not option letters like 'B' or 'A,B,D'", path=path, line=line)
    if set(answer) - letters:
        raise DataError(f"answer {raw!r} names an empty or missing option", path=path, line=line)
    return answer


def _convert_file(path: Path, question_type: str, split: str) -> tuple[list[dict[str, Any]], int]:
    required = ("question", *OPTION_COLUMNS) + (("answer",) if split != "test" else ())
    items, blank = [], 0
    for line, row in read_csv_rows(path, required=required):
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            blank += 1
            continue
        question = (row["question"] or "").strip()
        if not question:
            raise DataError("empty question", path=path, line=line)
        options = [f"{letter}. {row[letter].strip()}" for letter in OPTION_COLUMNS if (row[letter] or "").strip()]
        item: dict[str, Any] = {"id": row.get("id"), "text": question, "OptionList": options}
        if (row.get("answer") or "").strip():
            item["Answer"] = _answer(row["answer"], {o[0] for o in options}, path, line)
        elif split != "test":
            raise DataError("empty answer", path=path, line=line)
        if question_type == "single_choice" and len(item.get("Answer", "X")) != 1:
            raise DataError(f"single-choice answer {row['answer']!r} has several letters", path=path, line=line)
        if (row.get("explanation") or "").strip():
            item["explanation"] = row["explanation"].strip()
        items.append(item)
    return items, blank


def _subject_names(folder: Path) -> dict[str, str]:
    """subject -> Chinese name from subject_mapping.json ({} when absent)."""
    path = folder / "subject_mapping.json"
    if not path.exists():
        return {}
    mapping = read_json(path)
    return {subject: names[1] for subject, names in mapping.items()
            if isinstance(names, list) and len(names) > 1 and isinstance(names[1], str)}


def convert_ideafinbench(src: str | Path, dest: str | Path) -> ConversionSummary:
    """Write DEST in the CFinBench layout from IDEAFinBench's cpa_one / cpa_multi CSV files."""
    src, dest = Path(src), Path(dest)
    counts: dict[str, dict[str, dict[str, int]]] = {}
    names: dict[str, str] = {}
    written: list[str] = []
    blank_rows = 0
    for source_name, folder in _source_folders(src).items():
        question_type = SOURCES[source_name]
        names.update(_subject_names(folder))
        for split in SPLITS:
            for path in sorted((folder / split).glob(f"*_{split}.csv")):
                subject = path.stem[: -len(f"_{split}")]
                items, blank = _convert_file(path, question_type, split)
                blank_rows += blank
                out = dest / split / question_type / f"{subject}.jsonl"
                write_jsonl(out, items)
                written.append(str(out.relative_to(dest)))
                counts.setdefault(split, {}).setdefault(question_type, {})[subject] = len(items)
                names.setdefault(subject, subject)
    if not written:
        raise DataError("no {split}/*_{split}.csv files found", path=src, hint="expected IDEAFinBench's layout")
    categories = {"_source": f"converted from IDEAFinBench ({src.name})",
                  **{subject: {"zh": zh, "en": subject, "group": GROUP, "group_name": "CPA (IDEAFinBench)"}
                     for subject, zh in sorted(names.items())}}
    (dest / CATEGORIES_FILE).write_text(json.dumps(categories, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    written.append(CATEGORIES_FILE)
    return ConversionSummary(str(dest), counts, blank_rows, tuple(written))
