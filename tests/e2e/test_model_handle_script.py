"""The public model handle in a user's script (issue 28 item 1): docs/write-a-task.md's script is
docs/examples/ask.py line for line, and run twice it asks the model once, then answers from the store."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "docs" / "examples" / "ask.py"


def test_the_page_shows_the_script_that_is_run():
    page = (REPO / "docs" / "write-a-task.md").read_text(encoding="utf-8")
    shown = re.search(r"```python\n(import asyncio\n.*?)```", page, re.S).group(1)
    body = SCRIPT.read_text(encoding="utf-8").split('"""\n\n', 1)[1]
    assert shown == body and len(shown.strip().splitlines()) <= 10


def test_the_script_asks_once_then_answers_from_the_store(tmp_path: Path):
    runs = [subprocess.run([sys.executable, str(SCRIPT), "fake?reply=50"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    assert runs[0].stdout.strip() == "50 | 1 call(s) made, 0 from the store"
    assert runs[1].stdout.strip() == "50 | 0 call(s) made, 1 from the store"
    assert (tmp_path / "runs" / "ask.sqlite").is_file()
