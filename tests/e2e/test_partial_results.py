"""Partial results on any stop (issue 37 item 4): a suite on fake models with latency stopped by Ctrl-C (SIGINT) or
a scheduler's SIGTERM writes suite.json and a scorecard marked PARTIAL with the rows it finished, says what it kept,
prints the command that resumes and exits 130 or 143; that command, run as printed, finishes the suite without asking
any stored call again. `finharness report` reads a stopped suite folder and a stopped run folder; a budget stop and a
row that crashes leave a partial scorecard too."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from finharness.cli import app
from tests.reliability._runs import logged

SUITE = '''
name = "stops"

[[task]]
id = "first"
benchmark = "demo"
task = "demo"
limit = 4

[[task]]
id = "second"
benchmark = "demo"
task = "demo"
options = { max_tokens = 32 }
limit = 12
'''
"""Two rows of different sizes (two pools, one after the other) on one slot: the first finishes in about 1.2 s,
the second takes about 3.6 s more, so a stop after six calls lands in the second."""


def child(args: list[str], cwd: Path, sigint: Any) -> subprocess.Popen:
    """`finharness ARGS` in its own process with SIGINT's disposition `sigint`: a command typed at a terminal has
    the default; one started in the background by a non-interactive shell (a scheduler's job) has it ignored."""
    return subprocess.Popen([sys.executable, "-m", "finharness", *args], cwd=cwd,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))


def stop_after(proc: subprocess.Popen, log: Path, calls: int, how: int) -> tuple[str, str]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(logged(log)) < calls and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the command ended before the stop"
    proc.send_signal(how)
    return proc.communicate(timeout=120)


def resume_of(stderr: str) -> list[str]:
    line = next(line for line in stderr.splitlines() if line.startswith("resume with: "))
    command = shlex.split(line.removeprefix("resume with: "))
    assert command[0] == "finharness"
    return command[1:]


@pytest.mark.parametrize("how, sigint, code, status, said", [
    (signal.SIGINT, signal.SIG_DFL, 130, "interrupted", "interrupted: samples finished and stored"),
    (signal.SIGTERM, signal.SIG_IGN, 143, "terminated", "terminated (SIGTERM): samples finished and stored"),
])
def test_a_stopped_suite_leaves_a_partial_scorecard_and_the_printed_command_finishes_it(
        tmp_path: Path, how: int, sigint: Any, code: int, status: str, said: str):
    (tmp_path / "stops.toml").write_text(SUITE, encoding="utf-8")
    log, out = tmp_path / "calls.log", tmp_path / "out"
    args = ["suite", "stops.toml", "--model", f"fake?latency=0.3&log={log}", "--concurrency", "1", "--out", "out",
            "-q"]
    stdout, stderr = stop_after(child(args, tmp_path, sigint), log, 6, how)
    assert said in stderr and "Traceback" not in stderr, stderr
    assert resume_of(stderr) == args
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert manifest["status"] == status and manifest["partial"].startswith("1 of 2 row runs finished")
    assert manifest["resume"] == "finharness " + shlex.join(args)
    rows = {row["id"]: row for row in manifest["rows"]}
    assert list(rows["first"]["runs"]) == [f"fake?latency=0.3&log={log}"] and rows["second"]["runs"] == {}
    (why,) = manifest["unfinished"].values()
    assert why["second"].startswith("stopped at ") and why["second"].endswith("of 12 samples (finished ones are stored)")
    card = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    assert card["status"] == status and card["partial"].startswith("1 of 2 row runs finished")
    cells = {c["row"]: c for c in card["cells"]}
    assert cells["first"]["status"] == "complete" and cells["second"]["status"] == "missing"
    assert "PARTIAL" in (out / "scorecard.md").read_text(encoding="utf-8") and "PARTIAL" in stdout
    report = CliRunner().invoke(app, ["report", str(out)])
    assert report.exit_code == 0 and "PARTIAL: 1 of 2 row runs finished" in report.output, report.output
    assert "resume with: finharness suite stops.toml" in " ".join(report.output.split())

    before = logged(log)
    finished = subprocess.run([sys.executable, "-m", "finharness", *resume_of(stderr)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    stored_before = {c["key"] for c in before}
    assert [c for c in logged(log)[len(before):] if c["key"] in stored_before] == []  # nothing asked again
    done = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert done["status"] == "complete" and "partial" not in done and "resume" not in done
    assert len({c["key"] for c in logged(log)}) == 16  # 4 + 12 calls, each made once over both invocations


def test_report_on_a_stopped_run_folder_shows_what_its_store_holds(tmp_path: Path):
    log = tmp_path / "calls.log"
    args = ["run", "demo", "--model", f"fake?latency=0.3&log={log}", "--concurrency", "1", "--out", "out", "-q"]
    _, stderr = stop_after(child(args, tmp_path, signal.SIG_IGN), log, 3, signal.SIGTERM)
    assert "terminated (SIGTERM)" in stderr and "Traceback" not in stderr, stderr
    assert not (tmp_path / "out" / "results.json").exists()
    partial = json.loads((tmp_path / "out" / "partial.json").read_text(encoding="utf-8"))
    assert partial["status"] == "terminated" and partial["resume"] == "finharness " + shlex.join(args)
    report = CliRunner().invoke(app, ["report", str(tmp_path / "out")])
    assert report.exit_code == 0, report.output
    text = " ".join(report.output.split())
    finished = partial["tasks"]["demo"]["samples_done"]
    assert f"demo on fake: {finished} of 12 samples finished and stored" in text, text
    assert "terminated (SIGTERM)" in text and f"resume with: finharness {shlex.join(args)}" in text
    as_json = json.loads(CliRunner().invoke(app, ["report", str(tmp_path / "out"), "--json"]).stdout)
    assert as_json["stopped"][0]["runs"][0]["samples_finished"] == finished >= 3


def test_a_budget_stop_marks_the_scorecard_partial_and_prints_the_resume(tmp_path: Path):
    (tmp_path / "stops.toml").write_text(SUITE, encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["suite", str(tmp_path / "stops.toml"), "--model", "fake", "--out", str(out),
                                      "--budget-tokens", "400", "-q"])
    assert result.exit_code == 3, result.output
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "budget" and "(the budget stopped it)" in manifest["partial"]
    assert "resume with: finharness " in result.output
    assert json.loads((out / "scorecard.json").read_text(encoding="utf-8"))["partial"]


CRASHING_TASK = '''
from finharness.benchmarks.demo.task import DemoTask


class Crashing(DemoTask):
    name = "crashing"

    def load(self, data_dir):
        raise RuntimeError("a bug while loading")
'''


def test_a_row_that_crashes_leaves_the_other_rows_scorecard_and_its_traceback(tmp_path: Path):
    (tmp_path / "crash.py").write_text(CRASHING_TASK, encoding="utf-8")
    (tmp_path / "crash.toml").write_text(SUITE.split("[[task]]\nid = \"second\"")[0]
                                         + f'[[task]]\nid = "broken"\ntask = "{tmp_path / "crash.py"}:Crashing"\n',
                                         encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["suite", str(tmp_path / "crash.toml"), "--model", "fake", "--out", str(out),
                                      "-q"])
    assert isinstance(result.exception, RuntimeError) and "a bug while loading" in str(result.exception)
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "crashed" and manifest["partial"].startswith("1 of 2 row runs finished")
    assert manifest["errors"]["fake"]["broken"].startswith("crashed (a bug")
    card = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    assert {c["row"]: c["status"] for c in card["cells"]} == {"first": "complete", "broken": "missing"}
    assert "resume with: finharness suite" in result.output


def test_a_run_stopped_before_the_store_exists_is_named_as_no_run_folder(tmp_path: Path):
    result = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no results.json and no run store here" in result.output



def test_a_stop_while_the_suite_plans_its_eta_says_nothing_is_stored_and_how_to_start(tmp_path: Path, monkeypatch):
    """Before its first call a suite plans its work for the ETA (seconds; with a local model, a model load): a Ctrl-C
    there said nothing at all and exited 130. Now the same message as any stop: nothing stored, the command."""
    import finharness.suite.plan as plan

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # what Ctrl-C raises in the main thread while the plan is being made

    monkeypatch.setattr(plan, "plan_suite", interrupted)
    suite, out = tmp_path / "stops.toml", tmp_path / "out"
    suite.write_text(SUITE, encoding="utf-8")
    result = CliRunner().invoke(app, ["suite", str(suite), "--model", "fake", "--out", str(out)])
    assert result.exit_code == 130, result.output
    assert "planning the suite's work for its ETA" in result.output
    assert "interrupted: samples finished and stored: nothing" in result.output
    assert f"resume with: finharness suite {suite} --model fake --out {out}" in result.output


STOP_INSIDE_A_STEP = '''
import asyncio, os, signal, sys
from pathlib import Path
import typer
from finharness.cli import interrupted_says

signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == "ignored" else signal.default_int_handler)


async def worker():
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside this task's step
    await asyncio.sleep(30)


async def main():
    await asyncio.gather(worker(), asyncio.sleep(30))


try:
    with interrupted_says(Path("store.sqlite")):
        asyncio.run(main())
except typer.Exit as stop:  # what the command line's app turns into the exit status
    sys.exit(stop.exit_code)
'''


@pytest.mark.parametrize("sigint", ["ignored", "default"])
def test_a_sigterm_landing_inside_a_task_stops_cleanly(tmp_path: Path, sigint: str):
    """A SIGTERM whose handler runs inside a task's step (here, always) stops the run the Ctrl-C way, with no
    traceback: raised there, the task kept the KeyboardInterrupt and asyncio logged it ('exception was never
    retrieved'); the run of test_report_on_a_stopped_run_folder_shows_what_its_store_holds met that by chance."""
    script = tmp_path / "stop.py"
    script.write_text(STOP_INSIDE_A_STEP, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), sigint], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 143, done.stderr
    assert "terminated (SIGTERM)" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "never retrieved" not in done.stderr, done.stderr
