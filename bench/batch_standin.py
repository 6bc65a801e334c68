"""Batch mode against the batch stand-in (tests/servers/batch_server.py): a suite live and in batch mode, then kill -9.

    .venv/bin/python bench/batch_standin.py [--suite FILE] [--provider openai|anthropic] [--kills 3] [--out DIR]

1. The suite (default: the bundled quick suite's rows whose data the shared copy holds) run live, then with
   `--batch`, against one stand-in (the same identities): calls made live, batches created, requests submitted
   (and the most any one was submitted), waves, status polls; whether both stores hold the same rows and the two
   scorecards the same scores; cached tokens the stand-in reported, in the store and on the scorecard.
2. `run demo --batch`, killed with SIGKILL at each moment of its batch (the create reply held back; in progress;
   its results downloading), rerun each time, then finished: calls submitted twice, calls lost (submitted and not
   in the store), and whether the results equal the live run's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finharness.core.store import RunStore  # noqa: E402
from finharness.suite.spec import bundled_suite_toml  # noqa: E402
from tests.e2e.stand_ins import server_answer  # noqa: E402
from tests.servers.batch_server import batch_server  # noqa: E402

FAST = {"FINHARNESS_BATCH_POLL_S": "0.05", "FINHARNESS_BATCH_GATHER_S": "0.3"}
SCORED = ("models", "rows", "cells", "differences", "ratings", "status", "roles")


def finharness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "finharness", *args], env={**os.environ, **FAST},
                          capture_output=True, text=True)


def calls_of(store: Path) -> dict[str, dict]:
    with RunStore(store) as s:
        return {c["key"]: c["response"] for c in s.iter_calls()}


def available_quick(folder: Path) -> Path:
    text = bundled_suite_toml("quick")
    head, *rows = text.split("[[task]]")
    kept = [r for r in rows if not re.search(r'id = "bizbench_(fincode|codefinqa|convfinqa-e)"', r)]
    path = folder / "quick-here.toml"
    path.write_text(head + "".join("[[task]]" + r for r in kept), encoding="utf-8")
    return path


def suite_both_ways(suite: Path, provider: str, out: Path) -> dict:
    with batch_server(server_answer) as server:
        url = server.base_url
        roles = [arg for role in ("--model", "--judge", "--user-model")
                 for arg in (role, f"{provider}:{role.strip('-')[0]}@{url}")]
        started = time.perf_counter()
        live = finharness("suite", str(suite), *roles, "--out", str(out / "live"), "-q")
        live_s = time.perf_counter() - started
        live_calls = server.live_calls
        started = time.perf_counter()
        batch = finharness("suite", str(suite), *roles, "--batch", "--out", str(out / "batch"), "-q")
        batch_s = time.perf_counter() - started
        figures = {"live_exit": live.returncode, "batch_exit": batch.returncode, "live_calls": live_calls,
                   "calls_live_in_batch_run": server.live_calls - live_calls, "batches": len(server.jobs),
                   "submitted": sum(server.submitted.values()), "most_submissions_of_one_request":
                   max(server.submitted.values(), default=0), "polls": server.polls,
                   "batch_sizes": [len(j.requests) for j in server.jobs.values()],
                   "live_wall_s": round(live_s, 1), "batch_wall_s": round(batch_s, 1)}
    figures["same_rows_stored"] = calls_of(out / "live" / "store.sqlite") == calls_of(out / "batch" / "store.sqlite")
    cards = [json.loads((out / d / "scorecard.json").read_text(encoding="utf-8")) for d in ("live", "batch")]
    figures["same_scores"] = {k: cards[0][k] for k in SCORED} == {k: cards[1][k] for k in SCORED}
    with RunStore(out / "batch" / "store.sqlite") as store:
        figures["cached_tokens_in_store"] = sum(int(c["response"].get("cached_tokens") or 0)
                                                for c in store.iter_calls())
    usage = {u["model"]: u for u in cards[1]["usage"]}
    figures["cached_tokens_on_scorecard"] = (usage.get("all") or {}).get("cached_tokens")
    figures["billed_by_role_and_mode"] = (usage.get("all") or {}).get("billed")
    return figures


def wait_for(event, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not event.wait(0.05):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the moment never came")


def kill_nine(provider: str, out: Path) -> dict:
    with batch_server(server_answer) as server:
        spec = f"{provider}:m@{server.base_url}"
        args = [sys.executable, "-m", "finharness", "run", "demo", "--model", spec, "--batch", "--out",
                str(out / "batch"), "-q"]
        env = {**os.environ, **FAST}
        states = []

        def killed_at(prepare, moment, after) -> None:
            prepare()
            proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_for(server.reached[moment], proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            after()
            with RunStore(out / "batch" / "store.sqlite") as store:
                states.append([row["state"] for row in store.batches()])

        def pause_create():
            server.pause_create = True

        def unpause_create():
            server.pause_create = False
            server.release.set()

        def hold():
            server.release.clear()
            server.hold.set()
            server.reached["polled"].clear()

        def results():
            server.hold.clear()
            server.pause_results = True

        def unpause_results():
            server.pause_results = False
            server.release.set()

        killed_at(pause_create, "created", unpause_create)
        killed_at(hold, "polled", lambda: None)
        killed_at(results, "results", unpause_results)
        finished = finharness("run", "demo", "--model", spec, "--batch", "--out", str(out / "batch"), "-q")
        finharness("run", "demo", "--model", spec, "--out", str(out / "live"), "-q")
        submitted = dict(server.submitted)
        batches = len(server.jobs)
    stored = calls_of(out / "batch" / "store.sqlite")
    result = json.loads((out / "batch" / "results.json").read_text(encoding="utf-8"))
    live_result = json.loads((out / "live" / "results.json").read_text(encoding="utf-8"))
    return {"kills": 3, "states_after_each_kill": states, "final_exit": finished.returncode, "batches": batches,
            "requests": len(submitted), "submitted_twice": sum(1 for n in submitted.values() if n > 1),
            "lost": len(set(submitted) - set(stored)), "same_as_live": stored == calls_of(out / "live" / "store.sqlite")
            and result["metrics"] == live_result["metrics"], "status": result["status"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", type=Path)
    parser.add_argument("--provider", default="openai", choices=("openai", "anthropic"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--skip-suite", action="store_true")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="batch-standin-"))
    out.mkdir(parents=True, exist_ok=True)
    report = {"provider": args.provider}
    if not args.skip_suite:
        suite = args.suite or available_quick(out)
        report["suite"] = suite_both_ways(suite, args.provider, out / "suite")
    report["kill_9"] = kill_nine(args.provider, out / "kill")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
