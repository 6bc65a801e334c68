"""FinKnow: the CFA question files, log-likelihood and generation with the shared fake model, scoring."""

from __future__ import annotations

import asyncio

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.bizbench.finknow import FinKnowTask, parse_fineval_text
from finharness.core.task import SampleRecord
from finharness.core.types import GenerateRequest, LoglikelihoodRequest
from finharness.data.errors import DataError
from tests.fakes import fake_models


def sent(model: FakeBackend, kind: type) -> list:
    return [r for r in model.requests if isinstance(r, kind)]


def run(task, samples, model, store):
    models = fake_models(store, model=model)

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


def test_loglikelihood_picks_the_most_likely_letter_zero_shot(samples, tmp_path):
    chosen = {"A": -3.0, "B": -0.5, "C": -2.0}
    model = FakeBackend(logprob=lambda context, continuation: chosen[continuation.strip()])
    subset = samples[:20]
    records, agg = run(FinKnowTask(), subset, model, tmp_path)
    request = sent(model, LoglikelihoodRequest)[0]
    assert request.continuations == (" A", " B", " C")
    assert request.context.startswith("Question: ") and request.context.endswith("\nAnswer:")
    assert "Q:" not in request.context and "CHOICES" not in request.context
    assert all(r.prediction["choice"] == "B" for r in records)
    expected = sum(s.target == "B" for s in subset) / len(subset)
    assert agg.metrics["accuracy"].value == pytest.approx(expected) == agg.metrics["ll"].value
    assert not sent(model, GenerateRequest)


def test_loglikelihood_of_option_text_reports_a_length_normalised_choice(samples, tmp_path):
    sample = samples[0]  # options 'maturity.', 'liquidity.', 'expected inflation.'
    totals = {" maturity.": -5.0, " liquidity.": -6.0, " expected inflation.": -6.5}
    model = FakeBackend(logprob=lambda context, continuation: totals[continuation])
    records, agg = run(FinKnowTask(continuation="text"), [sample], model, tmp_path)
    assert records[0].prediction["choice"] == "A" and records[0].prediction["choice_norm"] == "C"
    assert records[0].score.values == {"ll": 0.0, "ll_norm": 1.0}  # gold is C


def test_generation_uses_the_official_prompt_and_both_readings(samples, shared_data, tmp_path):
    replies = {0: "So the answer is [[C]].", 1: "The answer is C", 2: "[[B]] or maybe [[C]]"}
    subset = [s for s in samples if s.target == "C"][:3]
    task = FinKnowTask(method="gen")
    task.load(shared_data)  # sets the data dir for the prompt files
    model = FakeBackend(reply=lambda user: replies[[s.input["question"] in user for s in subset].index(True)])
    records, agg = run(task, subset, model, tmp_path)
    messages = sent(model, GenerateRequest)[0].messages
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
