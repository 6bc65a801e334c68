"""A budget holds against a server that reports more tokens than the calls asked for (issue 34 item 4).

The stand-in (tests/servers/fault_server.py) reports 60 completion tokens for every reply whatever max_tokens says
(8 here), as a reasoning model or a server that ignores max_tokens does, and answers slowly enough that the run's
8 slots are all busy. Through the CLI, at --concurrency 8: the run stops with exit 3, the message says that the
server reported more than the calls asked for and by how much, and the spend passes the budget by no more than
what the calls the server had in flight at once took beyond what they reserved.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from finharness.core.model import estimate_tokens
from tests.servers.fault_server import MODEL_ID, _words, fault_server

REPORTED = 60
"""Completion tokens every reply reports."""

ASKED = 8
"""max_tokens of every call (--max-tokens)."""

PER_TOKEN = 0.001
"""USD a token under the --price of the cost case (1000 per million, in and out)."""


def reported_usage(body: dict, text: str) -> dict:
    return {"prompt_tokens": _words(body), "completion_tokens": REPORTED}


def most_overshoot(bodies: list[dict]) -> int:
    """The most a call took beyond its reservation: what the server reported less what the harness could count
    before the call (the prompt estimated as ESTIMATE_RULE says, a hosted API having no tokenizer, plus
    max_tokens)."""
    estimated = [sum(estimate_tokens(m["content"]) for m in b["messages"]) + 4 * len(b["messages"]) for b in bodies]
    return max(_words(b) + REPORTED - (e + ASKED) for b, e in zip(bodies, estimated))


@pytest.mark.parametrize("limit", [["--budget-tokens", "600"], ["--budget-tokens", "1000"],
                                   ["--price", f"{MODEL_ID}=1000/1000", "--max-cost", "0.6"]],
                         ids=["tokens-600", "tokens-1000", "cost-0.6"])
def test_a_server_that_reports_more_than_max_tokens_stops_the_run_within_the_calls_in_flight(tmp_path: Path,
                                                                                            limit: list[str]):
    env = {k: v for k, v in os.environ.items() if k not in ("FINHARNESS_STORE", "OPENAI_API_KEY")}
    with fault_server(usage=reported_usage, latency=0.3) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "finharness", "run", "demo", "--model", f"openai:{MODEL_ID}@{server.base_url}",
             *limit, "--concurrency", "8", "--max-tokens", str(ASKED), "--out", str(tmp_path / "out"), "-q"],
            capture_output=True, text=True, env={**env, "COLUMNS": "400"}, cwd=tmp_path, timeout=300)
        server.wait_settled()
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (f"reported more than its calls asked for: {server.counters.requests} call(s), up to {REPORTED} "
            f"completion tokens where a call asked for at most {ASKED} ({REPORTED - ASKED} more)") in said
    assert all(body["max_tokens"] == ASKED for body in server.counters.bodies)
    spent = int(re.search(r"spent in all ([\d,]+) tokens", said).group(1).replace(",", ""))
    assert spent == sum(_words(b) + REPORTED for b in server.counters.bodies), "every reply charged whole"
    in_flight = server.counters.max_in_flight
    assert 1 <= in_flight <= 8
    crossing = in_flight * most_overshoot(server.counters.bodies)
    if "--max-cost" in limit:
        cost = float(re.search(r"spent in all [\d,]+ tokens, \$([\d.]+)", said).group(1))
        assert cost == pytest.approx(spent * PER_TOKEN)
        assert cost <= 0.6 + crossing * PER_TOKEN + 1e-9
    else:
        assert spent <= int(limit[1]) + crossing
