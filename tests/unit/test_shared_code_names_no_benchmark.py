"""Shared code names no benchmark (issue 35): what the suite, the statistics, the report and the command line do for
one comes from its declaration (benchmarks/declaration.py), so no identifier or string in their code names a built-in
benchmark or task, nor does any docstring or comment (their examples are the demo and a user's own exam)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from finharness.benchmarks.declaration import built_in

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "finharness"
SHARED = [*PACKAGE.glob("suite/*.py"), *PACKAGE.glob("stats/*.py"), *PACKAGE.glob("report/*.py"),
          PACKAGE / "cli.py", PACKAGE / "cli_common.py", PACKAGE / "api.py"]


def benchmark_words() -> re.Pattern[str]:
    words = {b.name for b in built_in()} | {b.display for b in built_in()}
    words |= {part for b in built_in() for task in b.tasks for part in task.split("/")}
    words -= {"demo"}  # the embedded demo is the harness's own task, named where the quick path runs it
    return re.compile("|".join(sorted(map(re.escape, words), key=len, reverse=True)), re.I)


def named_in_code(path: Path, pattern: re.Pattern[str], root: Path = PACKAGE) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  and isinstance(node.value.value, str)}  # a bare string statement: a docstring or a field's
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = None if id(node) in docstrings else node.value
        else:
            text = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if text and pattern.search(text):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {text[:80]!r}")
    return found


def test_no_shared_module_names_a_benchmark_in_its_code():
    pattern = benchmark_words()
    assert pattern.search("UCFE") and pattern.search("bizbench/finknow") and pattern.search("secnum")
    assert len(SHARED) > 20
    found = [hit for path in SHARED for hit in named_in_code(path, pattern)]
    assert found == []


def test_no_shared_module_names_a_benchmark_even_in_its_docstrings_and_comments():
    """What `grep -i` of the benchmarks' names over suite/, stats/, report/, cli.py, cli_common.py and api.py finds."""
    pattern = benchmark_words()
    found = [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()[:80]}" for path in SHARED
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []


def test_the_check_finds_a_planted_name(tmp_path: Path):
    planted = tmp_path / "pkg" / "shared.py"
    planted.parent.mkdir()
    planted.write_text('"""Examples may name CFinBench."""\n\nif task == "cfinbench":\n    note = "UCFE only"\n',
                       encoding="utf-8")
    assert named_in_code(planted, benchmark_words(), tmp_path) == ["pkg/shared.py:3: 'cfinbench'",
                                                                    "pkg/shared.py:4: 'UCFE only'"]
