"""The faults issue 34 found unmeasured, on a whole `finharness suite` of fake models that log every call they make.

The suite (SUITE below) has a row of each kind: the demo, CFinBench's CPA stand-in, BizBench TAT-QA(E), UCFE with
its simulated user and its judging step, FinTradeBench No-RAG with its judge, FinanceBench closed-book and agent.

- **kill -9 at seeded random moments**, four in the rows' pools and one inside UCFE's judging step (after every
  row has run), each time restarting the same command, then resumed to the end: the scorecard, every row's results
  and samples and the UCFE matches equal an uninterrupted suite's; no call committed before a process started was
  made by it (counted on the call logs); the calls made over the chain are the uninterrupted suite's plus only those
  a kill caught between answer and commit; each sample is stored once; no process outlives a kill; no JSON file is
  ever left half-written. The default set is one seed; `-m slow` four more.
- **Two suites on one out folder at once** (a suite takes no --store: its store is OUT/store.sqlite): the same
  command started twice, and (slow) two suites of different models; and two pooled `finharness run`s on one --store.
  Every process finishes, SQLite's integrity check passes, each finished sample is stored once, and the results equal
  runs made alone.
- **A full disk** while the suite runs (filled when the calls logged reach a point) and while its scorecard is
  written (filled between the scorecard's first file and the next): one `error:` line naming the file and the full
  disk, no traceback, no half-written file, what was committed is kept, and the same command, rerun once space is
  freed, makes none of the committed calls again and ends with the uninterrupted suite's scorecard. The disk is a
  tmpfs mounted for the test (root); where mounting is not permitted, the file-size limit (`ulimit -f`, set on the
  running suite with prlimit) stands in for it.

Usage (calls, tokens, wall time: `usage` in the scorecard) is left out of every comparison: it sums what each
finished invocation recorded, and a killed invocation records nothing (docs/engine.md), so it differs by design.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import resource
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import pytest
from typer.testing import CliRunner

from ..benchmarks.test_fintradebench_task import verdict
from ..unit.test_data_root import ideafinbench
from ._runs import (
    FINHARNESS,
    PROCESS_TIMEOUT_S,
    Killed,
    KillPoint,
    cli,
    committed_keys,
    fake_spec,
    logged,
    marks,
    run_outcome,
    run_until_killed,
    sample_lines,
    since,
    stored_samples,
)

LATENCY = 0.04
"""Each fake call's latency (s): the pools take a few seconds, so the kills land while calls are in flight."""
CONCURRENCY = 2
ROLES = ("model", "user", "judge")
POOL_KILLS, JUDGING_KILLS = 4, 1
JUDGING_MARGIN = CONCURRENCY
"""Judge calls left after the judging kill's point, so the kill lands before the suite ends."""
SLOW_SEEDS = (1, 2, 3, 4)

SUITE = '''
name = "faults"
description = "a row of every kind, a few items each"
seed = 0

[[task]]
id = "demo"
benchmark = "demo"
task = "demo"
limit = 6

[[task]]
id = "cfinbench"
benchmark = "CFinBench"
task = "cfinbench"
label = "CFinBench (CPA stand-in)"
options = { exam = "standin:cpa" }
sample = 6

[[task]]
id = "tatqa"
benchmark = "BizBench"
task = "bizbench/tatqa-e"
label = "TAT-QA (E)"
limit = 4

[[task]]
id = "ucfe"
benchmark = "UCFE"
task = "ucfe"
options = { tasks = "Analyst", max_rounds = 2 }
sample = 3

[[task]]
id = "ftb"
benchmark = "FinTradeBench"
task = "fintradebench"
label = "FinTradeBench No-RAG"
options = { mode = "norag", per_category = 1, levels = "L1", select = false, max_tokens = 64 }

[[task]]
id = "fb_closed"
benchmark = "FinanceBench"
task = "financebench"
label = "FinanceBench closed book"
options = { mode = "closed-book", grader = "rules" }
limit = 2

[[task]]
id = "fb_agent"
benchmark = "FinanceBench"
task = "financebench"
label = "FinanceBench agent"
options = { mode = "agent", grader = "rules", dense = "off" }
limit = 2
'''


# --- the suite, its data and its models -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def suite_data(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """The shared data without CFinBench's questions and with a small IDEAFinBench CPA copy (the stand-in), in a
    cache of this module's own (the stand-in is converted there)."""
    root = ideafinbench(tmp_path_factory.mktemp("suite-data"))
    for name in ("fintradebench", "tatqa", "nasdaq100_ohlcv", "bizbench", "ucfe", "financebench"):
        (root / name).symlink_to(shared_data / name)
    return root


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory):
    """Every suite of this module (in this process and the ones it starts) converts the stand-in into one cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FINHARNESS_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def model_script(data: Path) -> list[dict[str, Any]]:
    """One script for every row (rules match the last user or tool message, first match wins): FinanceBench closed
    book is answered, an agent episode reads the 3M page, computes on it and answers; everything else gets the fake's
    seeded default answer."""
    questions = [json.loads(line)["question"] for line in
                 (data / "financebench" / "data" / "financebench_open_source.jsonl").read_text().splitlines()[:10]]
    return [{"match": "Answer this question:", "reply": "The answer is $1,577 million."},
            {"match": "page 59 of", "tool_calls": [{"name": "calculator", "arguments": {"expression": "1577 + 0"}}]},
            {"match": "1577", "reply": "The answer is $1,577 million."},
            *({"match": q, "tool_calls": [{"name": "read_page", "arguments": {"document": "3M_2018_10K", "page": 59}}]}
              for q in questions)]


def prepare(workdir: Path, data: Path) -> None:
    """The suite file and the fake models' scripts, in `workdir` (the suites run there: every path in a spec is
    relative, so the scorecards of suites run in different folders can be compared)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "faults.toml").write_text(SUITE, encoding="utf-8")
    (workdir / "model.jsonl").write_text("".join(json.dumps(r) + "\n" for r in model_script(data)), encoding="utf-8")
    (workdir / "user.jsonl").write_text(json.dumps({"match": "<Consultation Ended>", "reply": "<Consultation Ended>"})
                                        + "\n", encoding="utf-8")


def specs(name: str = "model") -> dict[str, str]:
    """--model (named `name`), --judge and --user-model: fake models with latency, each logging to ROLE.log. The judge
    answers both judged benchmarks: FinTradeBench reads the rubric JSON, UCFE the last [[n]]."""
    return {"model": fake_spec(name, latency=LATENCY, log=Path(f"{name}.log"), script="model.jsonl"),
            "judge": fake_spec("judge", latency=LATENCY, log=Path("judge.log"), reply=verdict(4) + "\n[[1]]"),
            "user": fake_spec("user", latency=LATENCY, log=Path("user.log"), reply="One more question, please.",
                              script="user.jsonl")}


def suite_args(data: Path, *models: str, out: str = "out") -> list[str]:
    roles = specs()
    given = [a for m in (models or ("model",)) for a in ("--model", specs(m)["model"])]
    return ["suite", "faults.toml", *given, "--judge", roles["judge"], "--user-model", roles["user"],
            "--data-dir", str(data), "--out", out, "--concurrency", str(CONCURRENCY), "-q"]


def role_logs(workdir: Path, *models: str) -> list[Path]:
    return [workdir / f"{name}.log" for name in (*(models or ("model",)), "user", "judge")]


def invoke(args: list[str]) -> None:
    """The CLI in this process (no interpreter start-up): the uninterrupted reference suites."""
    from finharness.cli import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{args}\n{result.output}\n{result.exception!r}"


def suite_outcome(out: Path) -> dict[str, Any]:
    """What must not depend on how a suite got done: the scorecard without `usage`, every row's results and
    samples (run_outcome), the UCFE matches, suite.json's status and errors."""
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    card = json.loads((out / "scorecard.json").read_text(encoding="utf-8"))
    card.pop("usage")
    rows = {row["id"]: {m: run_outcome(out / folder) for m, folder in row["runs"].items()} for row in manifest["rows"]}
    return {"status": manifest["status"], "errors": manifest["errors"], "scorecard": card, "rows": rows,
            "matches": sample_lines(out / manifest["ucfe"]["matches"])}


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two outcomes differ (a failing comparison of nested dicts is unreadable otherwise)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in differences(a.get(k), b.get(k), f"{path}/{k}")]
    return [] if a == b else [f"{path}: {str(a)[:120]} != {str(b)[:120]}"]


def samples_stored_once(out: Path) -> dict[str, Counter]:
    """Row id -> how many times each of its samples is in the suite's store, for every row's run."""
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    found = {}
    for row in manifest["rows"]:
        for folder in row["runs"].values():
            results = json.loads((out / folder / "results.json").read_text(encoding="utf-8"))
            ids = [s["id"] for s in sample_lines(out / folder / "samples.jsonl")]
            found[row["id"]] = (Counter(ids), stored_samples(out / "store.sqlite", results["run_key"]))
    return found


def integrity(db: Path) -> str:
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def half_written(out: Path) -> list[str]:
    """JSON files under `out` that do not parse (a write cut short), and atomic writes' temporary files."""
    bad = []
    for path in out.rglob("*.json"):
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, OSError) as err:
            bad.append(f"{path}: {err}")
    return bad


@dataclass(frozen=True)
class Baseline:
    keys: Counter
    """Calls the uninterrupted suite made, by store key (every role)."""
    judging: frozenset[str]
    """The keys of UCFE's judging step: judge calls made after every model and user call."""
    rows_judge: frozenset[str]
    """The judge's calls inside the rows (FinTradeBench's rubric)."""
    outcome: dict[str, Any]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory, suite_data: Path) -> Baseline:
    """The suite run once, uninterrupted, in this process."""
    workdir = tmp_path_factory.mktemp("suite-baseline")
    prepare(workdir, suite_data)
    with contextlib.chdir(workdir):
        invoke(suite_args(suite_data))
    calls = logged(*role_logs(workdir))
    rows_done = max(c["started"] for c in logged(workdir / "model.log", workdir / "user.log"))
    judge = logged(workdir / "judge.log")
    judging = frozenset(c["key"] for c in judge if c["started"] > rows_done)
    outcome = suite_outcome(workdir / "out")
    assert outcome["status"] == "complete" and not outcome["errors"], outcome["errors"]
    assert len(judging) == 6, "three UCFE items judged in both orders, after the rows"
    # every call made once: identical requests in flight at once are made once (core/model.py), so any call made
    # twice in a chain below singles out a fault
    assert all(n == 1 for n in Counter(c["key"] for c in calls).values())
    return Baseline(Counter(c["key"] for c in calls), judging, frozenset(c["key"] for c in judge) - judging, outcome)


# --- kill -9 --------------------------------------------------------------------------------------------------------


@dataclass
class SuiteChain:
    """A suite killed at several moments, then rerun to the end."""

    kills: list[Killed] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)
    """Where each kill was aimed: 'rows' or 'judging'."""
    judging_calls: list[int] = field(default_factory=list)
    """UCFE judging calls each killed process made."""
    repeated: int = 0
    """Calls a process made although their answer was committed before it started (goal 0)."""
    lost_in_flight: int = 0
    """Calls answered but killed before their commit (legitimately made again)."""
    keys: Counter = field(default_factory=Counter)
    half_written: list[str] = field(default_factory=list)


def kill_moments(seed: int | str, baseline: Baseline) -> list[tuple[str, int, float]]:
    """(phase, call, delay): POOL_KILLS points among the rows' calls and JUDGING_KILLS among the judging step's,
    each followed by a random delay of up to half a call, drawn by a seeded RNG. A point counts calls in the
    uninterrupted suite's terms (the n-th call of the rows, the n-th judging call)."""
    rng = random.Random(f"suite/{seed}")
    rows_total = sum(baseline.keys.values()) - len(baseline.judging)
    rows = sorted(rng.sample(range(1, rows_total), POOL_KILLS))
    judging = sorted(rng.sample(range(1, len(baseline.judging) - JUDGING_MARGIN + 1), JUDGING_KILLS))
    return [(phase, n, round(rng.uniform(0.0, LATENCY / 2), 3))
            for phase, points in (("rows", rows), ("judging", judging)) for n in points]


def kill_point(phase: str, n: int, delay: float, *, logs: Sequence[Path], store: Path,
               baseline: Baseline) -> tuple[KillPoint, list[Path]]:
    """The point, on the logs as they are now, where the next process reaches the uninterrupted suite's n-th call of
    `phase`, and the logs it counts on. A process makes only what is not committed yet; calls a kill lost count as
    progress (they are made again)."""
    committed = committed_keys(store)
    if phase == "rows":
        done = len((set(baseline.keys) - baseline.judging) & committed)
        return KillPoint(len(logged(*logs)) + max(1, n - done), delay), list(logs)
    # on the judge's log the rows' judge calls not committed yet come first, then the judging step's
    judge_log = [log for log in logs if log.name == "judge.log"]
    return KillPoint(len(logged(*judge_log)) + len(baseline.rows_judge - committed) + n, delay), judge_log


def kill_suite(args: list[str], *, workdir: Path, logs: Sequence[Path], baseline: Baseline, seed: int | str
               ) -> SuiteChain:
    chain = SuiteChain()
    store = workdir / "out" / "store.sqlite"
    for i, (phase, n, delay) in enumerate(kill_moments(seed, baseline)):
        point, trigger = kill_point(phase, n, delay, logs=logs, store=store, baseline=baseline)
        committed_before = committed_keys(store)
        seen = marks(logs)
        killed = run_until_killed(args, cwd=workdir, logs=logs, trigger=trigger, store=store, point=point,
                                  wait_for_run_row=False, stderr=workdir / f"killed-{i}.stderr")
        made = since(logs, seen)
        committed_after = committed_keys(store)
        chain.kills.append(killed)
        chain.phases.append(phase)
        chain.judging_calls.append(sum(line["key"] in baseline.judging for line in made))
        chain.repeated += sum(line["key"] in committed_before for line in made)
        chain.lost_in_flight += sum(line["key"] not in committed_after for line in made)
        chain.keys.update(line["key"] for line in made)
        chain.half_written += half_written(workdir / "out")
    committed_before = committed_keys(store)
    seen = marks(logs)
    cli(args, cwd=workdir)
    made = since(logs, seen)
    chain.repeated += sum(line["key"] in committed_before for line in made)
    chain.keys.update(line["key"] for line in made)
    return chain


def check_resumed(chain: SuiteChain, baseline: Baseline, out: Path, tally: Any, label: str) -> None:
    outcome = suite_outcome(out)
    stored = samples_stored_once(out)
    lost = sum(len(set(ids) - set(in_store)) for ids, in_store in stored.values())
    tally(label, injected=sum(k.injected for k in chain.kills), completed=int(outcome["status"] == "complete"),
          lost=lost, repeated=chain.repeated, runs=1)
    assert all(k.injected for k in chain.kills), f"every kill must land before the suite ends: {chain.kills}"
    assert not any(k.orphans for k in chain.kills), f"processes outlived a killed suite: {chain.kills}"
    assert not chain.half_written, chain.half_written
    assert chain.repeated == 0, "a call already committed to the store was made again"
    assert set(chain.keys) == set(baseline.keys), "the chain made other calls than an uninterrupted suite"
    assert sum(chain.keys.values()) - chain.lost_in_flight == sum(baseline.keys.values())
    assert chain.lost_in_flight <= len(chain.kills) * CONCURRENCY * len(ROLES)
    judging = [n for phase, n in zip(chain.phases, chain.judging_calls) if phase == "judging"]
    assert judging and all(n >= 1 for n in judging), "the judging kills fell inside UCFE's judging step"
    for row, (ids, in_store) in stored.items():
        assert all(n == 1 for n in ids.values()) and in_store == ids, f"{row}: each sample stored once"
    assert outcome == baseline.outcome, differences(outcome, baseline.outcome)[:8]


def killed_suite(workdir: Path, data: Path, baseline: Baseline, seed: int, tally: Any) -> SuiteChain:
    prepare(workdir, data)
    chain = kill_suite(suite_args(data), workdir=workdir, logs=role_logs(workdir), baseline=baseline, seed=seed)
    check_resumed(chain, baseline, workdir / "out", tally, "kill -9 of a whole suite (fake models)")
    return chain


def test_a_suite_killed_five_times_resumes_to_the_uninterrupted_scorecard(tmp_path, suite_data, baseline,
                                                                         reliability_tally):
    chain = killed_suite(tmp_path, suite_data, baseline, 0, reliability_tally)
    assert len(chain.kills) == 5 and chain.phases.count("judging") == 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_more_seeds_kill_a_suite_and_resume(seed, tmp_path, suite_data, baseline, reliability_tally):
    killed_suite(tmp_path, suite_data, baseline, seed, reliability_tally)



# --- two writers on one store ---------------------------------------------------------------------------------------


def start_all(commands: list[list[str]], cwd: Path) -> list[subprocess.CompletedProcess]:
    """Start every command at once, then wait for all of them."""
    procs = [subprocess.Popen([*FINHARNESS, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for args in commands]
    done = []
    for args, proc in zip(commands, procs):
        stdout, stderr = proc.communicate(timeout=PROCESS_TIMEOUT_S)
        done.append(subprocess.CompletedProcess(args, proc.returncode, stdout, stderr))
    return done


def check_clean(procs: Sequence[subprocess.CompletedProcess]) -> None:
    for proc in procs:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "database is locked" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def made_twice_by_one_process(lines: list[dict[str, Any]]) -> int:
    return sum(n - 1 for n in Counter((line["pid"], line["key"]) for line in lines).values() if n > 1)


def test_the_same_suite_started_twice_at_once_on_one_out_folder(tmp_path, suite_data, baseline, reliability_tally):
    """Both finish; the store passes SQLite's integrity check and holds each call and each finished sample once;
    the rows, the scorecard and the matches equal an uninterrupted suite's. Both start on an empty store at once:
    each call is made by one of them only (the other waits for it: the store's call claims)."""
    prepare(tmp_path, suite_data)
    args = suite_args(suite_data)
    procs = start_all([args, args], tmp_path)
    check_clean(procs)
    out = tmp_path / "out"
    lines = logged(*role_logs(tmp_path))
    made = Counter(line["key"] for line in lines)
    stored = samples_stored_once(out)
    lost = sum(len(set(ids) - set(in_store)) for ids, in_store in stored.values())
    reliability_tally("two suites at once on one out folder: the same suite", injected=1, completed=len(procs),
                      lost=lost, repeated=sum(n - 1 for n in made.values()), runs=2)
    assert integrity(out / "store.sqlite") == "ok"
    assert committed_keys(out / "store.sqlite") == set(baseline.keys) == set(made)
    assert all(n == 1 for n in made.values()), f"{sum(n > 1 for n in made.values())} calls made by both suites"
    for row, (ids, in_store) in stored.items():
        assert all(n == 1 for n in ids.values()) and in_store == ids, f"{row}: each sample stored once"
    together = suite_outcome(out)
    assert together == baseline.outcome, differences(together, baseline.outcome)[:8]
    assert not half_written(out)


@pytest.mark.slow
def test_two_suites_of_different_models_at_once_on_one_out_folder(tmp_path, suite_data, baseline,
                                                                  reliability_tally):
    """Model `model` and model `b` each in a suite of its own, at once, on one out folder: every row of each equals
    the suite of that model alone. suite.json and the scorecard are the last to finish's (each names its own models);
    the suite of both models, run after, makes no model or user call and judges only the new pair."""
    prepare(tmp_path, suite_data)
    alone_b = tmp_path / "alone-b"
    prepare(alone_b, suite_data)
    with contextlib.chdir(alone_b):
        invoke(suite_args(suite_data, "b"))
    check_clean(start_all([suite_args(suite_data, "model"), suite_args(suite_data, "b")], tmp_path))
    out = tmp_path / "out"
    assert integrity(out / "store.sqlite") == "ok"
    last = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert last["models"] in ([specs("model")["model"]], [specs("b")["model"]])
    for name, reference in (("model", baseline.outcome["rows"]), ("b", suite_outcome(alone_b / "out")["rows"])):
        spec = specs(name)["model"]
        folders = {row["id"]: f"{out.name}/{_folder(spec, row['id'])}" for row in last["rows"]}
        assert {row: {spec: run_outcome(tmp_path / folder)} for row, folder in folders.items()} == reference, name
    committed = committed_keys(out / "store.sqlite")
    logs = role_logs(tmp_path, "model", "b")
    seen = marks(logs)
    cli(suite_args(suite_data, "model", "b"), cwd=tmp_path)
    made = since(logs, seen)
    reliability_tally("two suites at once on one out folder: different models", injected=1, completed=2, lost=0,
                      repeated=sum(line["key"] in committed for line in made), runs=3)
    assert {line["name"] for line in made} == {"judge"} and not any(line["key"] in committed for line in made)
    both = suite_outcome(out)
    assert both["status"] == "complete" and len(both["scorecard"]["models"]) == 2


def _folder(spec: str, row: str) -> str:
    from finharness.core.pool import run_dir_name

    return f"{run_dir_name(spec)}/{run_dir_name(row)}"


def test_two_pooled_runs_at_once_on_one_store(tmp_path, suite_data, reliability_tally):
    """`finharness run demo bizbench/tatqa-e` and `finharness run bizbench/tatqa-e bizbench/secnum` (the task in
    common is the same run in both) on one --store at once: both finish, the store is whole and holds each call and
    each sample once, and every task's results equal a run of its pool alone."""
    pools = (["demo", "bizbench/tatqa-e"], ["bizbench/tatqa-e", "bizbench/secnum"])
    log = tmp_path / "calls.log"

    def run(tasks: list[str], out: str, store: str, logged_to: Path) -> list[str]:
        return ["run", *tasks, "--model", fake_spec("m", latency=0.005, log=logged_to), "--limit", "10",
                "--data-dir", str(suite_data), "--concurrency", "4", "--out", out, "--store", store, "-q"]

    check_clean(start_all([run(tasks, f"pool{i}", "shared.sqlite", log) for i, tasks in enumerate(pools)], tmp_path))
    check_clean(start_all([run(tasks, f"alone{i}", f"alone{i}.sqlite", tmp_path / f"alone{i}.log")
                           for i, tasks in enumerate(pools)], tmp_path))
    store = tmp_path / "shared.sqlite"
    assert integrity(store) == "ok"
    lines = logged(log)
    lost = 0
    for i, tasks in enumerate(pools):
        for task in tasks:
            folder = task.replace("/", "_")
            together, alone = run_outcome(tmp_path / f"pool{i}" / folder), run_outcome(tmp_path / f"alone{i}" / folder)
            assert together == alone, task
            in_store = stored_samples(store, together["run_key"])
            lost += len(set(alone["samples"]) - set(in_store))
            assert in_store == Counter(list(alone["samples"])), task
    needed = {line["key"] for i in range(2) for line in logged(tmp_path / f"alone{i}.log")}
    reliability_tally("two pooled runs at once on one store", injected=1, completed=2, lost=lost,
                      repeated=sum(n - 1 for n in Counter(line["key"] for line in lines).values()), runs=2)
    assert committed_keys(store) == needed == {line["key"] for line in lines}
    assert made_twice_by_one_process(lines) == 0
    assert all(n == 1 for n in Counter(line["key"] for line in lines).values()), "the task both pools run, made twice"


# --- a full disk ----------------------------------------------------------------------------------------------------

DISK_SIZE = "16m"
"""The tmpfs the suite's out folder is: the whole suite (about 1.2 MB) fits until the test fills it."""
FILE_SIZE_LIMIT = 64 * 1024
"""Where no tmpfs can be mounted: the suite's file-size limit once 'full' (the store and the larger row files grow
past it; the fake models' call logs, a few kB, stay below it and keep counting)."""


@dataclass
class SmallDisk:
    """The suite's out folder, which fills up when the test says: a tmpfs mounted there (root), else the suite
    process's file-size limit (`ulimit -f`, lowered with prlimit: every file that grows past it fails to, as on
    a full disk; the error then names the limit, not the disk)."""

    path: Path
    mounted: bool

    @property
    def filler(self) -> Path:
        return self.path / "filler"

    def fill(self, pid: int) -> None:
        if not self.mounted:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, resource.RLIM_INFINITY))
            return
        fill_disk(self.filler)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    @property
    def says(self) -> str:
        """What the error line says about the cause."""
        return "no space left" if self.mounted else "ulimit -f"


def fill_disk(filler: Path) -> None:
    """Write `filler` until its file system has no space left."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        chunk = b"\0" * 65536
        while True:
            os.write(fd, chunk)
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


def mount_problem(path: Path) -> str | None:
    """Why a tmpfs cannot be mounted on `path` here (None: it is mounted)."""
    if os.geteuid() != 0:
        return "not root"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    return None if done.returncode == 0 else f"mount -t tmpfs: {done.stderr.strip() or done.returncode}"


@pytest.fixture
def small_disk(tmp_path: Path):
    """tmp_path/out as a small disk of its own (unmounted after the test)."""
    out = tmp_path / "out"
    out.mkdir()
    problem = mount_problem(out)
    try:
        yield SmallDisk(out, mounted=problem is None)
    finally:
        if problem is None and subprocess.run(["umount", str(out)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(out)], check=True)  # a process of the test still holds it: detach


def check_one_error(proc: subprocess.CompletedProcess, disk: SmallDisk, names: str) -> str:
    """Exit 2 and one `error:` line naming a file under `names` and the full disk (or the limit), no traceback."""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert names in errors[0] and disk.says in errors[0] and "rerun" in errors[0], errors[0]
    return errors[0]


def stored_rows(db: Path) -> tuple[set[str], set[tuple[str, str]]]:
    """(call keys, (run key, sample id) of finished samples) committed to a store."""
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        return committed_keys(db), set(conn.execute("SELECT run_key, sample_id FROM samples").fetchall())


def rerun_after_space_is_freed(args: list[str], workdir: Path, disk: SmallDisk, baseline: Baseline
                               ) -> tuple[set[str], list[dict[str, Any]]]:
    """Free the space, check what the failed suite left, rerun the same command: (calls committed before the rerun,
    calls the rerun made). Nothing stored is lost, the rerun makes none of it again and ends with the uninterrupted
    suite's outcome."""
    disk.free()
    out = workdir / "out"
    assert not half_written(out) and not list(out.rglob("*.tmp")), "every file whole, no temporary file left"
    assert integrity(out / "store.sqlite") == "ok"
    calls, samples = stored_rows(out / "store.sqlite")
    logs = role_logs(workdir)
    seen = marks(logs)
    cli(args, cwd=workdir)
    made = since(logs, seen)
    calls_after, samples_after = stored_rows(out / "store.sqlite")
    assert calls <= calls_after and samples <= samples_after, "what was stored is kept"
    assert not any(line["key"] in calls for line in made), "a call committed before the disk filled was made again"
    resumed = suite_outcome(out)
    assert resumed == baseline.outcome, differences(resumed, baseline.outcome)[:8]
    return calls, made


FILL_MOMENTS = {"third": lambda rows: rows // 3, "sixth": lambda rows: rows // 6, "half": lambda rows: rows // 2,
                "judging": lambda rows: rows + 2}
"""When the disk fills: after a third (a sixth, half) of the rows' calls, or 2 calls into UCFE's judging step."""


@pytest.mark.parametrize("moment", [m if m == "third" else pytest.param(m, marks=pytest.mark.slow)
                                    for m in FILL_MOMENTS])
def test_a_full_disk_while_the_suite_runs_is_one_error_and_the_rerun_completes(moment, tmp_path, suite_data,
                                                                                baseline, small_disk,
                                                                                reliability_tally):
    """The disk fills once the calls logged reach `moment`; the suite stops with one error line, and the same
    command finishes it once space is freed."""
    prepare(tmp_path, suite_data)
    args = suite_args(suite_data)
    logs = role_logs(tmp_path)
    at = FILL_MOMENTS[moment](sum(baseline.keys.values()) - len(baseline.judging))
    proc = subprocess.Popen([*FINHARNESS, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + PROCESS_TIMEOUT_S
        while proc.poll() is None and len(logged(*logs)) < at and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "the suite ended before the disk filled"
        small_disk.fill(proc.pid)
        filled_at = len(logged(*logs))
        stdout, stderr = proc.communicate(timeout=PROCESS_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    failed = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    check_one_error(failed, small_disk, "out/")  # --out out: paths are relative
    after_fill = len(logged(*logs)) - filled_at
    calls, made = rerun_after_space_is_freed(args, tmp_path, small_disk, baseline)
    reliability_tally(f"full disk while a suite runs ({moment})", injected=1, completed=1, lost=0,
                      repeated=sum(line["key"] in calls for line in made), runs=2)
    # the suite stops at the full disk, it does not go on calling models for the rows after it
    assert after_fill <= 2 * CONCURRENCY * len(ROLES), f"{after_fill} calls made after the disk filled"


FULL_AT = """
import importlib, os, resource, sys
from finharness.cli import main

module, name, nth = os.environ.pop("FULL_AT").split(":")
target, filler, calls = importlib.import_module(module), os.environ.pop("FILL_DISK", ""), []
real = getattr(target, name)

def full_then(*args, **kwargs):
    calls.append(args)
    if len(calls) == int(nth):  # the disk fills just before this call
        if filler:
            fill_disk(filler)
        else:  # no tmpfs: no file may grow from here on
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
    return real(*args, **kwargs)

setattr(target, name, full_then)
sys.argv = ["finharness", *sys.argv[1:]]
main()
"""


def full_at(where: str, args: list[str], workdir: Path, disk: SmallDisk) -> subprocess.CompletedProcess:
    """Run the suite (`args`) in a process that fills `disk` just before the n-th call of MODULE:NAME (`where` is
    MODULE:NAME:N): a deterministic moment, and a real full disk (ENOSPC from the kernel)."""
    import inspect

    code = "from __future__ import annotations\nimport errno\nimport os\nfrom pathlib import Path\n" + \
        inspect.getsource(fill_disk) + FULL_AT
    env = {**os.environ, "FULL_AT": where, **({"FILL_DISK": str(disk.filler)} if disk.mounted else {})}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=workdir, capture_output=True, text=True,
                          timeout=PROCESS_TIMEOUT_S, env=env)


def test_a_full_disk_while_the_scorecard_is_written_is_one_error_and_the_rerun_completes(tmp_path, suite_data,
                                                                                          baseline, small_disk,
                                                                                          reliability_tally):
    """Every row runs and suite.json is written; then the disk fills after the scorecard's first file: one error line
    naming the next, every file whole, and the same command rewrites the scorecard without a call."""
    prepare(tmp_path, suite_data)
    args = suite_args(suite_data)
    proc = full_at("finharness.suite.scorecard_views:atomic_write_text:2", args, tmp_path, small_disk)
    out = small_disk.path
    check_one_error(proc, small_disk, "out/scorecard.md")
    manifest = json.loads((out / "suite.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "complete" and (out / "scorecard.html").is_file()
    assert not (out / "scorecard.md").exists(), "no scorecard.md: it was never written whole"
    calls, made = rerun_after_space_is_freed(args, tmp_path, small_disk, baseline)
    reliability_tally("full disk while the scorecard is written", injected=1, completed=1, lost=0,
                      repeated=len(made), runs=2)
    assert calls == set(baseline.keys) and made == [], "every call was stored: the rerun makes none"


def test_a_full_disk_while_ucfe_matches_are_rewritten_keeps_the_earlier_ones(tmp_path, suite_data, small_disk,
                                                                             reliability_tally):
    """A finished suite, rerun with a second model on a disk that fills as UCFE's matches (now more of them) are
    written: the error line names matches.jsonl, and the earlier matches.jsonl, which the earlier suite.json and
    scorecard go with, is whole. The same command finishes once space is freed, without a call made twice."""
    prepare(tmp_path, suite_data)
    cli(suite_args(suite_data, "model"), cwd=tmp_path)
    out = small_disk.path
    before = {name: (out / name).read_bytes() for name in ("ucfe/matches.jsonl", "suite.json", "scorecard.json")}
    args = suite_args(suite_data, "model", "b")
    proc = full_at("finharness.benchmarks.ucfe.suite_step:write_matches:1", args, tmp_path, small_disk)
    check_one_error(proc, small_disk, "out/ucfe/matches.jsonl")
    assert {name: (out / name).read_bytes() for name in before} == before, "the earlier files are whole"
    small_disk.free()
    committed = committed_keys(out / "store.sqlite")
    logs = role_logs(tmp_path, "model", "b")
    seen = marks(logs)
    cli(args, cwd=tmp_path)
    made = since(logs, seen)
    repeated = sum(line["key"] in committed for line in made)
    reliability_tally("full disk while UCFE's matches are written", injected=1, completed=1, lost=0,
                      repeated=repeated, runs=3)
    assert repeated == 0 and not half_written(out)
    both = suite_outcome(out)
    assert both["status"] == "complete" and len(both["scorecard"]["models"]) == 2
    assert {m["model_b"] for m in both["matches"]} == {"gpt-4o (released)", specs("b")["model"]}
