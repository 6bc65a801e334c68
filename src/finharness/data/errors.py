"""The one error type for bad input data: it always names the file and, where known, the line."""

from __future__ import annotations

from pathlib import Path


class DataError(ValueError):
    """Bad or missing input data. str(err) reads 'FILE:LINE: what is wrong (what to do)'."""

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None,
                 hint: str | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        self.hint = hint
        where = ""
        if self.path:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        text = where + message
        if hint:
            text += f" ({hint})"
        super().__init__(text)
