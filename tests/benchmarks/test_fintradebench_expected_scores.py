"""Expected rubric scores (-o judge_scores=expected, ours): Σ s·P(s) at the token where the judge wrote a score."""

from __future__ import annotations

import asyncio
import math

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.fintradebench.judge import expected_scores
from finharness.core.types import TokenLogprob
from finharness.judges.soft import TOP_LOGPROBS as EXPECTED_TOP_LOGPROBS
from tests.benchmarks.test_fintradebench_task import ANSWER, load, verdict
from tests.fakes import fake_models


def _spell(reply: str, tops: dict[str, dict[str, float]]) -> tuple[TokenLogprob, ...]:
    """Tokens spelling `reply`: each digit that follows a key in `tops` is a token of its own carrying those
    alternatives; the rest goes in 3-character tokens with no alternatives but themselves."""
    tokens, i = [], 0
    positions = {}
    for key, top in tops.items():
        at = reply.index(f'"{key}": ') + len(f'"{key}": ')
        positions[at] = top
    while i < len(reply):
        if i in positions:
            top = positions[i]
            tokens.append(TokenLogprob(reply[i], top[reply[i]], tuple(top.items())))
            i += 1
            continue
        nxt = min([p for p in positions if p > i] + [i + 3, len(reply)])
        tokens.append(TokenLogprob(reply[i:nxt], -0.01, ((reply[i:nxt], -0.01),)))
        i = nxt
    return tuple(tokens)


def test_each_score_is_the_mean_of_its_digit_distribution():
    reply = "Here is my evaluation:\n" + verdict(correctness=4)
    tops = {"correctness_score": {"4": math.log(0.6), "5": math.log(0.3), "3": math.log(0.1)},
            "reasoning_score": {"5": math.log(0.5), "4": math.log(0.25), "x": math.log(0.25)}}
    read = expected_scores(reply, _spell(reply, tops))
    assert read["correctness"] == pytest.approx(4 * 0.6 + 5 * 0.3 + 3 * 0.1)
    assert read["reasoning"] == pytest.approx((5 * 0.5 + 4 * 0.25) / 0.75)  # renormalised over the digits
    # fields whose token carries no other digit read as what was written
    assert read["trading_signals"] == pytest.approx(3.0) and read["fundamentals"] == pytest.approx(4.0)


def test_a_digit_sharing_its_token_with_the_separator_is_read_after_the_prefix():
    reply = '{"overall_quality": {"correctness_score": 2}}'
    at = reply.index(": 2")
    tokens = (TokenLogprob(reply[:at], -0.01, ((reply[:at], -0.01),)),
              TokenLogprob(": 2", math.log(0.5), ((": 2", math.log(0.5)), (": 3", math.log(0.5)), (":", -3.0))),
              TokenLogprob(reply[at + 3:], -0.01, ((reply[at + 3:], -0.01),)))
    assert expected_scores(reply, tokens) == {"correctness": pytest.approx(2.5)}


def test_nothing_is_read_without_logprobs_or_when_tokens_do_not_spell_the_reply():
    reply = verdict()
    assert expected_scores(reply, None) == {}
    assert expected_scores(reply + " ", _spell(reply, {})) == {}


def logprob_judge() -> FakeBackend:
    """Writes the verdict JSON, with per-token logprobs carrying alternatives at the correctness digit."""
    tops = {"correctness_score": {"4": math.log(0.5), "2": math.log(0.5)}}
    return FakeBackend(name="logprob-judge", reply=verdict(correctness=4), logprobs=lambda reply: _spell(reply, tops))


@pytest.mark.parametrize("judge_scores, correctness", [("official", 4 / 5), ("expected", 3 / 5)])
def test_the_task_scores_with_expected_values_only_when_asked(shared_data, judge_scores, correctness, tmp_path):
    task, samples = load(shared_data, mode="norag", judge_context="none", levels="L1", select="false",
                         judge_scores=judge_scores)
    judge = logprob_judge()
    prediction = asyncio.run(task.solve(samples["F1"], fake_models(tmp_path, model=ANSWER, judge=judge)))
    score = task.score(samples["F1"], prediction)
    assert score.value == pytest.approx(correctness)  # (4·½ + 2·½) / 5 = 0.6 when expected
    if judge_scores == "expected":
        assert judge.requests[-1].params.top_logprobs == EXPECTED_TOP_LOGPROBS
        assert score.values["expected_coverage"] == pytest.approx(1.0)
        assert prediction["judge"]["expected"]["correctness"] == pytest.approx(3.0)
    else:
        assert judge.requests[-1].params.top_logprobs == 0 and "expected" not in prediction["judge"]
        assert "expected_coverage" not in score.values


def test_expected_mode_falls_back_to_written_scores_for_a_judge_without_logprobs(shared_data, tmp_path):
    task, samples = load(shared_data, mode="norag", judge_context="none", levels="L1", select="false",
                         judge_scores="expected")
    judge = FakeBackend(name="judge", replies=[verdict(correctness=4)])  # next_token_logprobs False
    prediction = asyncio.run(task.solve(samples["F1"], fake_models(tmp_path, model=ANSWER, judge=judge)))
    score = task.score(samples["F1"], prediction)
    assert score.value == pytest.approx(0.8) and score.values["expected_coverage"] == 0.0
