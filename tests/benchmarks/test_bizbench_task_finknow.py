"""FinKnow: the CFA question files, log-likelihood and generation with a fake Models object, scoring."""

from __future__ import annotations

import asyncio

import pytest

from finharness.benchmarks.bizbench.finknow import FinKnowTask, parse_fineval_text
from finharness.core.task import Models, SampleRecord
from finharness.core.types import GenerateResponse, LoglikelihoodResponse
from finharness.data.errors import DataError


class FakeModel:
    """Answers chats from a script and log-likelihoods from a function; records what it was sent."""

    role, spec, capabilities = "model", "fake:finknow", None

    def __init__(self, reply=lambda user: "[[A]]", logprob=lambda context, continuation: -1.0):
        self.reply, self.logprob = reply, logprob
        self.chats, self.requests = [], []

    async def chat(self, messages, params=None, sample_index=0):
        self.chats.append(list(messages))
        return GenerateResponse(text=self.reply(messages[-1].content), finish_reason="stop")

    async def loglikelihood(self, request):
        self.requests.append(request)
        values = tuple(self.logprob(request.context, c) for c in request.continuations)
        return LoglikelihoodResponse(values, (False,) * len(values), (1,) * len(values))


def run(task, samples, model):
    models = Models({"model": model})

    async def go():
        return [await task.solve(s, models) for s in samples]

    predictions = asyncio.run(go())
    records = [SampleRecord(s.id, p, task.score(s, p), metadata=s.metadata) for s, p in zip(samples, predictions)]
    return records, task.aggregate(samples, records)


@pytest.fixture(scope="module")
def samples(shared_data):
    return FinKnowTask().load(shared_data)


def test_both_cfa_sources_load_with_three_options(samples):
    by_source = {}
    for s in samples:
        by_source[s.metadata["source"]] = by_source.get(s.metadata["source"], 0) + 1
        assert len(s.input["options"]) == 3 and s.target in "ABC"
    assert by_source == {"fineval": 1032, "ideafinbench": 1220}
    assert samples[0].id == "fineval-cfa-easy/0" and samples[0].input["options"] == [
        "maturity.", "liquidity.", "expected inflation."]
    assert len({s.id for s in samples}) == len(samples)


def test_fineval_answer_letter_wins_over_a_disagreeing_gold_index(shared_data):
    task = FinKnowTask(source="fineval")
    samples = task.load(shared_data)
    conflicts = [s for s in samples if s.metadata["gold_index_conflict"]]
    assert task.gold_conflicts == len(conflicts) == 3
    assert {s.target for s in conflicts} == {"A"}


def test_parse_fineval_text():
    assert parse_fineval_text("Q:What?,CHOICES: A: x,B: y, z,C: w") == ("What?", ["x", "y, z", "w"])
    assert parse_fineval_text("What? A) x B) y") is None


def test_loglikelihood_picks_the_most_likely_letter_zero_shot(samples):
    chosen = {"A": -3.0, "B": -0.5, "C": -2.0}
    model = FakeModel(logprob=lambda context, continuation: chosen[continuation.strip()])
    subset = samples[:20]
    records, agg = run(FinKnowTask(), subset, model)
    request = model.requests[0]
    assert request.continuations == (" A", " B", " C")
    assert request.context.startswith("Question: ") and request.context.endswith("\nAnswer:")
    assert "Q:" not in request.context and "CHOICES" not in request.context
    assert all(r.prediction["choice"] == "B" for r in records)
    expected = sum(s.target == "B" for s in subset) / len(subset)
    assert agg.metrics["accuracy"].value == pytest.approx(expected) == agg.metrics["ll"].value
    assert not model.chats


def test_loglikelihood_of_option_text_reports_a_length_normalised_choice(samples):
    sample = samples[0]  # options 'maturity.', 'liquidity.', 'expected inflation.'
    totals = {" maturity.": -5.0, " liquidity.": -6.0, " expected inflation.": -6.5}
    model = FakeModel(logprob=lambda context, continuation: totals[continuation])
    records, agg = run(FinKnowTask(continuation="text"), [sample], model)
    assert records[0].prediction["choice"] == "A" and records[0].prediction["choice_norm"] == "C"
    assert records[0].score.values == {"ll": 0.0, "ll_norm": 1.0}  # gold is C


def test_generation_uses_the_official_prompt_and_both_readings(samples, shared_data):
    replies = {0: "So the answer is [[C]].", 1: "The answer is C", 2: "[[B]] or maybe [[C]]"}
    subset = [s for s in samples if s.target == "C"][:3]
    task = FinKnowTask(method="gen")
    task.load(shared_data)  # sets the data dir for the prompt files
    model = FakeModel(reply=lambda user: replies[[s.input["question"] in user for s in subset].index(True)])
    records, agg = run(task, subset, model)
    messages = model.chats[0]
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1].content.startswith("Question: ") and "\nA. " in messages[-1].content
    assert [r.score.values for r in records] == [{"official": 1.0, "robust": 1.0}, {"official": 0.0, "robust": 1.0},
                                                 {"official": 0.0, "robust": 0.0}]
    assert records[1].score.rule == "unparseable" and records[1].score.extracted["robust_rule"] == "english_cue"
    assert agg.extra["unparseable"] == {"official": 2, "robust": 1}
    robust = FinKnowTask(method="gen", extract="robust")
    assert robust.score(subset[1], replies[1]).value == 1.0


def test_gold_through_the_same_path_is_perfect(samples):
    for method in ("ll", "gen"):
        task = FinKnowTask(method=method)
        records = [SampleRecord(s.id, task.gold_prediction(s), task.score(s, task.gold_prediction(s)),
                                metadata=s.metadata) for s in samples]
        agg = task.aggregate(samples, records)
        assert agg.metrics["accuracy"].value == 1.0 and agg.metrics["accuracy"].n == 2252


def test_options_and_missing_data(tmp_path):
    with pytest.raises(ValueError, match="method='mc'"):
        FinKnowTask(method="mc")
    with pytest.raises(ValueError, match="unknown option"):
        FinKnowTask(shots=3)
    with pytest.raises(DataError, match="FinEval_CFA_Easy"):
        FinKnowTask(source="fineval").load(tmp_path)
    with pytest.raises(DataError, match="_val.csv"):
        FinKnowTask(source="ideafinbench").load(tmp_path)
