"""`finharness doctor`: a table of what works, a fix per failed row, exit 1 when the default commands cannot run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from finharness.backends.llamacpp_engine import CRASH_SWITCH


def _doctor(*args: str, crash: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != CRASH_SWITCH}
    if crash:
        env[CRASH_SWITCH] = crash
    return subprocess.run([sys.executable, "-m", "finharness", "doctor", *args], env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.model
def test_doctor_on_a_working_machine_says_which_cpu_features_the_engine_uses():
    done = _doctor("--json")
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert done.returncode == 0, done.stdout
    engine = rows["engine loads and decodes"]
    assert engine["ok"] and engine["required"]
    assert "llama-cpp-python 0.3.36" in engine["detail"] and "CPU features" in engine["detail"]
    assert rows["engine build has no AMX code"]["ok"]
    assert rows["embedded model file"]["ok"]
    assert {"bubblewrap isolates", "chromium for browser tests", "benchmark data (for the quick suite)"} <= set(rows)


@pytest.mark.model
def test_doctor_shows_a_crashing_engine_as_a_failed_row_with_its_fix():
    done = _doctor("--engine-only", "--json", crash="generate:1")
    assert done.returncode == 1
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    engine = rows["engine loads and decodes"]
    assert not engine["ok"] and "SIGSEGV" in engine["detail"]
    assert "engine_build --force" in engine["fix"]
    assert rows["embedded model file"]["ok"]  # one broken part does not hide the others
    table = _doctor("--engine-only", crash="generate:1")
    assert table.returncode == 1 and "FAIL" in table.stdout and "engine_build" in table.stdout
