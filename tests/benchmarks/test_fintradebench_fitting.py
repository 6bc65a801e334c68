"""FinTradeBench prompt fitting (fitting.py): a judge or self-selection prompt that does not fit the model's
window is cut by the documented policy, counted and noted; one that fits is sent exactly as the release writes it."""

from __future__ import annotations

import asyncio
import json

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.fintradebench.fitting import TRUNCATED, cut_text, fit_prompt
from finharness.benchmarks.fintradebench.judge import (
    JUDGE_PARAMS,
    JUDGE_PROMPT,
    fitted_judge_messages,
    judge_messages,
)
from finharness.benchmarks.fintradebench.task import FinTradeBenchTask
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import Message

from ..fakes import fake_models
from .test_fintradebench_task import ANSWER, verdict


def _render(fixed: str):
    return lambda limits, texts: (Message("user", fixed + "".join(cut_text(texts[k], limits[k]) for k in texts)),)


def _fit(texts: dict[str, str], stages, window: int | None, fixed: str = "F" * 10):
    render = _render(fixed)
    return fit_prompt(lambda limits: render(limits, texts), {k: len(v) for k, v in texts.items()}, stages,
                      lambda messages: None if window is None else len(messages[0].content) <= window)


def test_a_prompt_that_fits_or_cannot_be_counted_is_not_touched():
    texts = {"context": "c" * 50, "answer": "a" * 50}
    for window in (110, None):
        messages, cuts = _fit(texts, [("context",), ("answer",)], window)
        assert cuts == {} and messages[0].content == "F" * 10 + "c" * 50 + "a" * 50


def test_stages_are_cut_in_order_and_only_as_far_as_needed():
    texts = {"context": "c" * 50, "answer": "a" * 50}
    messages, cuts = _fit(texts, [("context",), ("answer",)], window=100)
    kept = 100 - 10 - 50 - len(TRUNCATED)  # the context gives up just enough, with the marker; the answer is whole
    assert cuts == {"context": [50, kept]}
    assert messages[0].content == "F" * 10 + "c" * kept + TRUNCATED + "a" * 50


def test_a_stage_shares_equally_and_a_short_field_keeps_all_of_its_text():
    texts = {"short": "s" * 10, "long": "l" * 100, "longer": "L" * 200}
    messages, cuts = _fit(texts, [("short", "long", "longer")], window=150)
    share = (150 - 10 - 10 - 2 * len(TRUNCATED)) // 2  # the short one whole, the other two the same share
    assert cuts == {"long": [100, share], "longer": [200, share]}
    assert len(messages[0].content) <= 150


def test_when_a_stage_cut_to_nothing_is_not_enough_the_next_is_cut():
    texts = {"context": "c" * 50, "answer": "a" * 50}
    messages, cuts = _fit(texts, [("context",), ("answer",)], window=60)
    assert cuts["context"] == [50, 0] and 0 < cuts["answer"][1] < 50
    assert len(messages[0].content) <= 60


def test_a_prompt_whose_fixed_text_alone_is_too_long_comes_back_cut_to_the_bone():
    messages, cuts = _fit({"answer": "a" * 50}, [("answer",)], window=5)
    assert cuts == {"answer": [50, 0]} and messages[0].content == "F" * 10 + TRUNCATED  # the call then fails


def char_judge(tmp_path, chars: int | None):
    """The shared fake (tests/fakes.py) as a judge whose window holds `chars` characters of judge prompt (None:
    it cannot count, as a hosted API)."""
    framing = 4 * len(judge_messages(**JUDGED))  # the handle's per-message allowance
    backend = FakeBackend(name="judge", count_tokens=lambda text: None if chars is None else len(text),
                          context_length=(chars or 0) + framing + JUDGE_PARAMS.max_tokens)
    return fake_models(tmp_path, judge=backend)["judge"]


JUDGED = dict(question="Is Apple profitable?", golden=["ROE", "ROA"], gold_answer="G" * 3000, answer="A" * 5000,
              model="m", mode="norag", trading_context="T" * 1000, fundamental_context="U" * 1000)


def test_the_judge_prompt_is_the_release_s_exactly_when_it_fits(tmp_path):
    official = judge_messages(**JUDGED)
    for chars in (None, 10**6):
        messages, cuts = fitted_judge_messages(char_judge(tmp_path, chars), **JUDGED)
        assert messages == official and cuts == {}
    assert official[1].content.count("A") >= 4000 and TRUNCATED in official[1].content  # the release's own cut


def test_the_judge_prompt_loses_our_contexts_first_then_answer_and_gold_answer_equally(tmp_path):
    official = sum(len(m.content) for m in judge_messages(**JUDGED))
    messages, cuts = fitted_judge_messages(char_judge(tmp_path, official - 500), **JUDGED)
    assert set(cuts) == {"trading_context", "fundamental_context"}  # the answers are whole
    assert cuts["trading_context"][1] == cuts["fundamental_context"][1] < 1000
    messages, cuts = fitted_judge_messages(char_judge(tmp_path, official - 3000), **JUDGED)
    assert cuts["trading_context"][1] == cuts["fundamental_context"][1] == 0
    assert cuts["answer"][0] == 4000 and cuts["answer"][1] == cuts["gold_answer"][1] < 3000
    user = messages[1].content
    assert JUDGE_PROMPT.split("--- EVALUATION RUBRIC")[1][:500] in user  # the rubric is never cut
    assert user.count(TRUNCATED) == 4 and sum(len(m.content) for m in messages) <= official - 3000


def _run(shared_data, tmp_path, judge_window: int):
    task = FinTradeBenchTask(mode="norag", per_category=1, judge_context="none")  # the contexts: unit tests above
    judge = FakeBackend("fake?name=judge", reply=verdict(3), name="judge", context_length=judge_window)
    model = FakeBackend("fake", script=[{"match": "Prompt ID only", "reply": "L3_Step_By_Step"},
                                        {"match": "", "reply": ANSWER}])
    return asyncio.run(run_task(task, {"model": model, "judge": judge}, RunStore(tmp_path / "store.sqlite"),
                                RunOptions(data_dir=shared_data), out_dir=tmp_path / "run"))


def test_a_run_with_a_small_judge_window_completes_and_counts_every_cut(shared_data, tmp_path):
    result = _run(shared_data, tmp_path, judge_window=3072)  # 2,048 prompt tokens after the verdict's 1,024
    results = result.results
    assert results["status"] == "complete" and results["metrics"]["accuracy"]["n"] == 3
    cut = results["extra"]["prompt_cuts"]["judge"]
    assert cut["samples"] >= 1 and cut["fields"].get("gold_answer", 0) >= 1
    assert any("judge prompt(s) did not fit the judge's context window" in note for note in results["notes"])
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    cut_records = [r for r in records if r["prediction"].get("judge_prompt_cut")]
    assert len(cut_records) == cut["samples"] and all(r["truncated"] for r in cut_records)
    assert results["counts"]["budget_truncations"] == cut["samples"]


def test_a_window_too_small_for_the_rubric_fails_the_sample_as_prompt_too_long(shared_data, tmp_path):
    result = _run(shared_data, tmp_path, judge_window=1100)  # 76 prompt tokens: not even the rubric fits
    assert result.results["status"] == "incomplete"
    assert result.results["counts"]["failed_samples"] == 3
    assert result.results["counts"]["failure_kinds"] == {"prompt-too-long": 3}


def test_a_self_selection_prompt_over_the_model_s_window_is_cut_and_recorded(shared_data, tmp_path):
    task = FinTradeBenchTask(mode="norag", per_category=1, judge_context="none")  # levels L1-L4
    long_answer = ANSWER + " more" * 1500  # cut by the fake at max_tokens: four overflow a 4,096-token window
    model = FakeBackend("fake", context_length=4096,
                        script=[{"match": "Prompt ID only", "reply": "L3_Step_By_Step"},
                                {"match": "", "reply": long_answer}])
    judge = FakeBackend("fake?name=judge", reply=verdict(3), name="judge")
    result = asyncio.run(run_task(task, {"model": model, "judge": judge}, RunStore(tmp_path / "store.sqlite"),
                                  RunOptions(data_dir=shared_data), out_dir=tmp_path / "run"))
    results = result.results
    assert results["status"] == "complete"
    assert results["extra"]["prompt_cuts"]["selection"]["samples"] == 3
    records = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    cut = records[0]["prediction"]["selection"]["prompt_cut"]
    assert set(cut) == {"L1", "L2", "L3", "L4"} and len({kept for _, kept in cut.values()}) == 1
