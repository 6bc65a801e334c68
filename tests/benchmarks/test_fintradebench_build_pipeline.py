"""FinTradeBench build: `build run` end to end with fake models, resume, self-selection, scaling, bad input."""

from __future__ import annotations

import asyncio
import csv
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.fintradebench.construction.candidates import (
    DEFAULT_BUILD_LEVELS,
    CandidateAnswer,
    neutral_order,
    parse_levels,
    render_level,
    self_select,
)
from finharness.benchmarks.fintradebench.construction.pipeline import (
    BuildQuestion,
    BuildSession,
    judge_phase,
    read_questions_file,
    select_questions,
)
from finharness.benchmarks.fintradebench.ideal import MarketData
from finharness.benchmarks.fintradebench.prompts import parse_label
from finharness.benchmarks.fintradebench.questions import SEED_FILE, read_questions
from finharness.cli import app
from finharness.core.store import RunStore
from finharness.data.errors import DataError
from finharness.judges.soft import TOP_LOGPROBS as EXPECTED_TOP_LOGPROBS
from tests.benchmarks.test_fintradebench_expected_scores import _spell
from tests.fakes import fake_models, fresh_store, prompts

VERDICT = {"evaluations": [{"indicator_analysis": {"found_indicators": ["RSI"], "total_golden_indicators": 3,
                                                   "indicators_found_count": 1},
                            "bias_analysis": {"trading_signals_score": 4, "fundamental_score": 3},
                            "overall_quality": {"correctness_score": 4, "reasoning_score": 5}}]}

CONTRACT = {
    "questions.jsonl": {"question_id", "category", "ticker", "as_of", "question", "golden_indicators", "source_id",
                        "scaled"},
    "candidates.jsonl": {"question_id", "model", "level", "candidate_index", "text", "indicators_named"},
    "selected.jsonl": {"question_id", "model", "candidate_index", "level", "text", "rule"},
    "audit.jsonl": {"question_id", "model", "candidate_index", "level", "stage", "claims", "supported",
                    "contradicted", "not_found", "accurate"},
    "judged.jsonl": {"question_id", "model", "candidate_index", "level", "stage", "judge", "scores", "golden_found"},
}
CLAIM_FIELDS = {"text", "value", "unit", "metric", "date", "reference", "tolerance", "status", "method"}


def script(path: Path, rules: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"match": m, "reply": r}) + "\n" for m, r in rules), encoding="utf-8")
    return path


def model_spec(tmp_path: Path, name: str, choice: str) -> str:
    rules = [("Prompt ID only", choice),  # self-selection
             ("Level 3", f"[{name}] step by step: the RSI of 55.5 and a P/E of 30x; ROE of 20%."),
             ("", f"[{name}] The MACD is 1.25 and the 20-day moving average is $100.50.")]
    return f"fake?script={script(tmp_path / f'{name}.jsonl', rules)}&name={name}"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def seed_file(shared_data, tmp_path_factory) -> Path:
    """Three seed questions about single companies with filings (F1 Apple, FT1 Apple, FT4 Nvidia)."""
    with (shared_data / SEED_FILE).open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        kept = [row for row in reader if row["question_id"] in ("F1", "FT1", "FT4")]
        fields = reader.fieldnames
    path = tmp_path_factory.mktemp("seeds") / "seeds.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(kept)
    return path


@pytest.fixture(scope="module")
def build(shared_data, seed_file, tmp_path_factory):
    """One `build run` on the three seeds plus two variants scaled to Apple (FT4 moved from Nvidia), two fake models."""
    tmp = tmp_path_factory.mktemp("build")
    specs = [model_spec(tmp, "alpha", "TELER_L3_Step_By_Step"), model_spec(tmp, "beta", "L0_Data_Only")]
    judge = f"fake?script={script(tmp / 'judge.jsonl', [('EVALUATION RUBRIC', json.dumps(VERDICT))])}&name=judge"
    out = tmp / "out"
    command = ["fintradebench", "build", "run", "--models", ",".join(specs), "--judge", judge,
               "--question-file", str(seed_file), "--tickers", "AAPL", "--scale-size", "2", "--data-dir",
               str(shared_data), "--out", str(out), "--seed", "3", "--all-candidates", "-q", "--json"]
    first = CliRunner().invoke(app, command)
    assert first.exit_code == 0, first.output
    calls_after_first = RunStore(out / "store.sqlite").count_calls()
    second = CliRunner().invoke(app, command)
    assert second.exit_code == 0, second.output
    return {"out": out, "data": shared_data, "specs": specs, "judge": judge, "first": json.loads(first.stdout),
            "second": json.loads(second.stdout), "calls_after_first": calls_after_first}


def test_build_run_writes_every_file_with_the_contract_fields(build):
    out = build["out"]
    for name, fields in CONTRACT.items():
        lines = rows(out / name)
        assert lines, name
        for line in lines:
            assert fields <= set(line), (name, fields - set(line))
    questions = rows(out / "questions.jsonl")
    seeds = [q for q in questions if not q["scaled"]]
    scaled = [q for q in questions if q["scaled"]]
    assert [q["question_id"] for q in seeds] == ["F1", "FT1", "FT4"] and len(scaled) == 2
    assert all(q["ticker"] == "AAPL" and q["source_id"] == "FT4" for q in scaled)  # F1, FT1 are about Apple
    per_unit = len(questions) * len(build["specs"])
    candidates = rows(out / "candidates.jsonl")
    assert len(candidates) == per_unit * len(DEFAULT_BUILD_LEVELS)
    assert {c["level"] for c in candidates} == set(DEFAULT_BUILD_LEVELS)
    selected = rows(out / "selected.jsonl")
    assert len(selected) == per_unit
    assert {(s["model"] == build["specs"][0], s["level"], s["rule"]) for s in selected} == {
        (True, "L3", "exact"), (False, "L0", "exact")}
    audits = rows(out / "audit.jsonl")
    assert sum(a["stage"] == "before" for a in audits) == len(candidates)
    assert sum(a["stage"] == "after" for a in audits) == len(selected)
    for a in audits:
        assert a["supported"] + a["contradicted"] + a["not_found"] == len(a["claims"])
        assert a["accurate"] == (a["contradicted"] == 0 and a["supported"] >= 1)
        assert all(CLAIM_FIELDS <= set(c) for c in a["claims"])
    l3 = next(a for a in audits if a["level"] == "L3")
    assert {c["metric"] for c in l3["claims"]} == {"RSI", "P/E", "Return on Equity"}
    judged = rows(out / "judged.jsonl")
    assert sum(j["stage"] == "after" for j in judged) == per_unit
    assert sum(j["stage"] == "before" for j in judged) == len(candidates)  # --all-candidates
    assert all(j["scores"] == {"correctness": 4, "reasoning_depth": 5, "signal_integration": 4,
                               "fundamental_integration": 3} and j["golden_found"] == 1 for j in judged)
    with (out / "scaled_questions.csv").open(encoding="utf-8", newline="") as handle:
        header = next(csv.reader(handle))
    assert header == ["question_id", "question", "golden_indicators", "response", "ticker", "as_of", "source_id",
                      "category"]


def test_a_rerun_makes_no_new_call(build):
    first, second = build["first"], build["second"]
    assert first["candidates"]["calls"] > 0
    texts = {(c["question_id"], c["model"], c["text"]) for c in rows(build["out"] / "candidates.jsonl")}
    assert first["judge"]["calls"] == len(texts)  # each distinct answer judged once (the store dedupes the rest)
    # 4/5/4/3 differs from the rubric's example (4/5/4/5) in one score only: not counted as a copy
    assert first["judge"]["rubric_example_verdicts"] == 0 and first["judge"]["judged"] > 0
    assert all(phase["calls"] == 0 for phase in second.values())
    assert second["candidates"]["cache_hits"] == first["candidates"]["calls"] + first["candidates"]["cache_hits"]
    assert RunStore(build["out"] / "store.sqlite").count_calls() == build["calls_after_first"]
    summary = json.loads((build["out"] / "build.json").read_text())
    assert set(summary["phases"]) >= {"scale", "candidates", "audit", "judge"}


def test_self_selection_only_sees_the_models_own_candidates(build):
    alpha, beta = build["specs"]
    seen = {alpha: 0, beta: 0}
    for call in RunStore(build["out"] / "store.sqlite").iter_calls():
        prompt = call["request"]["messages"][-1]["content"]
        if "Prompt ID only" not in prompt:
            continue
        own, other = ("[alpha]", "[beta]") if call["backend"] == alpha else ("[beta]", "[alpha]")
        assert own in prompt and other not in prompt
        seen[call["backend"]] += 1
    assert seen[alpha] == seen[beta] == 5


def picker(tmp_path, reply: str):
    """The shared fake (tests/fakes.py) as the candidates' own model, spec 'model-a', answering `reply`."""
    return fake_models(fresh_store(tmp_path), model=FakeBackend("model-a", reply=reply))["model"]


def test_self_select_refuses_foreign_candidates(tmp_path):
    mine = CandidateAnswer("F1", "model-a", "L2", 0, "a", ())
    foreign = CandidateAnswer("F1", "model-b", "L3", 1, "b", ())
    handle = picker(tmp_path, "Candidate 1")
    with pytest.raises(ValueError, match="model-b"):
        asyncio.run(self_select(handle, "question?", [mine, foreign]))
    assert not handle.backend.requests, "refused before any call"


def own_candidates(qid: str = "F1") -> list[CandidateAnswer]:
    return [CandidateAnswer(qid, "model-a", level, i, f"answer at {level}", ())
            for i, level in enumerate(("L0", "L3", "L5", "L6"))]


def test_neutral_selection_shows_shuffled_labels_and_no_example(tmp_path):
    candidates = own_candidates()
    order = neutral_order(candidates, seed=0)
    assert sorted(order) == [0, 1, 2, 3] and order == neutral_order(candidates, seed=0)
    assert any(neutral_order(own_candidates(q), seed=s) != [0, 1, 2, 3] for q in ("F1", "T2") for s in (0, 1))
    handle = picker(tmp_path, "Candidate 2")
    chosen = asyncio.run(self_select(handle, "question?", candidates, seed=0, style="neutral"))
    prompt = prompts(handle)[0]
    assert "e.g." not in prompt and "TELER_" not in prompt and "L3_Step_By_Step" not in prompt
    assert "one of: Candidate 1, Candidate 2, Candidate 3, Candidate 4." in prompt
    shown = [candidates[i].level for i in order]
    assert prompt.index(f"answer at {shown[0]}") < prompt.index(f"answer at {shown[1]}")
    assert (chosen.level, chosen.rule, chosen.style, chosen.shown) == (shown[1], "exact", "neutral", tuple(shown))
    official = asyncio.run(self_select(picker(tmp_path, "TELER_L3_Step_By_Step"), "question?", candidates))
    assert (official.level, official.style, official.shown) == ("L3", "official", ("L0", "L3", "L5", "L6"))
    with pytest.raises(ValueError, match="unknown selection style"):
        asyncio.run(self_select(picker(tmp_path, "1"), "question?", candidates, style="blind"))


@pytest.mark.parametrize("reply, expected", [
    ("Candidate 3", (2, "exact")), ("**3**", (2, "exact")), ("candidate #1.", (0, "exact")),
    ("I choose Candidate 4 because it is complete", (3, "contains")),
    ("Candidate 1 is weaker than Candidate 2", (1, "last-mentioned")),
    ("Candidate 9", (None, "fallback-first")), ("TELER_L3_Step_By_Step", (None, "fallback-first")),
])
def test_neutral_replies_are_read_by_label(reply, expected):
    assert parse_label(reply, 4) == expected


def test_levels_and_l0(shared_data):
    assert parse_levels(None) == ("L0", "L2", "L3", "L4", "L5", "L6")
    assert parse_levels("l0,L1") == ("L0", "L1")
    with pytest.raises(ValueError, match="L7"):
        parse_levels("L1,L7")
    prompt = render_level("L0", "Is Apple cheap?", "TRADING", "FUNDAMENTALS")
    assert prompt.startswith("Trading Signals Context:\nTRADING") and "Question:\nIs Apple cheap?" in prompt
    assert "TELeR" not in prompt and "analyst" not in prompt  # no instruction at all
    assert "TRADING" in render_level("L1", "Is Apple cheap?", "TRADING", "FUNDAMENTALS")


def test_select_questions_per_category_and_total(shared_data):
    questions = read_questions(shared_data / SEED_FILE)
    picked = select_questions(questions, per_category=5)
    assert [q.id for q in picked] == [f"{c}{i}" for c in ("F", "T", "FT") for i in range(1, 6)]
    assert [q.id for q in select_questions(questions, total=4)] == ["F1", "F2", "T1", "T2"]


def test_bad_build_files_name_the_file_and_line(tmp_path):
    good = BuildQuestion("F1", "F", "AAPL", __import__("datetime").date(2025, 9, 30), "q?", ("Return on Assets",),
                         "F1", False, ("AAPL",), __import__("datetime").date(2025, 7, 1)).to_json()
    bad = dict(good, question_id="F2")
    del bad["as_of"]
    (tmp_path / "questions.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"questions\.jsonl:2: missing field 'as_of'"):
        read_questions_file(tmp_path)
    result = CliRunner().invoke(app, ["fintradebench", "build", "audit", "--out", str(tmp_path / "empty"), "-q"])
    assert result.exit_code == 2 and "questions.jsonl" in result.output


def test_an_unknown_selection_style_is_refused_before_any_work(tmp_path):
    result = CliRunner().invoke(app, ["fintradebench", "build", "candidates", "--models", "fake", "--selection",
                                      "blind", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "--selection" in result.output and "neutral" in result.output
    assert not (tmp_path / "out").exists()


class _LogprobJudge(FakeBackend):
    """The scripted rubric verdict, its tokens spelled with a 50/50 alternative at the correctness digit."""

    def __init__(self):
        super().__init__("logprob-judge", name="logprob-judge", reply=json.dumps(VERDICT))
        self.capabilities = replace(self.capabilities, next_token_logprobs=True)
        self.requests = []

    async def generate(self, request):
        self.requests.append(request)
        response = await super().generate(request)
        top = {"4": math.log(0.5), "2": math.log(0.5)}  # the written 4 and a 2: expected 3
        return replace(response, logprobs=_spell(response.text, {"correctness_score": top}))


def _judge_again(build, tmp_path, backend, judge_scores):
    out = tmp_path / "out"
    shutil.copytree(build["out"], out)
    session = BuildSession(out=out, store=RunStore(out / "store.sqlite"), market=MarketData(build["data"]))
    try:
        summary = asyncio.run(judge_phase(session, {backend.spec: backend}, judge_scores=judge_scores))
    finally:
        session.store.close()
    return summary, rows(out / "judged.jsonl")


def test_build_judge_with_expected_scores_asks_for_logprobs_and_writes_them(build, tmp_path):
    judge = _LogprobJudge()
    summary, judged = _judge_again(build, tmp_path, judge, "expected")
    assert judge.requests and all(r.params.top_logprobs == EXPECTED_TOP_LOGPROBS for r in judge.requests)
    assert judged and all(row["expected_scores"] == {"correctness": pytest.approx(3.0), "reasoning_depth": 5.0,
                                                     "signal_integration": 4.0, "fundamental_integration": 3.0}
                          for row in judged)
    assert all(row["scores"]["correctness"] == 4 for row in judged)  # the written integer stays
    assert summary["judge_scores"] == "expected" and summary["expected_coverage"] == [4 * len(judged)] * 2


def test_build_judge_expected_with_a_judge_without_logprobs_says_so(build, tmp_path):
    plain = FakeBackend("plain-judge", name="plain-judge", reply=json.dumps(VERDICT))
    summary, judged = _judge_again(build, tmp_path, plain, "expected")
    assert all(row["expected_scores"] is None and row["scores"]["correctness"] == 4 for row in judged)
    assert summary["expected_coverage"] == [0, 4 * len(judged)]
    assert summary["notes"] == ["plain-judge returns no next-token logprobs: expected scores not read (null)"]
    official, _ = _judge_again(build, tmp_path / "again", plain, "official")
    assert "expected_coverage" not in official


def test_build_judge_fits_a_prompt_over_the_judge_s_window_and_says_so_in_the_row(build, tmp_path):
    small = FakeBackend("small-judge", name="small-judge", reply=json.dumps(VERDICT), context_length=2560)
    _, judged = _judge_again(build, tmp_path, small, "official")
    assert judged and all(row["scores"]["correctness"] == 4 for row in judged)  # every prompt judged
    cut = [row["prompt_cut"] for row in judged if "prompt_cut" in row]
    assert cut and all(set(c) & {"trading_context", "fundamental_context"} for c in cut)  # contexts go first
    _, whole = _judge_again(build, tmp_path / "roomy", FakeBackend("roomy", name="roomy",
                                                                     reply=json.dumps(VERDICT)), "official")
    assert not any("prompt_cut" in row for row in whole)


def test_an_unknown_judge_scoring_is_refused(build, tmp_path):
    result = CliRunner().invoke(app, ["fintradebench", "build", "judge", "--judge", "fake", "--judge-scores", "mean",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "--judge-scores: 'mean' is not one of official, expected" in result.output
