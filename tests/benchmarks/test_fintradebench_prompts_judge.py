"""FinTradeBench prompts (golden strings per level), self-selection parsing, judge JSON and retries."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.fintradebench.judge import JUDGE_ATTEMPTS, judge_answer, judge_messages, parse_verdict
from finharness.benchmarks.fintradebench.prompts import Candidate, parse_selection, render, selection_prompt

from ..fakes import fake_models

GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "fintradebench_prompts.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: f"{c['mode']}-{c['level']}")
def test_prompt_golden_strings(case):
    assert render(case["mode"], case["level"], case["question"], context=case["context"],
                  trading_context=case["trading_context"], fundamental_context=case["fundamental_context"]) \
        == case["prompt"]


def test_prompts_carry_release_text_and_evidence_only_where_the_level_has_it():
    q = "Is Apple cheap?"
    assert render("rag", "L1", q) == ("You are a financial analyst. Provide a detailed response to Question: Is Apple "
                                      "cheap?. Please do not provide any investment advice.\nAnswer:")
    for level in ("L1", "L2", "L3", "L4"):
        assert "EVIDENCE" not in render("rag", level, q, context="EVIDENCE")
    for level in ("L5", "L6"):
        assert "Context:\nMARKET DATA:\nEVIDENCE\n" in render("rag", level, q, context="EVIDENCE")
    assert "6. **Justify:**" in render("rag", "L6", q) and "Justify" not in render("rag", "L5", q)
    assert "Evaluation Method:" in render("rag", "L4", q) and "Evaluation Method:" not in render("rag", "L3", q)
    for level in ("L1", "L2", "L3", "L4", "L5", "L6"):
        text = render("ideal", level, q, trading_context="TT", fundamental_context="FF")
        assert "TT" in text and "FF" in text and q in text
    assert render("ideal", "bare", q) == q
    with pytest.raises(ValueError, match="norag takes L1-L4"):
        render("norag", "L5", q)


def test_self_selection_rules():
    cands = [Candidate("L1", "TELER_L1_Baseline", "a"), Candidate("L3", "L3_Step_By_Step", "c"),
             Candidate("L6", "TELER_L6_Maximalist", "f")]
    assert "--- L3_Step_By_Step ---\nc" in selection_prompt("rag", "Q?", cands)
    assert parse_selection("rag", '"L3_Step_By_Step"\nbecause...', cands) == (cands[1], "contains")
    assert parse_selection("rag", "I pick TELER_L6_Maximalist", cands)[0] is cands[2]
    assert parse_selection("rag", "none of them", cands) == (cands[0], "fallback-first")
    assert parse_selection("rag", "\nL3_Step_By_Step", cands)[1] == "fallback-first"  # only the first line counts
    ideal = [Candidate("L1", "L1_Baseline", "a"), Candidate("L3", "TELER_L3_Step_By_Step", "c"),
             Candidate("bare", "No RAG", "n")]
    assert "--- Candidate: No RAG ---\nn" in selection_prompt("ideal", "Q?", ideal)
    assert parse_selection("ideal", "**No RAG**", ideal) == (ideal[2], "exact")
    assert parse_selection("ideal", "TELER_L3_Step_By_Step is better than L1_Baseline", ideal) == \
        (ideal[1], "starts-with")
    assert parse_selection("ideal", "between L1_Baseline and TELER_L3_Step_By_Step", ideal)[1] == "last-mentioned"


VALID = {"evaluations": [{"model_name": "m", "mode": "RAG",
                          "indicator_analysis": {"found_indicators": ["ROA", "RSI"], "total_golden_indicators": 4,
                                                 "indicators_found_count": 2},
                          "bias_analysis": {"trading_signals_score": 4, "fundamental_score": 3},
                          "overall_quality": {"correctness_score": 4, "reasoning_score": 5}}]}


def test_verdict_from_json_with_extra_text():
    verdict = parse_verdict("Here is my evaluation:\n```json\n" + json.dumps(VALID) + "\n```\nThanks!")
    assert verdict.parsed and verdict.scores == {"correctness": 4, "reasoning": 5, "trading_signals": 4,
                                                 "fundamentals": 3}
    assert (verdict.found_count, verdict.total_golden, verdict.missing) == (2, 4, ())


def test_verdict_missing_fields_and_invalid_json():
    partial = {"overall_quality": {"correctness_score": "3"}}
    verdict = parse_verdict(json.dumps(partial))
    assert verdict.parsed and verdict.scores == {"correctness": 3}
    assert set(verdict.missing) >= {"reasoning", "trading_signals", "fundamentals", "indicators_found_count"}
    assert (verdict.found_count, verdict.total_golden) == (0, 1)  # the release's defaults
    assert not parse_verdict("no json here").parsed
    assert "invalid JSON" in parse_verdict('{"overall_quality": {"correctness_score": 4,}}').error
    out_of_range = {"overall_quality": {"correctness_score": 7, "reasoning_score": 2}}
    assert not parse_verdict(json.dumps(out_of_range)).parsed
    assert not parse_verdict(json.dumps({"evaluations": []})).parsed


def scripted_judge(folder, replies):
    """The shared fake (tests/fakes.py) as a judge that answers `replies` in order."""
    return fake_models(folder, judge=FakeBackend(name="judge", replies=replies))["judge"]


def sample_indices(judge):
    return [request.sample_index for request in judge.backend.requests]


def test_retry_as_new_cached_calls_then_unparseable(tmp_path):
    judge = scripted_judge(tmp_path / "a", ["oops", '{"broken": ', json.dumps(VALID)])
    judgment = asyncio.run(judge_answer(judge, judge_messages(question="q", golden=["Return on Assets"],
                                                              gold_answer="g", answer="a", model="m", mode="rag")))
    assert judgment.verdict.parsed and judgment.attempts == 3 and sample_indices(judge) == [0, 1, 2]
    judge = scripted_judge(tmp_path / "b", ["x"] * 5)
    judgment = asyncio.run(judge_answer(judge, ()))
    assert not judgment.verdict.parsed and judgment.attempts == JUDGE_ATTEMPTS == 3


def test_judge_prompt_is_the_release_rubric_with_one_candidate():
    system, user = judge_messages(question="Q?", golden=["Return on Assets", "RSI"], gold_answer="GOLD",
                                  answer="x" * 5000, model="m1", mode="norag", trading_context="TC",
                                  fundamental_context="FC")
    assert system.role == "system" and "expert Financial Analyst and AI Evaluator" in system.content
    assert "You are evaluating 1 different AI models" in user.content
    assert "[Golden Indicators (Reference Metrics)]: \nReturn on Assets|RSI" in user.content
    assert "Mode: Non_RAG" in user.content and "...[TRUNCATED]" in user.content and "x" * 4001 not in user.content
    assert "[Context - Trading Signals]:\nTC" in user.content and "[Context - Fundamentals]:\nFC" in user.content
