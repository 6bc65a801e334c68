"""Write (or check) the option tables of the docs pages from the tasks' own declarations.

A docs page holds a task's options between `<!-- options: TASK -->` and `<!-- /options -->`; this script
replaces what is between them with `finharness list TASK --markdown`, so the pages cannot drift from what a
run parses. `python tools/docs_options.py` rewrites the pages; `--check` only says which blocks differ
(exit 1), as tests/unit/test_docs_options.py does.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from finharness.benchmarks.registry import task_class
from finharness.core.options import options_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs"
SHARED = {"bizbench/secnum": "bizbench/tatqa-e", "bizbench/convfinqa-e": "bizbench/tatqa-e",
          "bizbench/fincode": "bizbench/codetatqa", "bizbench/codefinqa": "bizbench/codetatqa"}
"""Tasks whose options the page gives by one sibling's table (the same declaration; split's allowed values
differ: `finharness list TASK` gives each task's own)."""
BLOCK = re.compile(r"(<!-- options: (?P<task>[\w/.-]+) -->\n)(?P<body>.*?)(<!-- /options -->)", re.S)


def generated(task: str) -> str:
    return options_markdown(task_class(task).describe_options()) + "\n"


def blocks() -> list[tuple[Path, str, str]]:
    """(page, task, body as written) of every options block under docs/."""
    return [(page, m["task"], m["body"]) for page in sorted(DOCS.rglob("*.md"))
            for m in BLOCK.finditer(page.read_text(encoding="utf-8"))]


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = [f"{page.relative_to(DOCS.parent)}: {task}" for page, task, body in blocks() if body != generated(task)]
        for line in stale:
            print(f"stale options table: {line}")
        return 1 if stale else 0
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        new = BLOCK.sub(lambda m: m[1] + generated(m["task"]) + m[4], text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            print(f"wrote {page.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
