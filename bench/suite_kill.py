"""kill -9 of a whole `finharness suite quick` at seeded random moments, resumed to the end (issue 34, item 6).

    python bench/suite_kill.py [--kills 5] [--seed 0] [--work DIR] [--json FILE]      # fake models
    nice -n 10 python bench/suite_kill.py --embedded --kills 5                         # the embedded 0.5B
    nice -n 10 python bench/suite_kill.py --embedded --spec embedded                   # its default schedule

It runs the quick suite once uninterrupted (the reference), then again in a fresh folder, killed with SIGKILL at
`--kills` moments and rerun after each kill with the same command, then rerun to the end. It prints the kills, the
calls made, the calls made twice (split into those a kill caught between answer and commit, which must be made
again, and those made although their answer was already stored: the goal is 0), the processes that outlived a
kill, and every difference between the resumed suite's scorecard, rows and UCFE matches and the reference's.

Moments are counted in calls, not in seconds: process i is killed once it has made n_i new calls (n_i drawn by a
seeded RNG from 1 to its share of the calls still to make) plus a seeded delay of up to half the reference's mean gap
between calls, so a kill falls inside a call, between calls, in a row's pool or in UCFE's judging step.

Calls are counted in the harness: each process runs the CLI with RunStore.put_call_json wrapped to append the call's
key, pid and role to a log before the store is given the answer (the moment the answer exists: the same place the
fake backend's `log=` writes), so the count is the same for fake and embedded models.

Data: the shared data lacks BizBench's parquet (no public copy here); the bench reads a view of it (links) with the
small kensho/bizbench stand-in parquet the tests serve (tests/unit/test_data_pull_hosts.py) in bizbench/data/.
CFinBench runs its CPA stand-in (the suite's fallback). `usage` (calls, tokens, wall time of finished invocations)
is left out of the comparison: a killed invocation records none (docs/engine.md).

The embedded model runs as `embedded?deterministic=1` (one sequence at a time from a cold cache): by default
its engine batches and reuses KV, and a greedy reply can change with what it decoded beside or before
(7 of 94 shared requests got another reply in a kill chain), which changes later turns' requests and the
grades; the figures name the replies that differ (`replies_differing`) so that cause is told apart from a resume's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.stand_ins import JUDGE_VERDICT, shared_view  # noqa: E402
from tests.reliability._runs import descendants, fake_spec, run_outcome, sample_lines, survivors  # noqa: E402
from tests.unit.test_data_pull_hosts import PINNED_FILES  # noqa: E402

CALL_LOG_ENV = "FINHARNESS_BENCH_CALL_LOG"

LOGGING_CLI = f"""
import json, os, sys
from finharness.core.store import RunStore
from finharness.cli import main

log, real = os.environ.pop({CALL_LOG_ENV!r}), RunStore.put_call_json

def put_call_json(self, key, backend, *args, **kwargs):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:  # one write per line: O_APPEND keeps lines whole
        os.write(fd, (json.dumps({{"key": key, "pid": os.getpid(), "backend": backend, "t": __import__("time").time()}})
                      + "\\n").encode())
    finally:
        os.close(fd)
    return real(self, key, backend, *args, **kwargs)

RunStore.put_call_json = put_call_json
sys.argv = ["finharness", *sys.argv[1:]]
main()
"""

MARGIN = 2
"""Calls the last kill leaves unmade at least, so it lands before the suite ends."""

TIMEOUT_S = 4 * 3600
"""A suite process that runs longer is hung."""


def data_view(root: Path) -> Path:
    """The shared data as links, with the BizBench stand-in parquet in bizbench/data/."""
    shared_view(root)
    for rel, content in PINNED_FILES.items():
        target = root / "bizbench" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return root


def suite_args(data: Path, embedded: str | None, concurrency: int | None) -> list[str]:
    if embedded:
        roles = {"model": embedded, "judge": embedded, "user": embedded}
    else:
        roles = {"model": fake_spec("model", latency=0.02), "judge": fake_spec("judge", latency=0.02,
                                                                              reply=JUDGE_VERDICT),
                 "user": fake_spec("user", latency=0.02, reply="One more question, please.")}
    extra = ["--concurrency", str(concurrency)] if concurrency else []
    return ["suite", "quick", "--model", roles["model"], "--judge", roles["judge"], "--user-model", roles["user"],
            "--data-dir", str(data), "--out", "out", "-q", *extra]


def start(args: list[str], cwd: Path, log: Path, stderr: Path) -> subprocess.Popen:
    with open(stderr, "ab") as err:
        return subprocess.Popen([sys.executable, "-c", LOGGING_CLI, *args], cwd=cwd, stdout=subprocess.DEVNULL,
                                stderr=err, env={**os.environ, CALL_LOG_ENV: str(log)})


def logged(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def committed(db: Path) -> set[str]:
    if not db.exists():
        return set()
    try:
        with sqlite3.connect(db, timeout=60) as conn:
            return {row[0] for row in conn.execute("SELECT key FROM calls")}
    except sqlite3.OperationalError as err:  # before the first process's migration commits
        if "no such table" in str(err):
            return set()
        raise


def outcome(out: Path) -> dict[str, Any]:
    """What must not depend on how the suite got done: scorecard.json without usage, each row's results and samples
    (tests/reliability/_runs.run_outcome), the UCFE matches, suite.json's status and errors."""
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    card = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    card.pop("usage", None)
    rows = {row["id"]: {m: run_outcome(out / folder) for m, folder in row["runs"].items()} for row in manifest["rows"]}
    matches = manifest.get("ucfe", {}).get("matches")
    return {"status": manifest["status"], "errors": manifest["errors"], "scorecard": card, "rows": rows,
            "matches": sample_lines(out / matches) if matches else None}


def replies(db: Path) -> dict[str, str]:
    """Stored call key -> its response as stored."""
    with sqlite3.connect(db, timeout=60) as conn:
        return dict(conn.execute("SELECT key, response FROM calls"))


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in differences(a.get(k), b.get(k), f"{path}/{k}")]
    return [] if a == b else [f"{path}: {str(a)[:100]} != {str(b)[:100]}"]


def run_to_end(args: list[str], cwd: Path, log: Path, name: str) -> float:
    began = time.monotonic()
    proc = start(args, cwd, log, cwd / f"{name}.stderr")
    rc = proc.wait(timeout=TIMEOUT_S)
    if rc != 0:
        raise SystemExit(f"{name}: exit {rc}; see {cwd / f'{name}.stderr'}")
    return time.monotonic() - began


def kill_chain(args: list[str], cwd: Path, log: Path, *, kills: int, total: int, max_delay: float,
               rng: random.Random) -> list[dict[str, Any]]:
    """Start the suite, kill it at a seeded moment, restart; `kills` times. Process i is killed once it has made
    n new calls (n drawn from 1 .. its share of the calls still to make, so every later kill has room) and then a
    seeded delay of up to `max_delay` s."""
    store = cwd / "out" / "store.sqlite"
    done = []
    for i in range(kills):
        before = committed(store)
        seen = len(logged(log))
        distinct = len({c["key"] for c in logged(log)})
        share = max(1, (total - MARGIN - distinct) // (kills - i))
        point, delay = distinct + rng.randint(1, share), round(rng.uniform(0.0, max_delay), 3)
        began = time.monotonic()
        proc = start(args, cwd, log, cwd / f"killed-{i}.stderr")
        while proc.poll() is None and len({c["key"] for c in logged(log)}) < point:
            if time.monotonic() - began > TIMEOUT_S:
                break
            time.sleep(0.01)
        time.sleep(delay)
        injected = proc.poll() is None
        children = descendants(proc.pid)
        if injected:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        after = committed(store)
        made = logged(log)[seen:]
        done.append({"point": point, "distinct_at_kill": len({c["key"] for c in logged(log)}), "delay_s": delay, "injected": injected, "wall_s": round(time.monotonic() - began, 1),
                     "calls_made": len(made), "repeated": sum(c["key"] in before for c in made),
                     "lost_in_flight": sum(c["key"] not in after for c in made),
                     "orphans": sorted(survivors(children))})
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedded", action="store_true", help="the embedded model as model, judge and user")
    parser.add_argument("--spec", default="embedded?deterministic=1", help="the embedded model's spec")
    parser.add_argument("--concurrency", type=int, help="--concurrency of the suite (default: the suite's)")
    parser.add_argument("--data-dir", type=Path, help="a complete data root (default: a view of the shared data)")
    parser.add_argument("--work", type=Path, help="folder for the two suites (default: a new temporary one)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    opts = parser.parse_args()
    work = opts.work or Path(tempfile.mkdtemp(prefix="suite-kill-"))
    work.mkdir(parents=True, exist_ok=True)
    data = opts.data_dir or data_view(work / "data")
    args = suite_args(data.resolve(), opts.spec if opts.embedded else None, opts.concurrency)
    reference, chain = work / "reference", work / "chain"
    for folder in (reference, chain):
        folder.mkdir()

    print(f"work: {work}\nreference: finharness {' '.join(args)}", flush=True)
    reference_wall = run_to_end(args, reference, reference / "calls.log", "reference")
    made = logged(reference / "calls.log")
    total = len({c["key"] for c in made})
    gap = (made[-1]["t"] - made[0]["t"]) / max(1, len(made) - 1) if made else 0.0
    print(f"reference: {len(made)} calls ({total} distinct) in {reference_wall:.1f} s; mean gap {gap:.3f} s",
          flush=True)

    rng = random.Random(f"suite-kill/{opts.seed}")
    chain_began = time.monotonic()
    kills = kill_chain(args, chain, chain / "calls.log", kills=opts.kills, total=total, max_delay=gap / 2, rng=rng)
    for i, k in enumerate(kills):
        print(f"kill {i + 1}: at call {k['point']} + {k['delay_s']} s (chain at {k['distinct_at_kill']}), landed={k['injected']}, {k['calls_made']} calls "
              f"made, {k['lost_in_flight']} answered but not committed, {k['repeated']} repeated, "
              f"orphans {k['orphans'] or 'none'}", flush=True)
    before_final = committed(chain / "out" / "store.sqlite")
    seen = len(logged(chain / "calls.log"))
    final_wall = run_to_end(args, chain, chain / "calls.log", "resumed")
    final_made = logged(chain / "calls.log")[seen:]
    chain_wall = time.monotonic() - chain_began

    chain_calls = logged(chain / "calls.log")
    by_key = Counter(c["key"] for c in chain_calls)
    twice = {k: n for k, n in by_key.items() if n > 1}
    lost = sum(k["lost_in_flight"] for k in kills)
    repeated = sum(k["repeated"] for k in kills) + sum(c["key"] in before_final for c in final_made)
    diff = differences(outcome(chain / "out"), outcome(reference / "out"))
    ours, theirs = replies(chain / "out" / "store.sqlite"), replies(reference / "out" / "store.sqlite")
    other_replies = sorted(k for k in set(ours) & set(theirs) if ours[k] != theirs[k])
    figures = {
        "model": opts.spec if opts.embedded else "fake", "seed": opts.seed, "kills": len(kills),
        "kills_landed": sum(k["injected"] for k in kills), "reference_calls": len(made),
        "reference_wall_s": round(reference_wall, 1), "chain_calls": len(chain_calls),
        "chain_wall_s": round(chain_wall, 1), "final_run_calls": len(final_made), "final_run_wall_s": round(final_wall, 1),
        "keys_made_twice": len(twice), "extra_calls": sum(n - 1 for n in twice.values()),
        "lost_in_flight": lost, "repeated_after_commit": repeated,
        "same_calls_as_reference": set(by_key) == {c["key"] for c in made},
        "replies_differing": len(other_replies),
        "orphans": sum(len(k["orphans"]) for k in kills), "scorecard_differences": diff, "kill_moments": kills,
    }
    print(f"\nkills {figures['kills']} (landed {figures['kills_landed']}); reference {len(made)} calls; chain "
          f"{len(chain_calls)} calls (same set: {figures['same_calls_as_reference']}); made twice: "
          f"{figures['extra_calls']} ({lost} answered but not committed when killed, {repeated} already stored); "
          f"orphans {figures['orphans']}; shared requests answered otherwise: {len(other_replies)}; "
          f"scorecard/rows/matches differences: {len(diff)}")
    for line in diff[:20]:
        print("  " + line)
    if opts.json:
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
