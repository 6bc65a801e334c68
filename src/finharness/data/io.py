"""Reading data files with errors that name the file and line."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from .errors import DataError


def read_text(path: str | Path) -> str:
    """UTF-8 text (a BOM is accepted); anything else is a DataError naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise DataError("file not found", path=path, hint="check --data-dir / FINHARNESS_DATA_DIR (`finharness data "
                        "list --data-dir ROOT` shows what a data root holds)")
    if path.is_dir():
        raise DataError("is a folder, not a file", path=path, hint="give the file inside it")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 (byte 0x{raw[err.start]:02x} at offset {err.start})", path=path,
                        line=line, hint="re-encode the file as UTF-8") from None


def parse_json(text: str, path: str | Path, line: int | None = None) -> Any:
    """json.loads, its errors a DataError naming the file and line: malformed JSON, or JSON nested deeper than
    the parser can follow (Python's recursion limit)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        at = err.lineno if line is None else line
        raise DataError(f"malformed JSON: {err.msg} (column {err.colno})", path=path, line=at) from None
    except RecursionError:
        raise DataError(f"JSON nested deeper than the reader can follow (about {sys.getrecursionlimit()} "
                        "levels)", path=path, line=line,
                        hint="no file finharness reads nests that deep: was it made by hand or damaged?") from None


def iter_jsonl(path: str | Path, *, allow_empty: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line_number, object) for every non-blank line; line numbers are 1-based."""
    text = read_text(path)
    seen = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        obj = parse_json(line, path, number)
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object, got {type(obj).__name__}", path=path, line=number)
        seen = True
        yield number, obj
    if not seen and not allow_empty:
        raise DataError("file is empty", path=path)


def read_json(path: str | Path) -> Any:
    text = read_text(path)
    if not text.strip():
        raise DataError("file is empty", path=path)
    return parse_json(text, path)


def check_csv(text: str, path: str | Path, delimiter: str = ",") -> None:
    """A DataError naming the file and line where `text` cannot be CSV as written: it ends inside a quoted field
    (a closing quote missing, or the file cut short), or a field runs past the CSV reader's limit (most often a
    quote never closed). The lenient reader the data is then read with would accept both without a word."""
    reader = csv.reader(io.StringIO(text), strict=True, delimiter=delimiter)
    start = 1
    try:
        for _ in reader:
            start = reader.line_num + 1
    except csv.Error as err:
        if "unexpected end of data" in str(err):
            raise DataError(f"the file ends inside a quoted field of the row starting on line {start}", path=path,
                            line=start, hint="close the quote, or fetch the file again if it was cut short") from None
        if "field larger than field limit" in str(err):
            raise DataError(f"a field of the row starting on line {start} is longer than {csv.field_size_limit()} "
                            "characters, the CSV reader's limit", path=path, line=start,
                            hint="is a quote opened there and never closed? Close it, or split the text") from None
        # anything else strict parsing refuses (text after a closing quote...) is read leniently, as it always was


def csv_dict_reader(path: str | Path) -> "csv.DictReader[str]":
    """A csv.DictReader over a UTF-8 CSV file that check_csv found readable (DataError otherwise)."""
    text = read_text(path)
    check_csv(text, path)
    return csv.DictReader(io.StringIO(text))


def read_csv_rows(path: str | Path, required: tuple[str, ...] = (), delimiter: str = ",") -> list[tuple[int, dict[str, str]]]:
    """(line_number, row) pairs; a missing required column is a DataError naming the file. `delimiter`: ',', or
    '\t' for a TSV, or 'sniff': ';' where the header line has more semicolons than commas (a spreadsheet saved as
    CSV in a locale whose decimal mark is the comma), else ','."""
    text = read_text(path)
    if not text.strip():
        raise DataError("file is empty", path=path)
    if delimiter == "sniff":
        header = text.split("\n", 1)[0]
        delimiter = ";" if header.count(";") > header.count(",") else ","
    check_csv(text, path, delimiter)
    reader = csv.DictReader(io.StringIO(text), delimiter=delimiter)
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(f"missing column(s) {missing}; found {reader.fieldnames}", path=path, line=1)
    rows = []
    for row in reader:
        rows.append((reader.line_num, row))
    return rows


def require_key(obj: dict[str, Any], key: str, path: str | Path, line: int) -> Any:
    if key not in obj:
        raise DataError(f"missing field {key!r}", path=path, line=line)
    return obj[key]


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write beside the target, fsync, then rename: a reader never sees half a file, a crash leaves none."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    except OSError as err:  # named by the file it is for, not the temporary name tried
        err.filename = str(path)
        raise
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the mode a plain open() would
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename is None:  # a failed write names no file: say which
            err.filename = str(path)
        raise


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line (UTF-8, not ASCII-escaped), written atomically."""
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
