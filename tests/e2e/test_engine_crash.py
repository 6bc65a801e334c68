"""A native crash in the llama.cpp engine fails only the calls in flight, never the run.

The crash is real: the engine process kills itself with SIGSEGV when it receives its N-th request of
one kind (the test-only switch FINHARNESS_TEST_ENGINE_CRASH=KIND:N[:every], see backends/llamacpp_engine.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from finharness.backends import embedded, llamacpp
from finharness.backends.llamacpp_engine import CRASH_SWITCH
from finharness.core.backend import BackendError
from finharness.core.types import GenerateParams, GenerateRequest, LoglikelihoodRequest, messages


def _run(args: list[str], cwd: Path, crash: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != CRASH_SWITCH}
    if crash:
        env[CRASH_SWITCH] = crash
    return subprocess.run([sys.executable, "-m", "finharness", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def _crash_then_resume(tmp_path: Path, args: list[str], crash: str, total: int) -> None:
    crashed = _run(args, tmp_path, crash)
    assert crashed.returncode == 1, crashed.stderr  # the run ends, incomplete, instead of dying with it
    first = _results(tmp_path / "out")
    assert first["status"] == "incomplete"
    counts = first["counts"]
    # One call was in flight when the engine died (concurrency 1); a fresh engine served the rest.
    assert counts["failures"] == 1 and counts["failed_samples"] == 1
    assert counts["calls"] == total - 1 and counts["samples_done"] == total
    message = counts["failure_examples"][0]
    assert "the llama.cpp engine process" in message and "SIGSEGV" in message
    assert "llama-cpp-python 0.3.36" in message and "CPU features" in message  # which engine and build
    assert "finharness.backends.engine_build --force" in message and "finharness doctor" in message  # the fix
    assert "SIGSEGV" in crashed.stdout + crashed.stderr  # shown to the user, not only in results.json

    resumed = _run(args, tmp_path, None)
    assert resumed.returncode == 0, resumed.stderr
    second = _results(tmp_path / "out")
    assert second["status"] == "complete"
    assert second["counts"]["cache_hits"] == total - 1  # everything committed before the crash was kept
    assert second["counts"]["calls"] == 1  # only the call that died is made again
    assert second["metrics"][next(iter(second["metrics"]))]["n"] >= first["metrics"][next(iter(first["metrics"]))]["n"]


@pytest.mark.model
def test_generation_crash_fails_one_call_and_a_rerun_completes(tmp_path: Path):
    args = ["run", "demo", "--model", "embedded", "--limit", "4", "--out", "out", "--store", "s.sqlite", "-q"]
    _crash_then_resume(tmp_path, args, "generate:3", total=4)


@pytest.mark.model
def test_loglikelihood_crash_fails_one_call_and_a_rerun_completes(tmp_path: Path, shared_data: Path):
    args = ["run", "bizbench/finknow", "--model", "embedded", "--limit", "4", "--data-dir", str(shared_data),
            "--out", "out", "--store", "s.sqlite", "-q"]
    _crash_then_resume(tmp_path, args, "score:2", total=4)


@pytest.mark.model
def test_a_crashing_engine_is_restarted_a_bounded_number_of_times(monkeypatch):
    monkeypatch.setenv(CRASH_SWITCH, "generate:1:every")  # every engine dies on its first generation
    backend = embedded.from_spec("embedded?n_ctx=512&threads=2")
    request = GenerateRequest(messages(("user", "Hi")), GenerateParams(max_tokens=2))
    try:
        for _ in range(llamacpp.MAX_ENGINE_STARTS):
            with pytest.raises(BackendError, match="SIGSEGV") as died:
                asyncio.run(backend.generate(request))
            assert died.value.kind == "engine_crash" and not died.value.retryable
        with pytest.raises(BackendError, match=f"died {llamacpp.MAX_ENGINE_STARTS} times; not starting it again"):
            asyncio.run(backend.generate(request))
    finally:
        backend.close()


@pytest.mark.model
def test_a_crash_in_one_kind_leaves_the_other_working_after_restart(monkeypatch):
    monkeypatch.setenv(CRASH_SWITCH, "score:1")
    backend = embedded.from_spec("embedded?n_ctx=512&threads=2")
    try:
        with pytest.raises(BackendError, match="SIGSEGV"):
            asyncio.run(backend.loglikelihood(LoglikelihoodRequest("Answer:", (" A", " B"))))
        reply = asyncio.run(backend.generate(GenerateRequest(messages(("user", "Hi")), GenerateParams(max_tokens=2))))
        assert reply.completion_tokens >= 1  # a fresh engine process answered
    finally:
        backend.close()
