"""The first scorecard as a newcomer gets it (issue 37): the small things, each through the command line, and the
flags on a number that misleads at face value.

- a bundled suite name wins over a folder of that name in the working directory (`./quick` is the folder);
- `list bizbench/tatqa-e` describes its own splits;
- the dry run of an `openai:` reasoning model plans the limit the run sends (declared), or says what it would be
  (undeclared: `if it thinks`);
- the dry run's `calls (stored)` does not count a request asked twice as stored beside `nothing is stored yet`;
- `--draws K` at temperature 0 is refused, and draws that all came out the same say `identical draws`;
- `--version` and `--help` import nothing heavy;
- a run whose replies are mostly unparseable, or sampled, says so in its status, on the scorecard and in `compare`;
  a method that fell back is flagged; a composite's difference of 0 gets an interval around 0.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.cli import app
from finharness.core.types import DEFAULT_THINKING_TOKENS
from finharness.report.runs import RunData, run_flags
from finharness.suite.scorecard import Row, _paired_mean_difference
from tests.servers.provider_stubs import provider_server

DEMO_ITEMS, DEMO_MAX_TOKENS = 12, 64


def cli(*args: str, cwd: Path | None = None):
    import contextlib

    with contextlib.chdir(cwd) if cwd else contextlib.nullcontext():
        return CliRunner().invoke(app, list(args))


def test_a_bundled_suite_name_wins_over_a_folder_of_that_name(tmp_path: Path):
    (tmp_path / "quick").mkdir()  # e.g. an earlier --out runs into ./quick
    roles = ["--judge", "fake", "--user-model", "fake"]
    plan = cli("suite", "quick", "--model", "fake", *roles, "--dry-run", "--json", "--data-dir",
               str(tmp_path / "none"), cwd=tmp_path)
    assert "no such suite file" not in plan.output
    assert json.loads(plan.stdout)["dry_run"] == "suite quick"
    explicit = cli("suite", "./quick", "--model", "fake", "--dry-run", cwd=tmp_path)
    assert explicit.exit_code == 2 and "quick: no such suite file (a folder)" in explicit.output
    (tmp_path / "mine.toml").write_text('name = "mine"\n\n[[task]]\ntask = "demo"\n', encoding="utf-8")
    own = cli("suite", "mine.toml", "--model", "fake", *roles, "--dry-run", "--json", "--data-dir",
              str(tmp_path / "none"), cwd=tmp_path)
    assert json.loads(own.stdout)["dry_run"] == "suite mine"


def test_tatqa_e_lists_the_splits_it_takes_and_only_those():
    entry = json.loads(cli("list", "bizbench/tatqa-e", "--json").stdout)
    split = next(o for o in entry["options"] if o["name"] == "split")
    assert split["choices"] == ["test", "dev"] and "train" not in split["help"]
    fincode = json.loads(cli("list", "bizbench/fincode", "--json").stdout)
    assert "train" in next(o for o in fincode["options"] if o["name"] == "split")["help"]


def test_the_dry_run_plans_what_a_reasoning_model_is_sent(tmp_path: Path):
    per_call = DEMO_MAX_TOKENS + DEFAULT_THINKING_TOKENS
    with provider_server("openai-reasoning") as server:
        url = server.base_url
        undeclared = cli("run", "demo", "--model", f"openai:o-stub@{url}", "--dry-run", "--json",
                         "--out", str(tmp_path / "a"))
        declared = cli("run", "demo", "--model", f"openai:o-stub@{url}?max_completion_tokens=1", "--dry-run",
                       "--json", "--out", str(tmp_path / "b"))
        text = cli("run", "demo", "--model", f"openai:o-stub@{url}", "--dry-run", "--out", str(tmp_path / "a"))
        sent = cli("run", "demo", "--model", f"openai:o-stub@{url}", "--limit", "1", "--out", str(tmp_path / "c"))
    assert sent.exit_code == 0, sent.output
    results = json.loads((tmp_path / "c" / "results.json").read_text(encoding="utf-8"))
    assert results["adaptations"][0]["sent"] == f"max_completion_tokens={per_call}"  # what the run sends
    (tally,) = json.loads(declared.stdout)["tasks"][0]["roles"]
    assert tally["completion_ceiling"] == DEMO_ITEMS * per_call and tally["thinking"] == "known"
    (tally,) = json.loads(undeclared.stdout)["tasks"][0]["roles"]
    assert tally["completion_ceiling"] == DEMO_ITEMS * DEMO_MAX_TOKENS and tally["thinking"] == "unknown"
    assert tally["completion_ceiling_if_thinking"] == DEMO_ITEMS * per_call
    words = " ".join(text.output.split())
    assert f"({DEMO_ITEMS * per_call:,} if it thinks)" in words
    assert f"up to {per_call:,} completion tokens a call" in words and "does not say whether the model thinks" in words


TWICE = '''
name = "twice"

[[task]]
id = "once"
benchmark = "demo"
task = "demo"
limit = 3

[[task]]
id = "again"
benchmark = "demo"
task = "demo"
limit = 3
'''


def test_the_dry_run_does_not_count_a_request_asked_twice_as_stored(tmp_path: Path):
    (tmp_path / "twice.toml").write_text(TWICE, encoding="utf-8")
    args = ["suite", str(tmp_path / "twice.toml"), "--model", "fake", "--out", str(tmp_path / "out"), "--dry-run"]
    plan = cli(*args, "--json")
    totals = json.loads(plan.stdout)["totals"][-1]
    assert (totals["calls"], totals["stored_calls"], totals["repeats"]) == (3, 0, 3)
    text = cli(*args).output
    assert "nothing is stored yet" in text
    again_row = next(line for line in text.splitlines() if line.strip().startswith("again"))
    assert re.search(r"\b0 \(0\) \+3 asked again\b", again_row), again_row
    assert "3 (3)" not in text  # the old count: the repeats shown as stored


def test_draws_at_temperature_0_are_refused_and_identical_draws_are_named(tmp_path: Path):
    refused = cli("run", "demo", "--model", "fake", "--draws", "3", "--temperature", "0", "--out", str(tmp_path / "a"))
    assert refused.exit_code == 2 and "identical draws" in refused.output
    greedy = cli("run", "demo", "--model", "fake?reply=答案：A", "--draws", "2", "--limit", "3",
                 "--out", str(tmp_path / "b"))  # one reply to every request: what greedy decoding gives
    assert greedy.exit_code == 0, greedy.output
    assert "warning: identical draws: each of 3 item(s) got the same answer in all 2 draws" in " ".join(
        greedy.output.split())
    differing = cli("run", "demo", "--model", "fake", "--draws", "2", "--limit", "3", "--out", str(tmp_path / "c"))
    assert differing.exit_code == 0 and "identical draws" not in differing.output  # this fake answers per request


HEAVY = ("numpy", "scipy", "httpx", "rich", "pandas", "huggingface_hub", "finharness.core.runner",
         "finharness.backends")


@pytest.mark.parametrize("flag, allowed", [("--version", ()), ("--help", ("rich",))])
def test_version_and_help_import_nothing_heavy(flag: str, allowed: tuple[str, ...]):
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "finharness", flag], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
    heavy = {m for m in imported for h in HEAVY if (m == h or m.startswith(h + ".")) and h not in allowed}
    assert not heavy, f"{flag} imports {sorted(heavy)}"


def test_unparseable_and_sampled_runs_are_flagged_in_status_scorecard_and_compare(tmp_path: Path):
    nonsense = cli("run", "demo", "--model", "fake?reply=no idea&name=vague", "--out", str(tmp_path / "vague"))
    assert nonsense.exit_code == 0, nonsense.output
    assert "[complete, flagged]" in " ".join(nonsense.output.split())  # the title wraps at the table's width
    assert "! flagged: unparseable: 12 of 12 replies could not be read" in " ".join(nonsense.output.split())
    sampled = cli("run", "demo", "--model", "fake", "--temperature", "0.5", "--out", str(tmp_path / "sampled"))
    assert "! flagged: not greedy: sampled at --temperature 0.5" in " ".join(sampled.output.split())
    card = cli("report", str(tmp_path / "vague"), str(tmp_path / "sampled"), "--json")
    cells = {c["model"]: c for c in json.loads(card.stdout)["view"]["cells"]}
    assert cells["fake?reply=no idea&name=vague"]["flags"][0].startswith("unparseable: 12 of 12")
    assert cells["fake"]["flags"] == ["not greedy: sampled at --temperature 0.5"]
    table = " ".join(cli("report", str(tmp_path / "vague"), str(tmp_path / "sampled")).output.split())
    assert "flagged: unparseable" in table and "flagged: not greedy" in table
    compared = cli("compare", str(tmp_path / "vague"), str(tmp_path / "sampled"))
    assert "! A (" in compared.output and "is flagged: unparseable" in compared.output
    assert "is flagged: not greedy" in compared.output
    as_json = json.loads(cli("compare", str(tmp_path / "vague"), str(tmp_path / "sampled"), "--json").stdout)
    assert as_json["flags_b"] == ["not greedy: sampled at --temperature 0.5"]


def test_a_method_that_fell_back_and_a_temperature_the_server_refused_are_flags():
    results = {"counts": {"samples": 10, "failed_samples": 0, "unparseable": 3},
               "extra": {"methods": {"requested": "auto", "ran": ["letters"], "auto": "letters"}},
               "adaptations": [{"role": "model", "parameter": "temperature", "asked": 0.0, "sent": None,
                                "greedy_lost": True, "calls": 10}]}
    assert run_flags(results) == [
        "method fell back: auto ran 'letters', not log-likelihoods (the backend has none)",
        "not greedy: 10 call(s) sampled at the model's default temperature (the server refused temperature 0)"]
    assert run_flags({**results, "extra": {"methods": {"requested": "auto", "auto": "ll"}}, "adaptations": []}) == []


def test_a_composites_difference_of_0_has_the_differences_interval(tmp_path: Path):
    def run(model: str, scores: list[float]) -> RunData:
        samples = tuple({"id": str(i), "score": {"value": v}} for i, v in enumerate(scores))
        return RunData(tmp_path / model, {"task": "bizbench/x", "metrics": {}, "headline": None}, samples)

    rows = [Row(r, "BizBench", r, "task", "accuracy", "higher", True) for r in ("t1", "t2")]
    same = [1.0, 0.0, 1.0, 0.0, 1.0]
    runs = {(r.id, m): run(m, same) for r in rows for m in ("a", "b")}
    d = _paired_mean_difference("bizbench_mean", rows, runs, "a", "b", 0.5)
    assert d.diff == 0.0 and d.ci95 is not None and d.ci95[0] < 0.0 < d.ci95[1]
    assert d.ci95[0] == pytest.approx(-d.ci95[1]) and d.p_value == pytest.approx(1.0) and not d.separable
    assert math.isfinite(d.ci95[1]) and d.ci95[1] < 0.6


def test_a_suite_shows_its_rows_done_of_total_and_its_eta(tmp_path: Path):
    (tmp_path / "twice.toml").write_text(TWICE.replace('limit = 3\n', 'limit = 3\noptions = { max_tokens = 32 }\n', 1),
                                         encoding="utf-8")
    result = cli("suite", str(tmp_path / "twice.toml"), "--model", "fake", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("suite twice: 2 rows x 1 model(s): ")]
    assert "rows 0/2 done" in lines[0] and "suite ETA ?" in lines[0]  # nothing measured yet: no promise
    assert any("rows 1/2 done" in line for line in lines) and "rows 2/2 done · suite ETA 0s" in lines[-1]
