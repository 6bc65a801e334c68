"""kill -9 a `finharness` run at seeded random points, rerun it, and prove nothing was lost or recomputed.

For each benchmark a run (a subprocess, fake models with latency that log every call they really
make) is killed several times in a row at points drawn by a seeded RNG -- mid-generation, inside a
sandboxed program, mid-dialogue, mid-retrieval, mid-judging -- restarted each time with the same
command, and finally rerun to the end. Then:

- every sample is in samples.jsonl and in the store exactly once;
- no call whose answer was committed to the store was ever made again (counted from the call logs);
- the calls made over the whole chain are exactly those of one uninterrupted run, plus only the
  calls the kill caught between the model's answer and the commit;
- results.json and each sample's outcome equal those of an uninterrupted run;
- no process the run started (sandbox workers) outlives it, and a killed run never leaves a results.json.

The default set kills each benchmark twice (one seed); `-m slow` kills three times for each of four more seeds.
"""

from __future__ import annotations

import contextlib
import csv
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner

from ..benchmarks.test_fintradebench_task import verdict
from ._runs import (
    Chain,
    Killed,
    KillPoint,
    crash_chain,
    fake_spec,
    kill_points,
    logged,
    repeated_exam,
    run_outcome,
    sample_lines,
    stored_samples,
)

UCFE_LOG = "ucfe/log/20241005_143552_gpt-4o_eng.json"
MODEL_REPLY = "MODEL-REPLY: here is a framework."
DEFAULT_KILLS = 2
"""Kills per benchmark in the default suite (one seed); the slow suite kills SLOW_KILLS times per seed."""
SLOW_KILLS = 3
SLOW_SEEDS = (1, 2, 3, 4)
FINTRADE_QUESTIONS = ("F1", "F2", "F3", "FT1", "FT2", "FT3")


@dataclass(frozen=True)
class Benchmark:
    """One crash case: how to run it, and what a kill in its phase of interest looks like."""

    label: str
    """Benchmark and variant, as the tally shows it."""
    phase: str
    """Where the kills are aimed ('generation', 'sandbox execution', 'dialogue', 'retrieval', 'judging')."""
    args: Callable[[Path, Path, float], list[str]]
    """(workdir, data dir, latency) -> the CLI arguments; logs go to workdir/{model,user,judge}.log."""
    roles: tuple[str, ...] = ("model",)
    """Fake models of the run, each logging to workdir/ROLE.log."""
    latency: float = 0.08
    concurrency: int = 2
    trigger: tuple[str, ...] = ()
    """Roles whose calls time the kills (default: all)."""
    first_kill_at_zero: bool = False
    """Kill once at the start of solving, before any call (retrieval happens there)."""
    is_run: bool = True
    """A `finharness run` (else `finharness ucfe judge`: no results.json, no sample table)."""


def model(latency: float, role: str = "model", **options: str) -> str:
    """A fake model logging to ROLE.log; paths in a spec are relative to the run's directory, because
    FinTradeBench shows the model's spec to its judge: the reference run must have the very same spec."""
    return fake_spec(role, latency=latency, log=Path(f"{role}.log"), **options)


def run_args(task: str, workdir: Path, *rest: str) -> list[str]:
    return ["run", task, "--out", str(workdir / "out"), "--store", str(workdir / "store.sqlite"), "-q", *rest]


def ucfe_user_script(workdir: Path) -> str:
    """A simulator that asks again until told it may end, then ends: three rounds, seven calls a dialogue."""
    (workdir / "user.jsonl").write_text(json.dumps({"match": "<Consultation Ended>", "reply": "<Consultation Ended>"})
                                        + "\n", encoding="utf-8")
    return "user.jsonl"


def fintrade_questions(workdir: Path, data: Path) -> str:
    """Six one-company questions of the seed file (F and FT: filings and prices of one ticker each)."""
    with (data / "fintradebench" / "FinTradeBench_Golden_Seed_150.csv").open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        rows = [row for row in reader if row["question_id"] in FINTRADE_QUESTIONS]
        fields = reader.fieldnames
    with (workdir / "ftb-questions.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return "ftb-questions.csv"


def fintrade_scripts(workdir: Path) -> tuple[str, str]:
    """The model picks its L6 answer when asked to select; the judge always returns a valid rubric."""
    (workdir / "ftb-model.jsonl").write_text(
        json.dumps({"match": "Prompt ID only", "reply": "TELER_L6"}) + "\n"
        + json.dumps({"match": "", "reply": "ROE is high and the RSI of 70 signals strength."}) + "\n",
        encoding="utf-8")
    (workdir / "ftb-judge.jsonl").write_text(json.dumps({"match": "", "reply": verdict(4)}) + "\n", encoding="utf-8")
    return "ftb-model.jsonl", "ftb-judge.jsonl"


def agent_script(workdir: Path) -> str:
    """A three-step episode for any question: read the 3M page, compute on it, answer (rules are matched against
    the last user or tool message, first match wins)."""
    rules = [{"match": "page 59 of", "tool_calls": [{"name": "calculator", "arguments": {"expression": "1577 + 0"}}]},
             {"match": "1577", "reply": "The answer is $1,577 million."},
             {"match": "", "tool_calls": [{"name": "read_page", "arguments": {"document": "3M_2018_10K", "page": 59}}]}]
    (workdir / "agent.jsonl").write_text("".join(json.dumps(rule) + "\n" for rule in rules), encoding="utf-8")
    return "agent.jsonl"


def ucfe_args(workdir: Path, data: Path, latency: float) -> list[str]:
    return run_args("ucfe", workdir, "--data-dir", str(data), "-o", "tasks=Analyst", "--limit", "3",
                    "--concurrency", "2", "--model", model(latency, reply=MODEL_REPLY),
                    "--user-model", model(latency, "user", reply="One more question, please.",
                                          script=ucfe_user_script(workdir)))


BENCHMARKS = {
    "demo": Benchmark("demo", "generation", lambda w, d, lat: run_args(
        "demo", w, "--concurrency", "2", "--model", model(lat))),
    "cfinbench-gen": Benchmark("CFinBench gen", "generation", lambda w, d, lat: run_args(
        "cfinbench", w, "--data-dir", str(repeated_exam(w / "exam", 3)), "--concurrency", "2", "--model", model(lat))),
    "cfinbench-ll": Benchmark("CFinBench ll", "generation", lambda w, d, lat: run_args(
        "cfinbench", w, "--data-dir", str(repeated_exam(w / "exam", 5)), "--method", "ll", "-o", "types=single_choice",
        "--concurrency", "2", "--model", model(lat))),
    # a program that sleeps 0.06 s on each of its 5 inputs in the sandbox: kills land while it executes
    "bizbench-program": Benchmark("BizBench FormulaEval (program)", "sandbox execution", lambda w, d, lat: run_args(
        "bizbench/formulaeval", w, "--limit", "8", "-o", "pool_size=1", "-o", "cases=5", "--concurrency", "2",
        "--model", model(lat, reply="```python\nimport time\ntime.sleep(0.06)\nreturn 1.0\n```")),
        latency=0.05),
    "bizbench-number": Benchmark("BizBench TAT-QA(E) (number)", "generation", lambda w, d, lat: run_args(
        "bizbench/tatqa-e", w, "--data-dir", str(d), "--limit", "10", "--concurrency", "2",
        "--model", model(lat, reply="The answer is [[1,234.5]]."))),
    "ucfe-dialogue": Benchmark("UCFE simulate", "dialogue", ucfe_args, roles=("model", "user"), latency=0.05),
    "financebench-agent": Benchmark("FinanceBench agent", "episode", lambda w, d, lat: run_args(
        "financebench", w, "--data-dir", str(d), "-o", "mode=agent", "-o", "dense=off", "--limit", "6",
        "--concurrency", "1", "--model", model(lat, script=agent_script(w))), concurrency=1),
    "fintradebench": Benchmark("FinTradeBench rag", "retrieval and judging", lambda w, d, lat: run_args(
        "fintradebench", w, "--data-dir", str(d), "--mode", "rag", "-o", "dense=off",
        "-o", f"questions={fintrade_questions(w, d)}",
        "-o", "levels=L5,L6", "-o", "judge_context=none", "--concurrency", "2",
        "--model", model(lat, script=fintrade_scripts(w)[0]),
        "--judge", model(lat, "judge", script=fintrade_scripts(w)[1])),
        roles=("model", "judge"), trigger=("judge",), first_kill_at_zero=True, latency=0.1),
}


# --- uninterrupted runs ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Baseline:
    keys: Counter
    """Calls one uninterrupted run makes, by store key."""
    outcome: dict[str, Any]
    """comparable() of its results (or the judge's outputs)."""
    out: Path


def invoke(args: list[str]) -> None:
    """The CLI in this process (no interpreter start-up); used for the uninterrupted reference runs."""
    from finharness.cli import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{args}\n{result.output}\n{result.exception!r}"


@pytest.fixture(scope="module")
def baselines(tmp_path_factory, shared_data):
    """Each benchmark run once, in this process, without faults."""
    cache: dict[str, Baseline] = {}

    def get(name: str) -> Baseline:
        if name not in cache:
            bench = BENCHMARKS[name]
            workdir = tmp_path_factory.mktemp(f"baseline-{name}")
            with contextlib.chdir(workdir):  # the crashed runs run in their own directory too
                invoke(bench.args(workdir, shared_data, bench.latency))
            calls = logged(*(workdir / f"{role}.log" for role in bench.roles))
            cache[name] = Baseline(Counter(c["key"] for c in calls), run_outcome(workdir / "out"), workdir / "out")
        return cache[name]

    return get


# --- the check ---------------------------------------------------------------------------------------

def crash_and_resume(name: str, seed: int, kills: int, *, workdir: Path, data: Path, baseline: Baseline,
                     tally: Callable[..., None]) -> tuple[Chain, dict[str, Any]]:
    bench = BENCHMARKS[name]
    total = sum(baseline.keys.values())
    logs = [workdir / f"{role}.log" for role in bench.roles]
    trigger = [workdir / f"{role}.log" for role in (bench.trigger or bench.roles)]
    trigger_total = total if not bench.trigger else sum(
        1 for _ in logged(*(baseline.out.parent / f"{role}.log" for role in bench.trigger)))
    # leave enough calls after the last kill point that the run cannot end before the kill lands
    margin = 2 * bench.concurrency * len(bench.roles) if not bench.trigger else bench.concurrency + 1
    points = kill_points(f"{name}/{seed}", kills=kills - bench.first_kill_at_zero, total_calls=trigger_total,
                         margin=margin, max_delay=bench.latency / 2)
    if bench.first_kill_at_zero:
        points = [KillPoint(0, round(0.5 * (seed % 3 + 1) / 3, 3)), *points]
    args = bench.args(workdir, data, bench.latency)
    store = workdir / "store.sqlite"
    chain = crash_chain(args, cwd=workdir, logs=logs, trigger=trigger, store=store, points=points,
                        results=workdir / "out" / "results.json" if bench.is_run else None)
    outcome = run_outcome(workdir / "out")
    ids = [s["id"] for s in sample_lines(workdir / "out" / "samples.jsonl")]
    expected_ids = set(baseline.outcome["samples"])
    in_store = stored_samples(store, outcome["run_key"])
    lost = len(expected_ids - set(ids)) + len(expected_ids - set(in_store))
    tally(f"kill -9 mid-{bench.phase}: {bench.label}", injected=chain.injected,
          completed=int(outcome["status"] == "complete"), lost=lost, repeated=chain.repeated, runs=1)

    assert chain.injected == len(points), f"every kill must land before the run ends: {chain.killed}"
    assert not any(k.results_written for k in chain.killed), "a killed run must not leave a results.json"
    assert not any(k.orphans for k in chain.killed), f"processes outlived the killed run: {chain.killed}"
    assert chain.repeated == 0, "a call already committed to the store was made again"
    assert set(chain.keys) == set(baseline.keys), "the chain made other calls than an uninterrupted run"
    assert sum(chain.keys.values()) - chain.lost_in_flight == total
    assert chain.lost_in_flight <= len(points) * bench.concurrency * len(bench.roles)
    assert Counter(ids) == Counter(expected_ids) and all(n == 1 for n in Counter(ids).values())
    assert in_store == Counter(expected_ids), "each sample must be in the store exactly once"
    assert outcome == baseline.outcome, "the resumed run must equal an uninterrupted one"
    return chain, outcome


def without_judge_spec(path: Path) -> list[dict[str, Any]]:
    """Lines of a judge output file without the judge's spec (it names the latency and log file)."""
    return [{k: v for k, v in line.items() if k != "judge"} for line in sample_lines(path)]


def killed_mid_sample(killed: Killed, calls_per_sample: int) -> bool:
    """Some sample had calls committed but was not finished: the kill fell inside it."""
    return killed.calls_committed > killed.samples_committed * calls_per_sample


# --- the cases ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["demo", "cfinbench-gen", "cfinbench-ll", "bizbench-number"])
def test_kill_mid_generation_then_resume(name, baselines, tmp_path, shared_data, reliability_tally):
    crash_and_resume(name, 0, DEFAULT_KILLS, workdir=tmp_path, data=shared_data, baseline=baselines(name),
                     tally=reliability_tally)


def test_kill_mid_sandbox_execution_then_resume(baselines, tmp_path, shared_data, reliability_tally):
    chain, outcome = crash_and_resume("bizbench-program", 0, DEFAULT_KILLS, workdir=tmp_path, data=shared_data,
                                      baseline=baselines("bizbench-program"), tally=reliability_tally)
    # one call per sample: a committed call without its sample means the kill hit the program's run
    assert any(killed_mid_sample(k, 1) for k in chain.killed), chain.killed
    assert outcome["counts"]["samples"] == 8


def test_kill_mid_episode_then_resume(baselines, tmp_path, shared_data, reliability_tally):
    baseline = baselines("financebench-agent")
    assert sum(baseline.keys.values()) == 3 * len(baseline.outcome["samples"])  # three steps an episode
    chain, outcome = crash_and_resume("financebench-agent", 0, DEFAULT_KILLS, workdir=tmp_path, data=shared_data,
                                      baseline=baseline, tally=reliability_tally)
    assert any(killed_mid_sample(k, 3) for k in chain.killed), chain.killed  # a kill fell inside an episode
    assert all(s["prediction"]["episode"]["stop"] == "answer" for s in outcome["samples"].values())


def test_kill_mid_dialogue_then_resume(baselines, tmp_path, shared_data, reliability_tally):
    baseline = baselines("ucfe-dialogue")
    per_dialogue = sum(baseline.keys.values()) // len(baseline.outcome["samples"])
    assert per_dialogue == 7  # three rounds: opening, then model and simulator in turn
    chain, _ = crash_and_resume("ucfe-dialogue", 0, DEFAULT_KILLS, workdir=tmp_path, data=shared_data,
                                baseline=baseline, tally=reliability_tally)
    assert any(killed_mid_sample(k, per_dialogue) for k in chain.killed), chain.killed


def test_kill_mid_retrieval_and_mid_judging_then_resume(baselines, tmp_path, shared_data, reliability_tally):
    chain, _ = crash_and_resume("fintradebench", 0, DEFAULT_KILLS, workdir=tmp_path, data=shared_data,
                                baseline=baselines("fintradebench"), tally=reliability_tally)
    first = chain.killed[0]
    assert first.calls_committed <= 2 * 2 and first.samples_committed == 0  # retrieval starts every sample
    judged = [k for k in chain.killed[1:] if k.samples_committed < 6]
    assert judged, "the later kills are timed on judge calls, before every sample is judged"


def test_kill_ucfe_judge_mid_judging_then_resume(baselines, tmp_path, shared_data, reliability_tally):
    """`finharness ucfe judge` killed between judge calls; the rerun judges only what is left."""
    dialogues = baselines("ucfe-dialogue").out
    log = tmp_path / "judge.log"
    out = tmp_path / "judge" / "matches.jsonl"

    def args(latency: float, log: Path, out: Path) -> list[str]:
        return ["ucfe", "judge", str(shared_data / UCFE_LOG), str(dialogues), "--data-dir", str(shared_data),
                "--tasks", "Analyst", "--limit", "3", "--concurrency", "1", "--out", str(out), "-q", "--json",
                "--judge", fake_spec("judge", latency=latency, log=log, reply="Assistant 1 is better. [[1]]")]

    reference = tmp_path / "reference"
    reference.mkdir()
    invoke(args(0.0, reference / "judge.log", reference / "matches.jsonl"))
    expected = Counter(line["key"] for line in logged(reference / "judge.log"))
    total = sum(expected.values())
    points = kill_points("ucfe-judge/0", kills=DEFAULT_KILLS, total_calls=total, margin=1, max_delay=0.1)
    chain = crash_chain(args(0.15, log, out), cwd=tmp_path, logs=[log], store=out.parent / "store.sqlite",
                        points=points, results=out, wait_for_run_row=False)
    summary = json.loads(chain.final.stdout)
    lost = summary["coverage"]["items"] - summary["coverage"]["judged"]
    reliability_tally("kill -9 mid-judging: UCFE judge", injected=chain.injected, completed=int(lost == 0),
                      lost=lost, repeated=chain.repeated, runs=1)
    assert chain.injected == len(points) and not any(k.results_written for k in chain.killed)
    assert chain.repeated == 0 and set(chain.keys) == set(expected)
    assert sum(chain.keys.values()) - chain.lost_in_flight == total
    for name in ("matches.jsonl", "matches.judgments.jsonl"):
        assert without_judge_spec(out.with_name(name)) == without_judge_spec(reference / name), name
    assert summary["coverage"]["judged"] == 3 and summary["failed_calls"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_more_seeds_kill_and_resume(name, seed, baselines, tmp_path, shared_data, reliability_tally):
    crash_and_resume(name, seed, SLOW_KILLS, workdir=tmp_path, data=shared_data, baseline=baselines(name),
                     tally=reliability_tally)
