"""Data before work (issue 37 item 1), through the command line, against local stand-ins of the Hugging Face Hub and
GitHub's raw host (tests/servers/data_hosts.py) and without them (offline):

- a suite whose data root lacks what its rows read stops before the first call with one list and the one command
  that fetches it; the dry run says the same, plans the rest and exits 2; neither writes anything in the data root;
- `finharness data pull --suite FILE` pulls every missing dataset, one line each, after which the suite runs; with
  `--pull` the suite does it itself;
- offline, the pull fails at once, one line per dataset, without a library's `Retrying in` lines, and leaves no
  folder behind;
- what can never be had here, or is not pulled yet, stops the suite unless `--skip-missing`, and the scorecard says
  why each row is missing;
- `finharness doctor`'s data row reads what the data root holds, not that a folder exists.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from finharness.cli import app
from finharness.doctor import check_data_dir

from ..servers.data_hosts import hub_server, raw_server
from ..unit.test_data_pull_hosts import PIN, PINNED_FILES
from .stand_ins import SHARED, raw_mirror_router

SUITE = '''
name = "small"

[[task]]
id = "demo"
benchmark = "demo"
task = "demo"
limit = 2

[[task]]
id = "tatqa"
benchmark = "BizBench"
task = "bizbench/tatqa-e"
limit = 1

[[task]]
id = "convfinqa"
benchmark = "BizBench"
task = "bizbench/convfinqa-e"
limit = 1
'''
"""Three datasets to fetch: tatqa and bizbench-prompts from GitHub's raw host, bizbench from the Hub."""

NEVER = '''
[[task]]
id = "official_fundamentals"
benchmark = "FinTradeBench"
task = "fintradebench"
options = { mode = "norag", per_category = 1, levels = "L1", select = false, fundamentals = "official" }
'''
"""A row whose data (the release's fundamentals, derived files) no public host serves."""


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def files_in(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def hosts(tmp_path: Path, monkeypatch, shared_data: Path) -> Iterator[None]:
    """The Hub (kensho/bizbench at its pinned commit) and GitHub's raw host (every registered file of the shared
    data), a private cache and Hub cache."""
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for name in ("HF_HUB_OFFLINE", "FINHARNESS_NO_PULL", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                 "ALL_PROXY", "all_proxy", "FINHARNESS_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    with contextlib.ExitStack() as stack:
        hub = stack.enter_context(hub_server())
        hub.commit("kensho/bizbench", PINNED_FILES, sha=PIN, ref=None)
        raw = stack.enter_context(raw_server())
        raw.router = raw_mirror_router(SHARED)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("FINHARNESS_GITHUB_RAW", raw.url)
        yield


@pytest.fixture
def offline(tmp_path: Path, monkeypatch) -> None:
    """Both hosts at a port nobody listens on: every connection is refused at once."""
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    for name in ("HF_HUB_OFFLINE", "FINHARNESS_NO_PULL", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                 "ALL_PROXY", "all_proxy", "FINHARNESS_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("FINHARNESS_GITHUB_RAW", "http://127.0.0.1:9")


def small_suite(tmp_path: Path) -> tuple[Path, Path, Path, list[str]]:
    """SUITE written to a file, an empty data root, the out folder, and the suite command over them."""
    suite, root, out = tmp_path / "small.toml", tmp_path / "data", tmp_path / "out"
    suite.write_text(SUITE, encoding="utf-8")
    root.mkdir()
    return suite, root, out, ["suite", str(suite), "--model", "fake", "--data-dir", str(root), "--out", str(out), "-q"]


def test_missing_data_stops_the_suite_with_one_list_and_a_pull_fetches_it(tmp_path: Path, hosts):
    suite, root, out, run = small_suite(tmp_path)
    stopped = cli(*run)
    assert stopped.exit_code == 2, stopped.output
    text = stopped.output
    for dataset in ("tatqa", "bizbench-prompts", "bizbench"):
        assert f"  {dataset}: " in text
    assert f"fetch all of it with: finharness data pull --suite {suite} --data-dir {root}" in text
    assert "nothing was run" in text and not out.exists() and files_in(root) == []
    dry = cli(*run, "--dry-run", "--json")
    assert dry.exit_code == 2 and json.loads(dry.stdout)["tasks"][0]["row"] == "demo"  # the rest is planned
    assert files_in(root) == [] and not out.exists()  # a dry run pulls nothing, writes nothing

    pulled = cli("data", "pull", "--suite", str(suite), "--data-dir", str(root))
    assert pulled.exit_code == 0, pulled.output
    lines = [line for line in pulled.output.splitlines() if " file(s) fetched " in line]
    assert sorted(line.split(":")[0] for line in lines) == ["bizbench", "bizbench-prompts", "tatqa"]
    ran = cli(*run)
    assert ran.exit_code == 0, ran.output
    assert json.loads((out / "suite.json").read_text(encoding="utf-8"))["status"] == "complete"


def test_the_suite_pulls_what_it_needs_with_pull(tmp_path: Path, hosts):
    suite, root = tmp_path / "small.toml", tmp_path / "data"
    suite.write_text(SUITE, encoding="utf-8")
    result = cli("suite", str(suite), "--model", "fake", "--data-dir", str(root), "--out", str(tmp_path / "out"),
                 "--pull", "-q")
    assert result.exit_code == 0, result.output
    assert sum(line.startswith("pulled ") for line in result.output.splitlines()) == 3


def test_offline_the_pull_fails_at_once_one_line_a_dataset_and_writes_nothing(tmp_path: Path, offline):
    suite, root = tmp_path / "small.toml", tmp_path / "data"
    suite.write_text(SUITE, encoding="utf-8")
    root.mkdir()
    started = time.monotonic()
    result = cli("data", "pull", "--suite", str(suite), "--data-dir", str(root))
    assert time.monotonic() - started < 10 and result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert sorted(line.split(":")[1].strip() for line in errors) == ["bizbench", "bizbench-prompts", "tatqa"]
    assert all("no network: cannot reach 127.0.0.1:9" in line for line in errors)
    assert "Retrying" not in result.output and files_in(root) == []
    one = cli("data", "pull", "bizbench", "--data-dir", str(root))  # the Hub alone: no empty bizbench/data/ left
    assert one.exit_code == 2 and "no network" in one.output and files_in(root) == []
    assert not check_data_dir(root).ok


def test_data_that_cannot_be_had_here_stops_unless_skip_missing(tmp_path: Path, shared_data: Path, monkeypatch):
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    suite, out = tmp_path / "never.toml", tmp_path / "out"
    suite.write_text('name = "never"\n' + SUITE.split("[[task]]\nid = \"tatqa\"")[0].split("\n", 2)[2] + NEVER,
                     encoding="utf-8")
    root = tmp_path / "data"
    root.mkdir()
    (root / "fintradebench").mkdir()
    for entry in (shared_data / "fintradebench").iterdir():  # everything but the release's fundamentals
        if entry.name != "fundamentals":
            (root / "fintradebench" / entry.name).symlink_to(entry)
    args = ["suite", str(suite), "--model", "fake", "--judge", "fake", "--data-dir", str(root), "--out", str(out),
            "-q"]
    stopped = cli(*args)
    assert stopped.exit_code == 2 and "not to be had here (1 dataset(s)):" in stopped.output, stopped.output
    assert "fintradebench-fundamentals: its files are derived" in " ".join(stopped.output.split())
    assert "--skip-missing" in stopped.output
    skipped = cli(*args, "--skip-missing")
    assert skipped.exit_code in (0, 1), skipped.output
    card = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    cells = {c["row"]: c for c in card["cells"]}
    assert cells["demo"]["status"] == "complete"
    assert cells["official_fundamentals"]["status"] == "missing"
    assert cells["official_fundamentals"]["why"].startswith("skipped (--skip-missing): needs dataset "
                                                            "fintradebench-fundamentals")


def test_offline_skip_missing_runs_the_rows_whose_data_is_here(tmp_path: Path, offline):
    """Not pulled yet and no network: --skip-missing goes on without those rows, each labelled with the pull."""
    suite, root, out, run = small_suite(tmp_path)
    stopped = cli(*run)
    assert stopped.exit_code == 2 and "or run without those rows with --skip-missing" in stopped.output
    skipped = cli(*run, "--skip-missing")
    assert skipped.exit_code in (0, 1), skipped.output
    assert "note: without 2 row(s) whose data is not here: tatqa, convfinqa" in skipped.output
    cells = {c["row"]: c for c in json.loads((out / "scorecard.json").read_text(encoding="utf-8"))["cells"]}
    assert cells["demo"]["status"] == "complete"
    for row, dataset in (("tatqa", "tatqa"), ("convfinqa", "bizbench")):
        assert cells[row]["status"] == "missing"
        assert cells[row]["why"].startswith("skipped (--skip-missing): needs dataset "), cells[row]["why"]
    assert files_in(root) == []  # nothing was pulled or left behind


def test_the_doctor_reads_what_the_data_root_holds(tmp_path: Path, shared_data: Path):
    root = tmp_path / "data"
    (root / "bizbench" / "data").mkdir(parents=True)  # what a failed pull used to leave
    empty = check_data_dir(root)
    assert not empty.ok and "no dataset" in empty.detail and "data pull --suite quick" in empty.fix
    (root / "ucfe").symlink_to(shared_data / "ucfe")
    some = check_data_dir(root)
    assert "ucfe" in some.detail and "present" in some.detail and not some.ok  # quick needs more than UCFE
    assert check_data_dir(shared_data).detail.count("present") >= 1
