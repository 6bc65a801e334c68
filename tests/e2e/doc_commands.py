"""The commands of README.md and docs/: found in the pages' code blocks, then run as printed except for one
table of substitutions (tests/e2e/test_docs_commands.py holds the tables and the tests).

Finding them. In a fenced block without a language (or `sh`, `bash`, `shell`, `console`):

- a block whose lines start with `$ ` is a transcript: each `$ ` line is a command, the rest its output;
- otherwise a block is a command block when one of its lines starts with a program of PROGRAMS (after
  `NAME=value` assignments); then every line that is not blank or a `#` comment is a command, and must start
  with a program of PROGRAMS (a new tool in the docs is named here, never passed over);
- a line ending in `\\` continues on the next, and so does a synopsis whose next line starts with `[`; `#` and
  what follows it (outside quotes) is a comment;
- blocks that are not command blocks (a source tree, JSON, an error message shown) hold no command.

A synopsis (`finharness data list [--json] [--data-dir DIR]`) runs in full: every `[...]` part is kept,
and inside brackets the first of `a|b` alternatives is taken, so every option a synopsis names is checked.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
SHELL_LANGUAGES = frozenset({"", "sh", "bash", "shell", "console"})
PROGRAMS = ("finharness", "make", "python", "pytest", ".venv/bin/python", ".ci/run", "llama-server", "vllm")
"""The programs a command line in the docs may start with; `finharness` lines are the ones run."""
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


@dataclass(frozen=True)
class DocCommand:
    """One command line of a page, as printed."""

    page: str
    """The page, relative to the repository root (`README.md`, `docs/engine.md`)."""
    line: int
    """Line number (1-based) of its first line on the page."""
    text: str
    """The command: continuation lines joined, the `$ ` prompt and any `#` comment left out."""

    @property
    def words(self) -> list[str]:
        """The shell words (quotes removed, comment dropped)."""
        return shlex.split(self.text, comments=True)

    @property
    def program(self) -> str:
        return next(w for w in self.words if not ASSIGNMENT.match(w))

    @property
    def is_finharness(self) -> bool:
        return self.program == "finharness"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


def _blocks(text: str) -> Iterable[tuple[str, list[tuple[int, str]]]]:
    """(language, [(line number, line)]) of every fenced block."""
    block: list[tuple[int, str]] | None = None
    language, fence = "", ""
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if block is None:
            if match:
                block, fence, language = [], match.group(1), match.group(2).lower()
            continue
        if match and match.group(1).startswith(fence[0] * 3) and not match.group(2):
            yield language, block
            block = None
            continue
        block.append((number, line))


def _logical_lines(block: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines with their `\\` continuations joined, each with the number of its first line."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in block:
        text = line.strip()
        if pending is None and text.startswith("[") and out:  # a synopsis wrapped onto the next line
            pending = out.pop()
        if pending is not None:
            number, text = pending[0], f"{pending[1]} {text}"
        if text.endswith("\\"):
            pending = (number, text[:-1].rstrip())
            continue
        pending = None
        out.append((number, text))
    if pending is not None:
        out.append(pending)
    return out


def _starts_with_program(text: str) -> bool:
    try:
        words = [w for w in shlex.split(text, comments=True) if not ASSIGNMENT.match(w)]
    except ValueError:
        return False
    return bool(words) and words[0] in PROGRAMS


def page_commands(path: Path, root: Path) -> list[DocCommand]:
    """Every command line of one page, in page order."""
    page = path.relative_to(root).as_posix()
    found: list[DocCommand] = []
    for language, block in _blocks(path.read_text(encoding="utf-8")):
        if language not in SHELL_LANGUAGES:
            continue
        lines = [(n, t) for n, t in _logical_lines(block) if t and not t.startswith("#")]
        if any(t.startswith("$ ") for _, t in lines):  # a transcript: prompts are commands, the rest output
            found += [DocCommand(page, n, t[2:].strip()) for n, t in lines if t.startswith("$ ")]
            continue
        if not any(_starts_with_program(t) for _, t in lines):
            continue
        for number, text in lines:
            if not _starts_with_program(text):
                raise ValueError(f"{page}:{number}: {text!r} is in a block of commands but starts with no program "
                                 f"of {PROGRAMS} (name its program in tests/e2e/doc_commands.py PROGRAMS)")
            found.append(DocCommand(page, number, text))
    return found


def doc_pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def all_commands(root: Path) -> list[DocCommand]:
    return [c for page in doc_pages(root) for c in page_commands(page, root)]


def expand_synopsis(words: list[str]) -> list[str]:
    """`[--mode a|b]` -> `--mode a`, `[--sd S | --pairwise]` -> `--sd S`: every optional part kept (nested ones
    too), the first alternative inside brackets; a lone `...` (more of the same) dropped."""
    stack: list[list[list[str]]] = [[[]]]  # groups of alternatives of words
    for word in words:
        opened = len(word) - len(word.lstrip("["))
        word = word[opened:]
        for _ in range(opened):
            stack.append([[]])
        closed = len(word) - len(word.rstrip("]"))
        word = word[: len(word) - closed]
        if word == "|" and len(stack) > 1:
            stack[-1].append([])
        elif word and word != "...":
            stack[-1][-1].append(word.split("|", 1)[0] if len(stack) > 1 else word)
        for _ in range(closed):
            if len(stack) == 1:
                raise ValueError(f"unbalanced [ ] in {' '.join(words)!r}")
            group = stack.pop()
            stack[-1][-1].extend(group[0])
    if len(stack) != 1:
        raise ValueError(f"unbalanced [ ] in {' '.join(words)!r}")
    return stack[0][0]


def replace_placeholders(word: str, table: dict[str, str]) -> str:
    """Each placeholder of `table` found in `word` as a whole name (not inside a longer one) replaced."""
    for name, value in sorted(table.items(), key=lambda kv: -len(kv[0])):
        word = re.sub(rf"(?<![A-Za-z0-9_.]){re.escape(name)}(?![A-Za-z0-9_])", lambda _: value, word)
    return word
