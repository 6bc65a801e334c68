"""The documentation stays whole: README.md and docs/ link only to what exists, every command of
`finharness --help` is documented, and the README stays short.

- Every relative Markdown link `[text](target)` in README.md and docs/**/*.md (outside code blocks and
  code spans) resolves to an existing file or folder, relative to the page; a `#anchor` must name a
  heading of the target page, slugged as GitHub does (lower case, punctuation dropped, spaces to
  hyphens, `-1`, `-2` ... for repeats).
- Every command and sub-command that the typer app lists (recursing into groups, hidden ones left out)
  appears somewhere in README.md or docs/ as `finharness <command path>`.
- docs/cli.md, the command reference, has every top-level command.
- README.md is at most 12,000 bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
README_MAX_BYTES = 12_000

FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def doc_pages() -> list[Path]:
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, in_fence = [], False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            in_fence = not in_fence
            continue
        if not in_fence:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (links and code marks rendered away first)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    text = text.replace("`", "").strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(page.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every relative link and image on the page."""
    out = []
    text = page.read_text(encoding="utf-8")
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.lstrip()):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = CODE_SPAN.sub("", line)
        for pattern in (LINK, IMAGE):
            for match in pattern.finditer(line):
                target = match.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto: ...
                    continue
                out.append((number, target))
    return out


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    problems = []
    for number, target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not resolved.exists():
            problems.append(f"{where} (no such file)")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{where} (no heading #{anchor} in {resolved.relative_to(root)})")
    return problems


def command_paths() -> list[str]:
    """Every command and sub-command of the CLI, e.g. 'run', 'data build secnum'."""
    from finharness.cli import app

    paths: list[str] = []

    def walk(command, prefix: list[str]) -> None:
        if not hasattr(command, "list_commands"):
            return
        context = typer.Context(command)  # groups list what they mount (plug-ins) only when asked
        for name in sorted(command.list_commands(context)):
            sub = command.get_command(context, name)
            if getattr(sub, "hidden", False):
                continue
            path = [*prefix, name]
            paths.append(" ".join(path))
            walk(sub, path)

    walk(typer.main.get_command(app), [])
    return paths


def documented(path: str, text: str) -> bool:
    words = r"\s+".join(re.escape(word) for word in path.split())
    return re.search(rf"(?<![\w-])finharness\s+{words}(?![\w-])", text) is not None


def all_docs_text() -> str:
    return "\n".join(page.read_text(encoding="utf-8") for page in doc_pages())


# --- the checks' own behaviour ------------------------------------------------------------------------


def test_slug_follows_github() -> None:
    assert slug("Judging: `finharness ucfe judge`") == "judging-finharness-ucfe-judge"
    assert slug("vLLM in-process (GPU)") == "vllm-in-process-gpu"
    assert slug("P1–P9 table") == "p1p9-table"
    assert slug("Several tasks in one run") == "several-tasks-in-one-run"


def test_link_checker_catches_a_broken_file_and_anchor(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A part\n", encoding="utf-8")
    page.write_text("# Page\n\n[ok](other.md#a-part) [self](#page) [web](https://example.org/x)\n"
                    "[gone](missing.md) [bad anchor](other.md#no-such-part)\n"
                    "`[in code](missing.md)`\n```\n[in a fence](missing.md)\n```\n", encoding="utf-8")
    problems = broken_links(page, tmp_path)
    assert len(problems) == 2, problems
    assert "missing.md (no such file)" in problems[0]
    assert "no heading #no-such-part" in problems[1]


def test_command_matcher_needs_the_whole_path() -> None:
    assert documented("data build secnum", "run `finharness data build\n  secnum --filings D`")
    assert not documented("data build", "finharness data builder")
    assert not documented("run", "finharness runs")
    assert not documented("ui add-rater", "finharness ui add")


# --- the documentation ------------------------------------------------------------------------------


def test_docs_exist() -> None:
    assert (REPO / "docs" / "index.md").is_file()


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_every_cli_command_is_documented() -> None:
    paths = command_paths()
    assert "run" in paths and "fintradebench build metrics" in paths  # the walk reached the nested groups
    text = all_docs_text()
    missing = [path for path in paths if not documented(path, text)]
    assert missing == [], f"not documented as `finharness <command>` in README.md or docs/: {missing}"


def test_the_command_reference_has_every_top_level_command() -> None:
    """docs/cli.md says it lists every command of `finharness --help`: each top-level one has its row there."""
    paths = command_paths()
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = [path for path in paths if " " not in path and not documented(path, text)]
    assert "contamination" in paths and missing == [], f"no row in docs/cli.md: {missing}"


def test_readme_is_short() -> None:
    size = README.stat().st_size
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; at most {README_MAX_BYTES}"
