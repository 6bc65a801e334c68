"""UCFE dialogues through the engine with fake backends: rounds, settings, frozen user, resume."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.ucfe.prompts import FOLLOW_UP_CONTINUE, FOLLOW_UP_END, OPENING_CUE
from finharness.benchmarks.ucfe.task import UCFETask
from finharness.core.backend import BackendError
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import GenerateResponse

LOG = "ucfe/log/20241005_143552_gpt-4o_eng.json"
MODEL_REPLY = "MODEL-REPLY: here is a framework."


class CountingUser(FakeBackend):
    """A simulator that writes `<Consultation Ended>` once it has spoken `end_at` times after opening."""

    def __init__(self, end_at: int | None, name: str = "user"):
        super().__init__(f"fake?name={name}", name=name)
        self.end_at = end_at

    def identity(self):
        return {**super().identity(), "end_at": self.end_at}

    async def generate(self, request):
        self.calls += 1
        heard = sum(m.role == "user" for m in request.messages)  # model replies handed over so far
        text = "<Consultation Ended>" if self.end_at is not None and heard >= self.end_at else f"Question {heard + 1}?"
        return GenerateResponse(text=text, finish_reason="stop", prompt_tokens=10 * len(request.messages),
                                completion_tokens=3)


class NoPenalties(FakeBackend):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.capabilities = replace(self.capabilities, penalties=False)


class FailsAfter(CountingUser):
    """A simulator that breaks (not retryable) on its call number `fail_at`."""

    def __init__(self, end_at: int | None, fail_at: int):
        super().__init__(end_at)
        self.fail_at = fail_at

    def identity(self):  # same identity as the healthy simulator: its answers are the same
        return CountingUser.identity(self)

    async def generate(self, request):
        if self.calls + 1 >= self.fail_at:
            self.calls += 1
            raise BackendError("simulated crash", retryable=False)
        return await super().generate(request)


def model_backend(**kw) -> FakeBackend:
    return FakeBackend("fake?name=model", reply=MODEL_REPLY, name="model", **kw)


def run(task, backends, tmp_path: Path, shared_data: Path, *, limit=None, store=None, out="run"):
    own = store is None
    store = store or RunStore(tmp_path / "store.sqlite")
    try:
        return asyncio.run(run_task(task, backends, store, RunOptions(data_dir=shared_data, limit=limit), out_dir=tmp_path / out))
    finally:
        if own:
            store.close()


def generate_calls(record):
    return [t for t in record.trace if t.get("kind") == "generate"]


@pytest.mark.parametrize("end_at", [1, 2, 5])
def test_simulator_ends_the_dialogue_at_round_k(tmp_path, shared_data, end_at):
    result = run(UCFETask(tasks="Analyst"), {"model": model_backend(), "user": CountingUser(end_at)}, tmp_path,
                 shared_data, limit=2)
    for record in result.records:
        p = record.prediction
        assert p["rounds"] == end_at and p["ended_by_simulator"] is True
        assert len(p["dialogue"]) == 2 * end_at + 1
        assert [t["role"] for t in p["dialogue"]] == ["user", "assistant"] * end_at + ["user"]
        assert p["dialogue"][-1]["content"] == "<Consultation Ended>"
        assert len(generate_calls(record)) == 2 * end_at + 1
    assert result.results["metrics"]["rounds"]["value"] == end_at
    assert result.results["metrics"]["ended_by_simulator"]["value"] == 1.0


def test_a_simulator_that_never_ends_stops_after_nine_rounds(tmp_path, shared_data):
    result = run(UCFETask(tasks="Analyst"), {"model": model_backend(), "user": CountingUser(None)}, tmp_path,
                 shared_data, limit=1)
    p = result.records[0].prediction
    assert p["rounds"] == 9 and p["ended_by_simulator"] is False and len(p["dialogue"]) == 19
    assert result.results["metrics"]["ended_by_simulator"]["value"] == 0.0


def test_max_rounds_caps_a_dialogue_the_simulator_never_ends(tmp_path, shared_data):
    task = UCFETask(tasks="Analyst", max_rounds=3)
    result = run(task, {"model": model_backend(), "user": CountingUser(None)}, tmp_path, shared_data, limit=1)
    p = result.records[0].prediction
    assert p["rounds"] == 3 and p["ended_by_simulator"] is False and len(p["dialogue"]) == 7
    assert task.simulation.max_rounds == 3 and UCFETask(tasks="Analyst").simulation.max_rounds == 9
    assert task.config() != UCFETask(tasks="Analyst").config()  # part of the run key


def test_official_instruction_ends_a_scripted_user_at_round_three(tmp_path, shared_data):
    # the simulator is asked to write <Consultation Ended> only from round 3 on; this one obeys at once
    user = FakeBackend("fake?name=obedient", script=[{"match": "<Consultation Ended>", "reply": "<Consultation Ended>"}],
                       reply="One more question, please.", name="obedient")
    result = run(UCFETask(tasks="Analyst"), {"model": model_backend(), "user": user}, tmp_path, shared_data, limit=1)
    record = result.records[0]
    assert record.prediction["rounds"] == 3
    handed_over = [t["prompt"][-1]["content"] for t in generate_calls(record) if t["role"] == "user"][1:]
    assert handed_over == [MODEL_REPLY + "\n\n" + FOLLOW_UP_CONTINUE] * 2 + [MODEL_REPLY + "\n\n" + FOLLOW_UP_END]


def test_official_decoding_settings_reach_every_call(tmp_path, shared_data):
    result = run(UCFETask(tasks="Analyst"), {"model": model_backend(), "user": CountingUser(3)}, tmp_path, shared_data,
                 limit=1)
    calls = generate_calls(result.records[0])
    user_temps = [c["params"]["temperature"] for c in calls if c["role"] == "user"]
    assert user_temps == [0.1, 0.7, 0.7, 0.7]
    assert {c["params"]["temperature"] for c in calls if c["role"] == "model"} == {0.5}
    for c in calls:
        assert c["params"]["seed"] == 123
        assert c["params"]["frequency_penalty"] == 0.5 and c["params"]["presence_penalty"] == 0.5
    opening = calls[0]
    assert opening["role"] == "user" and [m["role"] for m in opening["prompt"]] == ["system"]
    assert "TCL Electronics' main businesses include display" in opening["prompt"][0]["content"]
    model_calls = [c for c in calls if c["role"] == "model"]
    assert model_calls[0]["prompt"][0]["content"].startswith("You are providing research framework recommendations")
    # the model sees the simulator's messages as user turns and its own replies as assistant turns
    assert [m["role"] for m in model_calls[-1]["prompt"]] == ["system"] + ["user", "assistant"] * 2 + ["user"]
    assert result.results["config"]["task_config"]["settings"]["user_first_temperature"] == 0.1


def test_cue_opening_asks_the_simulator_for_its_first_message_in_a_user_turn(tmp_path, shared_data):
    task = UCFETask(tasks="Analyst", user_opening="cue")
    assert task.config() != UCFETask(tasks="Analyst").config()  # part of the run key
    # CountingUser counts user turns it has heard: with the cue one more, so 3 ends it after two replies
    result = run(task, {"model": model_backend(), "user": CountingUser(3)}, tmp_path, shared_data, limit=1)
    assert result.records[0].prediction["rounds"] == 2
    user_calls = [c for c in generate_calls(result.records[0]) if c["role"] == "user"]
    opening = user_calls[0]["prompt"]
    assert [m["role"] for m in opening] == ["system", "user"] and opening[1]["content"] == OPENING_CUE
    assert "TCL Electronics' main businesses include display" in opening[0]["content"]
    # the cue stays the simulator's first user turn; the assistant's replies follow it as before
    assert [m["role"] for m in user_calls[-1]["prompt"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert user_calls[-1]["prompt"][1]["content"] == OPENING_CUE
    assert result.records[0].prediction["dialogue"][0]["content"] == "Question 2?"  # the cue counts as heard
    assert any("user_opening cue" in n for n in result.results["notes"])


def test_zero_shot_is_one_round_with_the_model_prompt_as_user_turn(tmp_path, shared_data):
    task = UCFETask(tasks="0_股价预测")
    assert task.roles == ("model",) and UCFETask(tasks="0_股价预测,Analyst").roles == ("model", "user")
    result = run(task, {"model": model_backend()}, tmp_path, shared_data, limit=3)
    for record in result.records:
        calls = generate_calls(record)
        assert len(calls) == 1 and calls[0]["role"] == "model"
        system, user = calls[0]["prompt"]
        assert system["role"] == "system" and user["role"] == "user" and system["content"] == user["content"]
        assert "{information}" not in user["content"] and "Market data and news announcements are:" in user["content"]
        p = record.prediction
        assert p["rounds"] == 1 and p["ended_by_simulator"] is None and p["user_source"] == "zero-shot"
    assert "ended_by_simulator" not in result.results["metrics"]
    # one round in every dialogue is a count with no spread, not a 3-of-3 success rate (Wilson would give ~[0.44, 1])
    assert result.results["metrics"]["rounds"]["ci95"] == [1.0, 1.0]


def test_penalties_are_recorded_as_unsupported(tmp_path, shared_data):
    model = NoPenalties(spec="fake?name=plain", reply=MODEL_REPLY, name="plain")
    result = run(UCFETask(tasks="Analyst"), {"model": model, "user": CountingUser(1)}, tmp_path, shared_data, limit=2)
    record = result.records[0]
    assert record.prediction["penalties_applied"] == {"model": False, "user": True}
    model_params = [c["params"] for c in generate_calls(record) if c["role"] == "model"]
    assert all(p["frequency_penalty"] == 0.0 and p["presence_penalty"] == 0.0 for p in model_params)
    assert any("the model backend has no frequency/presence penalties" in n and n.startswith("2 dialogue")
               for n in result.results["notes"])
    assert result.results["extra"]["penalties_not_applied"] == {"model": 2, "user": 0}


def test_a_crashed_dialogue_resumes_mid_way_without_repeating_a_call(tmp_path, shared_data):
    task = UCFETask(tasks="Analyst")
    store = RunStore(tmp_path / "store.sqlite")
    model = model_backend()
    broken = FailsAfter(end_at=4, fail_at=3)  # opening and round-1 follow-up succeed, round 2 crashes
    first = run(task, {"model": model, "user": broken}, tmp_path, shared_data, limit=1, store=store)
    assert first.records[0].failed and first.results["status"] == "incomplete"
    made_before = store.count_calls()
    assert made_before == 4  # user opening, model round 1, user round 1, model round 2
    requests_before = {c["key"] for c in store.iter_calls()}

    healthy = CountingUser(end_at=4)
    second = run(UCFETask(tasks="Analyst"), {"model": model, "user": healthy}, tmp_path, shared_data, limit=1,
                 store=store)
    store.close()
    record = second.records[0]
    assert record.failed is None and record.prediction["rounds"] == 4
    calls = generate_calls(record)
    assert [c["cache_hit"] for c in calls] == [True] * made_before + [False] * (len(calls) - made_before)
    assert second.results["counts"]["cache_hits"] == made_before
    assert second.results["counts"]["calls"] == len(calls) - made_before
    # no request was sent twice: the model backend saw each of its turns once over both runs
    assert model.calls == sum(c["role"] == "model" for c in calls)
    assert healthy.calls == sum(c["role"] == "user" and not c["cache_hit"] for c in calls)
    assert requests_before <= {c["key"] for c in RunStore(tmp_path / "store.sqlite").iter_calls()}


def test_frozen_user_replays_the_gpt4o_user_turns(tmp_path, shared_data):
    log = shared_data / LOG
    task = UCFETask(tasks="Analyst,0_金融指标计算", mode="frozen-user", frozen_from=str(log))
    assert task.roles == ("model",)
    result = run(task, {"model": model_backend()}, tmp_path, shared_data, limit=12)
    stored = json.loads(log.read_text(encoding="utf-8"))
    by_id = {f"{k}/{x['id']}": x for k, xs in stored.items() for x in xs}
    for record in result.records:
        original = by_id[record.id]
        ours = record.prediction["dialogue"]
        assert [t["role"] for t in ours] == [{"用户": "user", "AI助手": "assistant"}[t["role"]]
                                             for t in original["dialogue"]]
        assert [t["content"] for t in ours if t["role"] == "user"] == \
               [t["content"] for t in original["dialogue"] if t["role"] == "用户"]
        assert {t["content"] for t in ours if t["role"] == "assistant"} == {MODEL_REPLY}
        assert record.prediction["rounds"] == original["dialogue_round"]
        assert record.prediction["user_source"] == "frozen"
    assert any("frozen-user mode" in n for n in result.results["notes"])


def test_frozen_user_from_a_run_skips_items_it_lacks_and_says_so(tmp_path, shared_data):
    source = run(UCFETask(tasks="Analyst"), {"model": model_backend(), "user": CountingUser(2)}, tmp_path, shared_data,
                 limit=3, out="source")
    assert source.results["status"] == "complete"
    other = FakeBackend("fake?name=other", reply="OTHER", name="other")
    task = UCFETask(tasks="Analyst", mode="frozen-user", frozen_from=str(tmp_path / "source"))
    result = run(task, {"model": other}, tmp_path, shared_data, out="frozen")
    assert [r.id for r in result.records] == ["Analyst/1", "Analyst/2", "Analyst/3"]
    assert all(r.prediction["rounds"] == 2 for r in result.records)
    assert any("7 selected item(s) have no dialogue" in n for n in result.results["notes"])


@pytest.mark.parametrize("options,message", [
    ({"mode": "dream"}, "mode='dream' is not one of"),
    ({"mode": "frozen-user"}, "needs -o frozen_from=PATH"),
    ({"frozen_from": "x.json"}, "needs -o frozen_from=PATH"),
    ({"mode": "frozen-user", "frozen_from": "/nonexistent/log.json"}, "file not found"),
    ({"max_tokens": 0}, "max_tokens must be at least 1"),
    ({"max_rounds": 0}, "max_rounds must be at least 1"),
    ({"user_opening": "prefill"}, r"user_opening='prefill' is not one of \['official', 'cue'\]"),
    ({"shots": 3}, r"unknown option\(s\) \['shots'\]"),
])
def test_bad_options_say_what_is_allowed(options, message):
    with pytest.raises(ValueError, match=message):
        UCFETask(**options)


def test_score_reports_shape_not_quality(shared_data):
    task = UCFETask()
    sample = task.load(shared_data)[0]
    score = task.score(sample, {"dialogue": [], "rounds": 3, "ended_by_simulator": True, "total_tokens": 10,
                                "tokens": {"model": {"prompt": 1, "completion": 7}}})
    assert score.value is None and score.values == {"rounds": 3.0, "total_tokens": 10.0,
                                                    "model_completion_tokens": 7.0, "ended_by_simulator": 1.0}
    assert not task.score(sample, "a bare string").parsed
