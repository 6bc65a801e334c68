"""Ctrl-C (issue 24 item 7): a run interrupted with SIGINT says what it stored and the command that resumes, exits 130,
and that command, run as printed, finishes the run without asking any stored call again."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.reliability._runs import logged


def test_ctrl_c_says_what_is_stored_and_the_printed_command_resumes(tmp_path: Path):
    log = tmp_path / "calls.log"
    out = tmp_path / "out"
    args = ["run", "demo", "--model", f"fake?latency=0.3&log={log}", "--concurrency", "1", "--out", str(out), "-q"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # A process started in the background by a non-interactive shell (a CI job, `make test &`) inherits SIGINT
    # ignored, and Python keeps it so: the run would never see the Ctrl-C. The child takes the default, as a
    # command typed at a terminal does.
    proc = subprocess.Popen([sys.executable, "-m", "finharness", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not log.exists() or len(logged(log)) < 3):
        time.sleep(0.05)  # until three calls were answered: the interrupt lands mid-run
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted: samples finished and stored: demo " in stderr and "Traceback" not in stderr
    resume = next(line for line in stderr.splitlines() if line.startswith("resume with: "))
    command = shlex.split(resume.removeprefix("resume with: "))
    assert command[0] == "finharness" and command[1:] == args
    assert not (out / "results.json").exists()  # an interrupted run leaves no results.json
    with sqlite3.connect(out / "store.sqlite") as conn:
        stored = {row[0] for row in conn.execute("SELECT key FROM calls")}
    assert stored  # what was made before the interrupt is kept
    before = len(logged(log))
    finished = subprocess.run([sys.executable, "-m", "finharness", *command[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    made_again = [c for c in logged(log)[before:] if c["key"] in stored]
    assert made_again == []  # no stored call is asked again
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["status"] == "complete" and results["cumulative"]["invocations"] == 2
    assert results["cumulative"]["calls"] == 12  # both invocations together made every call once
