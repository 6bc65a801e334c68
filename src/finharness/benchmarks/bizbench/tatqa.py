"""CodeTAT-QA and TAT-QA(E): BizBench's two TAT-QA tasks, built from the TAT-QA release.

Source: NExTplusplus/TAT-QA `dataset_raw/tatqa_dataset_{dev,test_gold}.json` (a list of documents,
each with `table.table` (rows of cell strings), `paragraphs` and `questions`). Split 'dev' = the
dev file, split 'test' = test_gold. Item ids are the TAT-QA question `uid`.

Context (both tasks, as in BizBench's TAT-QA prompts): the paragraphs in their `order`, one per
line, then the table as markdown ('| a | b |', '| :--- | :--- |' after the first row, cells as
written). The question gets TAT-QA's scale as a note, '(million)', '(percent)', as in BizBench's
one-shot sample ('What is the 2019 notional amount ...? (million)').

CodeTAT-QA (arithmetic questions answered from the table: answer_type 'arithmetic', answer_from
'table'). The table becomes a pandas DataFrame (`table_frame`):
- header rows = the leading rows that hold no number other than a year; a header row with a single
  non-empty cell spans columns (a title such as 'Year Ended May 31,' or '(in millions)') and names
  no column unless it is the only header row; column name = the remaining header cells of that
  column joined top-down; duplicates are qualified by the title above them, then numbered;
- row label = the first cell; rows with a label and no values are section headings ('Americas:'),
  left out of the frame but used to qualify a label that repeats ('EMEA: Other'); remaining
  duplicates are numbered ('Other (2)'); an empty label becomes 'row N';
- cells: '$ 1,234' -> 1234.0, '(12)' -> -12.0, '−1' -> -1.0, '12%' -> 12.0 (the cell is listed in
  `Table.percent_cells`), '—', '-', '' -> NaN, anything else stays text.
The gold program (`gold_program`) is the derivation ('(44.1-56.7)/56.7') with every number read
from the frame by row and column name, one named variable per cell:
    other_2019 = df.loc["Other", "2019"]
    other_2018 = df.loc["Other", "2018"]
    (other_2019 - other_2018) / other_2018 * 100
A number that several cells hold is read from the cell whose row and column words overlap the
question most. Constants stay literal: 0, and small counts (2..12) or 100/1000 used as a divisor
or factor. '* 100' is appended when the question's scale is percent and the derivation gives the
ratio. The program is run by a restricted evaluator (arithmetic on names, numbers and `df.loc`
lookups, nothing else: the programs are ours, not a model's), and an item is kept only when the
program reproduces the gold answer within 1% (or equals it at the gold's precision). Every drop
is counted by reason: not_arithmetic (the derivation is not a formula), number_not_in_table,
value_mismatch, answer_not_numeric, no_derivation.

TAT-QA(E): span questions (answer_type 'span', one answer, no comparison) whose answer is a single
number ('$1,496.5', '(494)', '12%') that appears verbatim in the context. Answer = that number
(parentheses negative; a percentage as its number, with '(percent)' from the scale).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ...data.errors import DataError
from ...data.hints import pull_hint
from ...data.io import read_json
from ...extract.numbers import parse_number, within_relative
from .data import BizBenchItem, format_answer

SPLIT_FILES = {"dev": "tatqa_dataset_dev.json", "test": "tatqa_dataset_test_gold.json"}
"""Split -> file name in TAT-QA's dataset_raw folder."""

_CURRENCY = re.compile(r"[$€£¥]|\bUS\$|\bRMB\b")
_EMPTY_CELLS = {"", "-", "—", "–", "−", "n/a", "N/A", "NA", "nm", "NM", "*"}
_YEAR = re.compile(r"^(19|20)\d{2}$")

# --- cells and tables ----------------------------------------------------------------------------


def parse_cell(text: str) -> float | str | None:
    """A TAT-QA cell as a number (float), NaN for an empty or dash cell, or the text itself.
    Returns None only for an empty/dash cell (callers store NaN)."""
    stripped = (text or "").strip()
    if stripped in _EMPTY_CELLS:
        return None
    compact = _CURRENCY.sub("", stripped).replace(" ", "")
    compact = re.sub(r"^\((.*)\)%$", r"(\1%)", compact)  # '(66)%' is a negative percentage
    reading = parse_number(compact)
    if reading.parsed and reading.multiplier == 1.0:
        return float(reading.value)  # type: ignore[arg-type]
    return stripped


def _is_percent_cell(text: str) -> bool:
    return "%" in (text or "")


def _is_number_cell(text: str) -> bool:
    return isinstance(parse_cell(text), float)


def _is_year_cell(text: str) -> bool:
    return bool(_YEAR.match((text or "").strip()))


@dataclass(frozen=True)
class Table:
    """A TAT-QA table as a DataFrame with named rows and columns, and how each name was made."""

    frame: Any
    """pandas DataFrame: index = row labels, columns = column names, floats / NaN / text."""

    cells: Mapping[tuple[str, str], str]
    """(row label, column name) -> the cell text as written."""

    percent_cells: frozenset[tuple[str, str]]
    """Cells written with '%' (their number is the percentage, '12%' -> 12.0)."""

    header_rows: int
    """How many leading rows were read as headers."""


def _header_row_count(rows: Sequence[Sequence[str]]) -> int:
    count = 0
    for row in rows:
        data = row[1:]
        if any(_is_number_cell(c) and not _is_year_cell(c) for c in data):
            break
        if not any(c.strip() for c in data) and row and row[0].strip() and count and count < len(rows) - 1:
            # a label with no values after the headers started is a section heading, not a header
            break
        count += 1
    return min(count, len(rows) - 1) if rows else 0


def _unique(names: list[str]) -> list[str]:
    seen: Counter = Counter()
    unique = []
    for name in names:
        seen[name] += 1
        unique.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return unique


def _column_names(header: Sequence[Sequence[str]], width: int) -> list[str]:
    titles, naming = [], []
    for row in header:
        data = [c.strip() for c in row[1:width]]
        (titles if sum(bool(c) for c in data) == 1 and width > 2 else naming).append(data)
    if not naming and titles:
        naming, titles = titles, []
    names = []
    for column in range(width - 1):
        parts = [row[column] for row in naming if column < len(row) and row[column]]
        names.append(" ".join(parts) if parts else f"col{column + 1}")
    duplicated = {n for n in names if names.count(n) > 1}
    if duplicated and titles:
        # qualify repeated names ('2019' under 'Revenue' and under 'Cost') by the title above them
        filled = []
        for row in titles:
            last, out = "", []
            for cell in row:
                last = cell or last
                out.append(last)
            filled.append(out)
        for column, name in enumerate(names):
            if name in duplicated:
                prefix = " ".join(row[column] for row in filled if column < len(row) and row[column])
                names[column] = f"{prefix} {name}".strip()
    return _unique(names)


def table_frame(rows: Sequence[Sequence[str]]) -> Table:
    """The DataFrame of a TAT-QA table (see the module docstring)."""
    import pandas as pd

    width = max((len(r) for r in rows), default=0)
    rows = [list(r) + [""] * (width - len(r)) for r in rows]
    if width < 2 or not rows:
        raise ValueError("a table needs at least two columns and one row")
    headers = _header_row_count(rows)
    columns = _column_names(rows[:headers], width)
    labels, records, texts, section = [], [], [], ""
    sections = []
    for number, row in enumerate(rows[headers:], start=headers):
        label, data = row[0].strip(), row[1:]
        if not any(c.strip() for c in data):
            section = label.rstrip(":").strip() or section
            continue
        labels.append(label or f"row {number}")
        sections.append(section)
        records.append([float("nan") if (v := parse_cell(c)) is None else v for c in data])
        texts.append(data)
    repeated = {label for label in labels if labels.count(label) > 1}
    labels = _unique([f"{section}: {label}" if label in repeated and section else label
                      for label, section in zip(labels, sections)])
    frame = pd.DataFrame(records, index=labels, columns=columns, dtype=object)
    cells = {(label, column): text[j] for label, text in zip(labels, texts) for j, column in enumerate(columns)}
    percent = frozenset(key for key, text in cells.items() if _is_percent_cell(text))
    return Table(frame=frame, cells=cells, percent_cells=percent, header_rows=headers)


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as a markdown table, cells as written (BizBench's TAT-QA context layout)."""
    width = max((len(r) for r in rows), default=0)
    lines = []
    for index, row in enumerate(rows):
        cells = [str(c).replace("|", "/").replace("\n", " ") for c in list(row) + [""] * (width - len(row))]
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0:
            lines.append("| " + " | ".join([":---"] * width) + " |")
    return "\n".join(lines)


def document_context(document: Mapping[str, Any]) -> str:
    """Paragraphs in order, then the table as markdown."""
    paragraphs = sorted(document.get("paragraphs", []), key=lambda p: p.get("order", 0))
    text = "\n".join(p.get("text", "") for p in paragraphs)
    return (text + "\n" if text else "") + markdown_table(document["table"]["table"])


def question_with_scale(question: str, scale: str) -> str:
    return f"{question.strip()} ({scale})" if scale else question.strip()


# --- derivations -> programs ----------------------------------------------------------------------

_DERIVATION_CLEAN = [
    (re.compile(r"[$€£¥]"), ""),
    (re.compile(r"(?<=\d),(?=\d{3}\b)"), ""),
    # TAT-QA writes a percentage as itself ('(11.3% - 12.6%) * 100'): '11.3%' is 11.3 / 100
    (re.compile(r"(\d+(?:\.\d+)?)\s*%"), r"(\1 / 100)"),
    # ... and a negative amount as accountants do: '3 + (13) + 26' is 3 - 13 + 26
    (re.compile(r"\(\s*(\d+(?:\.\d+)?)\s*\)"), r"(-\1)"),
    (re.compile(r"[×xX]"), "*"),
    (re.compile(r"÷"), "/"),
    (re.compile(r"[\u2212\u2013\u2014]"), "-"),
    (re.compile(r"\["), "("),
    (re.compile(r"\]"), ")"),
]
_CONSTANT_FACTORS = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 100, 1000}
_ALLOWED_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
                ast.Pow: operator.pow}


class ProgramError(ValueError):
    """A derivation that cannot become a gold program; `reason` is the drop reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def parse_derivation(derivation: str) -> ast.expr:
    """A TAT-QA derivation as a Python arithmetic expression tree; ProgramError when it is not one."""
    text = derivation.strip()
    for pattern, replacement in _DERIVATION_CLEAN:
        text = pattern.sub(replacement, text)
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ProgramError("not_arithmetic", f"derivation {derivation!r} is not a formula") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and type(node.op) in _ALLOWED_OPS:
            continue
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            continue
        if isinstance(node, (ast.operator, ast.unaryop)):
            continue
        raise ProgramError("not_arithmetic", f"derivation {derivation!r} has {type(node).__name__}")
    return tree


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    slug = "_".join(slug.split("_")[:6])[:40].strip("_") or "value"
    return slug if not slug[0].isdigit() else "v_" + slug


@dataclass(frozen=True)
class GoldProgram:
    """A derivation turned into Python over the table's DataFrame `df`."""

    code: str
    """The program; its last line is an expression whose value is the answer."""

    cells: tuple[tuple[str, str], ...]
    """The (row, column) cells it reads, in order of first use."""

    times_100: bool
    """Whether '* 100' was appended (a percentage asked, a ratio derived)."""


class _CellFinder:
    def __init__(self, table: Table, question: str):
        self.by_value: dict[float, list[tuple[str, str]]] = {}
        question_words = _words(question)
        frame = table.frame
        for row in frame.index:
            for column in frame.columns:
                value = frame.at[row, column]
                if isinstance(value, float) and not math.isnan(value):
                    self.by_value.setdefault(value, []).append((row, column))
        for value, keys in self.by_value.items():
            keys.sort(key=lambda key: -len(question_words & (_words(key[0]) | _words(key[1]))))

    def find(self, value: float) -> tuple[str, str] | None:
        keys = self.by_value.get(float(value))
        return keys[0] if keys else None


def _is_constant_position(node: ast.Constant, parents: Mapping[int, ast.AST]) -> bool:
    value = node.value
    if value == 0:
        return True
    parent = parents.get(id(node))
    return (isinstance(parent, ast.BinOp) and parent.right is node and isinstance(parent.op, (ast.Div, ast.Mult))
            and float(value).is_integer() and int(value) in _CONSTANT_FACTORS)


def gold_program(derivation: str, table: Table, question: str = "", *, times_100: bool = False) -> GoldProgram:
    """The derivation as a program reading its numbers from `df` (see the module docstring)."""
    tree = parse_derivation(derivation)
    finder = _CellFinder(table, question)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    names: dict[tuple[str, str], str] = {}
    used_names: set[str] = set()

    def variable(key: tuple[str, str]) -> ast.Name:
        if key not in names:
            base = _slug(f"{key[0]} {key[1]}")
            name, n = base, 2
            while name in used_names:
                name, n = f"{base}_{n}", n + 1
            names[key] = name
            used_names.add(name)
        return ast.Name(id=names[key], ctx=ast.Load())

    class Replace(ast.NodeTransformer):
        def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
            # '-228' where the table shows '(228)': read the negative cell as it is
            if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
                key = finder.find(-float(node.operand.value))
                if key is not None and node.operand.value != 0:
                    return variable(key)
            return self.generic_visit(node)

        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            if _is_constant_position(node, parents):
                return node
            key = finder.find(float(node.value))
            if key is not None:
                return variable(key)
            negative = finder.find(-float(node.value))
            if negative is not None:  # the derivation drops the sign the table shows: negate the cell
                return ast.UnaryOp(op=ast.USub(), operand=variable(negative))
            if float(node.value).is_integer() and (int(node.value) in _CONSTANT_FACTORS or int(node.value) == 1):
                return node
            raise ProgramError("number_not_in_table", f"{node.value!r} is not a number in the table")

    expression = Replace().visit(tree)
    if times_100:
        expression = ast.BinOp(left=expression, op=ast.Mult(), right=ast.Constant(100))
    lines = [f"{name} = df.loc[{row!r}, {column!r}]" for (row, column), name in names.items()]
    lines.append(ast.unparse(expression))
    return GoldProgram(code="\n".join(lines) + "\n", cells=tuple(names), times_100=times_100)


def evaluate_gold_program(code: str, frame: Any) -> float:
    """Run one of *our* gold programs: assignments and one final expression, using only numbers,
    names, + - * / ** and df.loc[row, column]. Anything else is a ValueError (never executed)."""
    tree = ast.parse(code, mode="exec")
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        raise ValueError("a gold program ends with an expression")
    scope: dict[str, float] = {}

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name):
            return scope[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _ALLOWED_OPS:
            return _ALLOWED_OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "loc"
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "df"
                and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.slice.elts)):
            row, column = (e.value for e in node.slice.elts)  # type: ignore[attr-defined]
            return float(frame.loc[row, column])
        raise ValueError(f"not allowed in a gold program: {ast.unparse(node)}")

    for statement in tree.body[:-1]:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            raise ValueError(f"not allowed in a gold program: {ast.unparse(statement)}")
        scope[statement.targets[0].id] = value(statement.value)
    return value(tree.body[-1].value)  # type: ignore[attr-defined]


def reproduces(value: float, gold: float, gold_text: str | None = None) -> str | None:
    """'within_1pct' or 'at_precision' when the program's value matches the gold, else None.

    at_precision: equal once rounded to the gold's decimals (TAT-QA rounds to 2 places, so a
    gold of 0.01 for 0.0149 is reproduced although 1% of it is tiny)."""
    if not math.isfinite(value):
        return None
    if within_relative(value, gold, 0.01):
        return "within_1pct"
    text = gold_text if gold_text is not None else repr(gold)
    decimals = len(text.split(".", 1)[1]) if "." in text and "e" not in text.lower() else 0
    if abs(value - gold) <= 0.5 * 10 ** (-decimals) + 1e-12:
        return "at_precision"
    return None


# --- building the tasks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TatqaBuild:
    """Items of one TAT-QA-derived task and split, with what was dropped and why."""

    task: str
    """'codetatqa' or 'tatqa-e'."""

    split: str
    """'dev' or 'test'."""

    items: list[BizBenchItem]
    """The kept items in file order."""

    candidates: int
    """Questions of the task's type before filtering."""

    dropped: Counter = field(default_factory=Counter)
    """Drop reason -> count."""

    kept_by: Counter = field(default_factory=Counter)
    """How kept items matched (codetatqa: within_1pct / at_precision, and times_100)."""


def tatqa_file(data_dir: str | Path, split: str) -> Path:
    """The TAT-QA file of a split under a data dir (accepts the tatqa folder, its dataset_raw, or a root
    holding tatqa/dataset_raw)."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown TAT-QA split {split!r}; use one of {sorted(SPLIT_FILES)}")
    root = Path(data_dir)
    for candidate in (root / SPLIT_FILES[split], root / "dataset_raw" / SPLIT_FILES[split],
                      root / "tatqa" / "dataset_raw" / SPLIT_FILES[split]):
        if candidate.exists():
            return candidate
    raise DataError(f"TAT-QA {split} file {SPLIT_FILES[split]} not found", path=root,
                    hint=f"{pull_hint(root / 'tatqa' / 'dataset_raw' / SPLIT_FILES[split])}, or point --data-dir at a "
                    "data root holding tatqa/dataset_raw/ (and bizbench/prompts/)")


def load_documents(path: str | Path) -> list[dict[str, Any]]:
    documents = read_json(path)
    if not isinstance(documents, list):
        raise DataError("expected a JSON list of TAT-QA documents", path=path)
    for index, document in enumerate(documents):
        if not isinstance(document, dict) or "table" not in document or "questions" not in document:
            raise DataError(f"document {index} lacks 'table' or 'questions'", path=path,
                            hint="this does not look like a TAT-QA dataset_raw file")
    return documents


def _gold_float(answer: Any) -> float | None:
    if isinstance(answer, bool):
        return None
    if isinstance(answer, (int, float)):
        return float(answer)
    if isinstance(answer, str):
        try:
            return float(answer.replace(",", ""))
        except ValueError:
            return None
    return None


def build_codetatqa(path: str | Path, split: str) -> TatqaBuild:
    """CodeTAT-QA items of one TAT-QA file (see the module docstring)."""
    dropped: Counter = Counter()
    kept_by: Counter = Counter()
    items, candidates = [], 0
    for document in load_documents(path):
        table: Table | None = None
        for question in document["questions"]:
            if question.get("answer_type") != "arithmetic" or question.get("answer_from") != "table":
                continue
            candidates += 1
            gold = _gold_float(question.get("answer"))
            if gold is None:
                dropped["answer_not_numeric"] += 1
                continue
            if not question.get("derivation", "").strip():
                dropped["no_derivation"] += 1
                continue
            if table is None:
                table = table_frame(document["table"]["table"])
            scale = question.get("scale") or ""
            try:
                program = gold_program(question["derivation"], table, question["question"])
                value = evaluate_gold_program(program.code, table.frame)
                how = reproduces(value, gold, str(question.get("answer")))
                if how is None and scale == "percent":
                    program = gold_program(question["derivation"], table, question["question"], times_100=True)
                    value = evaluate_gold_program(program.code, table.frame)
                    how = reproduces(value, gold, str(question.get("answer")))
            except ProgramError as err:
                dropped[err.reason] += 1
                continue
            except (ZeroDivisionError, OverflowError, TypeError, ValueError, KeyError):
                dropped["not_evaluable"] += 1
                continue
            if how is None:
                dropped["value_mismatch"] += 1
                continue
            kept_by[how] += 1
            kept_by["times_100"] += program.times_100
            items.append(BizBenchItem(
                id=question["uid"], question=question_with_scale(question["question"], scale),
                answer=format_answer(gold), task="codetatqa", context=document_context(document),
                context_type="string", program=program.code, split=split,
                metadata={"source": Path(path).name, "table_uid": document["table"].get("uid"),
                          "derivation": question["derivation"], "scale": scale,
                          "program_value": value, "matched_by": how, "cells": [list(c) for c in program.cells],
                          "table": {"index": list(table.frame.index), "columns": list(table.frame.columns),
                                    "data": [[None if isinstance(v, float) and math.isnan(v) else v for v in row]
                                             for row in table.frame.itertuples(index=False, name=None)]}}))
    return TatqaBuild(task="codetatqa", split=split, items=items, candidates=candidates, dropped=dropped,
                      kept_by=kept_by)


def _span_number(text: str) -> float | None:
    value = parse_cell(text)
    return value if isinstance(value, float) else None


def build_tatqa_e(path: str | Path, split: str) -> TatqaBuild:
    """TAT-QA(E) items of one TAT-QA file (see the module docstring)."""
    dropped: Counter = Counter()
    items, candidates = [], 0
    for document in load_documents(path):
        context = None
        for question in document["questions"]:
            if question.get("answer_type") != "span":
                continue
            candidates += 1
            answers = question.get("answer")
            if not isinstance(answers, list) or len(answers) != 1:
                dropped["not_one_span"] += 1
                continue
            if question.get("req_comparison"):
                dropped["comparison"] += 1
                continue
            span = str(answers[0]).strip()
            number = _span_number(span)
            if number is None:
                dropped["not_a_number"] += 1
                continue
            context = context if context is not None else document_context(document)
            if span not in context:
                dropped["not_in_context"] += 1
                continue
            scale = question.get("scale") or ""
            items.append(BizBenchItem(
                id=question["uid"], question=question_with_scale(question["question"], scale),
                answer=format_answer(number), task="tatqa-e", context=context, context_type="string", split=split,
                metadata={"source": Path(path).name, "table_uid": document["table"].get("uid"), "span": span,
                          "scale": scale, "answer_from": question.get("answer_from")}))
    return TatqaBuild(task="tatqa-e", split=split, items=items, candidates=candidates, dropped=dropped)


def build_tatqa_tasks(data_dir: str | Path, splits: Iterable[str] = ("dev", "test")) -> list[TatqaBuild]:
    """Both tasks for each split."""
    builds = []
    for split in splits:
        path = tatqa_file(data_dir, split)
        builds.append(build_codetatqa(path, split))
        builds.append(build_tatqa_e(path, split))
    return builds
