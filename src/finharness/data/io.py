"""Reading data files with errors that name the file and line."""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from .errors import DataError


def read_text(path: str | Path) -> str:
    """UTF-8 text (a BOM is accepted); anything else is a DataError naming the file and line."""
    path = Path(path)
    if not path.exists():
        raise DataError("file not found", path=path,
                        hint="check --data-dir / FINHARNESS_DATA_DIR, or `finharness data pull`")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 (byte 0x{raw[err.start]:02x} at offset {err.start})", path=path,
                        line=line, hint="re-encode the file as UTF-8") from None


def iter_jsonl(path: str | Path, *, allow_empty: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line_number, object) for every non-blank line; line numbers are 1-based."""
    text = read_text(path)
    seen = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"malformed JSON: {err.msg} (column {err.colno})", path=path, line=number) from None
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
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"malformed JSON: {err.msg} (column {err.colno})", path=path, line=err.lineno) from None


def read_csv_rows(path: str | Path, required: tuple[str, ...] = ()) -> list[tuple[int, dict[str, str]]]:
    """(line_number, row) pairs; a missing required column is a DataError naming the file."""
    text = read_text(path)
    if not text.strip():
        raise DataError("file is empty", path=path)
    reader = csv.DictReader(io.StringIO(text))
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
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the mode a plain open() would
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_jsonl(path: str | Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """One JSON object per line (UTF-8, not ASCII-escaped), written atomically."""
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
