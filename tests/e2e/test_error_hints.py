"""Every hint of the common data-missing errors works when followed (issue 24 items 5 and 7).

Each task runs on an empty data root (`--data-dir EMPTY`, the fake model, one item). It must stop with one
`error:` line (exit 2, no traceback) whose hint says what to do in a form that can be done as written: a
`finharness ...` command in backquotes without placeholders (run as printed, pulls going to the local stand-ins
of the Hub and GitHub's raw host: tests/e2e/stand_ins.py), or a `-o NAME=VALUE` to add. The test does it and runs
the task again, until the task runs (at most a few steps, each with a new error). The folders the hints name
as the other way (a data root holding the data, or the dataset's own folder) are run too.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from .stand_ins import SHARED, invoke

FAKE_JUDGE = ("--judge", "fake?name=judge&reply=%7B%7D")
CASES = {
    "cfinbench": (["cfinbench"], "no 'val' split folder"),
    "bizbench/fincode --no-pull": (["bizbench/fincode", "--no-pull"], "pulling is off"),
    "ucfe": (["ucfe", "--user-model", "fake"], "UCFE_bench.json not found"),
    "fintradebench": (["fintradebench", *FAKE_JUDGE, "-o", "per_category=1"], "question file not found"),
    "bizbench/finknow": (["bizbench/finknow"], "FinEval_CFA_Easy.data.json: file not found"),
    "bizbench/tatqa-e": (["bizbench/tatqa-e"], "tatqa_dataset_test_gold.json not found"),
}
"""Task -> (its `finharness run` words, the first error on an empty data root)."""

BACKQUOTED = re.compile(r"`(finharness [^`]+)`")
OPTION = re.compile(r"-o ([a-z_]+=[^\s,;()]+)")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{2,}\b")
MAX_STEPS = 4


def followable(hint: str) -> tuple[list[str], list[str]]:
    """(commands to run, `-o` options to add) that the error names without a placeholder."""
    commands = [c for c in BACKQUOTED.findall(hint) if not PLACEHOLDER.search(c)]
    options = [o for o in OPTION.findall(hint) if not PLACEHOLDER.search(o)]
    return commands, options


def run_task(words: list[str], root: Path, out: Path) -> tuple[int, str, str | None]:
    code, output, _, tb = invoke(["run", *words, "--model", "fake", "--data-dir", str(root), "--limit", "1", "-q",
                                  "--out", str(out)], out.parent)
    return code, output, tb


def follow(words: list[str], root: Path, out: Path) -> list[tuple[str, list[str]]]:
    """Run the task, doing what each error says, until it runs; the (error, what was done) of each step."""
    steps: list[tuple[str, list[str]]] = []
    for _ in range(MAX_STEPS):
        code, output, tb = run_task(words, root, out)
        assert tb is None, tb
        if code == 0:
            return steps
        errors = [line for line in output.splitlines() if line.startswith("error: ")]
        assert code == 2 and len(errors) == 1, output
        error = errors[0]
        assert all(error != seen for seen, _ in steps), f"following the hint changed nothing: {error}"
        commands, options = followable(error)
        assert commands or options, f"the hint names nothing that can be done as written: {error}"
        for command in commands:
            done, said, _, tb = invoke(shlex.split(command)[1:], out.parent)
            assert done == 0 and tb is None, f"`{command}` (from: {error}) failed:\n{said}"
        words = [*words, *(w for o in options for w in ("-o", o))]
        steps.append((error, [*commands, *(f"-o {o}" for o in options)]))
    raise AssertionError(f"still failing after {MAX_STEPS} hints followed: {steps}")


@pytest.mark.parametrize("task", sorted(CASES))
def test_following_the_hints_of_a_data_missing_error_makes_the_task_run(stand_ins, tmp_path, task):
    words, first = CASES[task]
    root = tmp_path / "empty"
    root.mkdir()
    steps = follow(words, root, tmp_path / "out")
    assert steps and first in steps[0][0], steps
    for error, done in steps:  # a pull always fills the data root the run was given
        assert all(f"--data-dir {root}" in d for d in done if d.startswith("finharness data pull")), (error, done)
    print(f"{task}: " + " | ".join(f"{e} -> {d}" for e, d in steps))


def test_bizbench_pulls_on_first_use_as_the_readme_says(stand_ins, tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    code, output, tb = run_task(["bizbench/fincode"], root, tmp_path / "out")
    assert code == 0 and tb is None, output
    assert (root / "bizbench" / "prompts").is_dir() and list((root / "bizbench" / "data").glob("test-*.parquet"))


def test_the_ucfe_folder_the_hint_offers_as_data_dir_works(stand_ins, tmp_path):
    """The other way the UCFE hint gives: --data-dir at the ucfe folder itself."""
    code, output, tb = run_task(CASES["ucfe"][0], SHARED / "ucfe", tmp_path / "out")
    assert code == 0 and tb is None, output
