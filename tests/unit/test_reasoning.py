"""Thinking kept apart from the answer (core/reasoning.py), through the model handle, with any backend."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from finharness.backends import from_spec
from finharness.core.model import CachedModel, RunCounters, response_from_json
from finharness.core.reasoning import (
    adaptation_notes,
    adaptations_of,
    sample_thinking,
    split_thinking,
    thinking_apart,
    thinking_limit,
)
from finharness.core.store import RunStore
from finharness.core.types import (
    DEFAULT_THINKING_TOKENS,
    Adaptation,
    GenerateParams,
    GenerateRequest,
    GenerateResponse,
    TokenLogprob,
    messages,
    to_jsonable,
)


@pytest.mark.parametrize("text, answer, thinking", [
    ("答案：A", "答案：A", None),
    ("<think>ratio is 2</think>\n\nAnswer: B", "Answer: B", "ratio is 2"),
    ("  <think>still going", "", "still going"),  # cut while thinking: no answer
    ("opened in the prompt</think>\nC", "C", "opened in the prompt"),  # DeepSeek-R1 / Qwen3 templates
    ("the tag <think> is named here", "the tag <think> is named here", None),
    ("<think></think>D", "D", ""),  # a model told not to think still writes the empty block
    ("a<think>b</think>c<think>d</think>e", "ace", "b\n\nd"),
])
def test_split_thinking(text, answer, thinking):
    assert split_thinking(text) == (answer, thinking)


def test_thinking_apart_keeps_the_servers_field_and_counts_what_it_moved():
    reply = GenerateResponse("<think>one two three</think> A", "stop", completion_tokens=5,
                             reasoning="from the field")
    words = lambda text: len(text.split())  # noqa: E731 - a tokenizer of words
    split = thinking_apart(reply, words)
    assert split.text == "A" and split.reasoning == "from the field\n\none two three"
    assert split.reasoning_tokens == words(reply.text) - words("A")
    assert thinking_apart(split, words) == split, "idempotent: a stored reply read again is split once"
    counted = GenerateResponse("<think>x</think>A", "stop", reasoning_tokens=7)
    assert thinking_apart(counted, words).reasoning_tokens == 7, "the server's own count wins"
    assert thinking_apart(GenerateResponse("A", "stop"), words) == GenerateResponse("A", "stop")


def test_cut_in_thinking_needs_a_length_stop_with_thinking_and_no_answer():
    assert GenerateResponse("", "length", reasoning="partial").cut_in_thinking
    assert GenerateResponse("", "length", reasoning_tokens=64).cut_in_thinking  # hidden reasoning (OpenAI)
    assert not GenerateResponse("答", "length", reasoning="done").cut_in_thinking  # cut in the answer
    assert not GenerateResponse("", "stop", reasoning="done").cut_in_thinking
    assert not GenerateResponse("", "length").cut_in_thinking  # no thinking at all


# --- serialisation: new fields change no old key or row ------------------------------------------------

def test_new_fields_are_left_out_at_their_defaults_so_old_keys_and_rows_stay():
    assert set(to_jsonable(GenerateParams())) == {"max_tokens", "temperature", "top_p", "stop", "seed",
                                                  "frequency_penalty", "presence_penalty", "top_logprobs"}
    assert to_jsonable(GenerateParams(thinking_tokens=512))["thinking_tokens"] == 512
    assert set(to_jsonable(GenerateResponse("A", "stop"))) == {
        "text", "finish_reason", "prompt_tokens", "completion_tokens", "prompt_text", "logprobs", "retries"}


def test_a_response_with_thinking_and_adaptations_reads_back_equal():
    response = GenerateResponse("A", "stop", 3, 9, reasoning="because", reasoning_tokens=6, adaptations=(
        Adaptation("temperature", 0.0, None, "server: Unsupported value", learned=True),))
    data = to_jsonable(response)
    assert data["adaptations"] == [{"parameter": "temperature", "asked": 0.0, "sent": None,
                                    "reason": "server: Unsupported value", "learned": True}]
    assert response_from_json("generate", data) == response
    assert response.adaptations[0].greedy_lost
    assert not Adaptation("temperature", 0.7, None, "x").greedy_lost, "a sampled request was not greedy anyway"


def test_the_thinking_limit_is_the_answer_plus_the_budget_the_spec_beats_the_task():
    assert thinking_limit(GenerateParams(max_tokens=16), None)[0] == 16 + DEFAULT_THINKING_TOKENS
    assert thinking_limit(GenerateParams(max_tokens=16, thinking_tokens=300), None)[0] == 316
    limit, record = thinking_limit(GenerateParams(max_tokens=16, thinking_tokens=300), 100,
                                   limit_name="max_completion_tokens")
    assert limit == 116 and record.sent == "max_completion_tokens=116" and "spec thinking_budget" in record.reason


# --- through the model handle ------------------------------------------------------------------------

def ask(model: CachedModel, max_tokens: int = 64) -> GenerateResponse:
    return asyncio.run(model.generate(GenerateRequest(messages(("user", "Which is a liability?")),
                                                      GenerateParams(max_tokens=max_tokens))))


def test_the_handle_hands_the_task_the_answer_and_keeps_the_thinking_in_the_trace(tmp_path: Path):
    store = RunStore(tmp_path / "store.sqlite")
    spec = "fake?reply=<think>debt is owed</think>答案：B"
    try:
        counters, trace = RunCounters(), []
        model = CachedModel(from_spec(spec), store, counters).bind(trace)
        reply = ask(model)
        assert reply.text == "答案：B" and reply.reasoning == "debt is owed"
        (row,) = store.iter_calls()
        assert row["response"]["text"].startswith("<think>"), "the store keeps the backend's reply as it came"
        entry = trace[0]
        assert entry["response"] == "答案：B" and entry["reasoning"] == "debt is owed"
        assert counters.thinking_replies == 1 and counters.reasoning_tokens == entry["reasoning_tokens"] > 0
        again, again_trace = RunCounters(), []
        cached = ask(CachedModel(from_spec(spec), store, again).bind(again_trace))
        assert again.cache_hits == 1 and cached == reply and again_trace[0]["reasoning"] == "debt is owed"
    finally:
        store.close()


def test_a_reply_cut_while_thinking_is_a_length_stop_with_its_own_count(tmp_path: Path):
    store = RunStore(tmp_path / "store.sqlite")
    try:
        counters, trace = RunCounters(), []
        model = CachedModel(from_spec("fake?reply=<think>" + "step " * 200), store, counters).bind(trace)
        reply = ask(model, max_tokens=20)  # the fake cuts the reply at 20 tokens, inside the thinking
        assert reply.text == "" and reply.cut_in_thinking
        assert (counters.length_stops, counters.thinking_truncations) == (1, 1)
        assert trace[0]["cut_in_thinking"] is True
    finally:
        store.close()


def test_a_reply_without_thinking_has_the_trace_entry_it_always_had(tmp_path: Path):
    store = RunStore(tmp_path / "store.sqlite")
    try:
        trace: list[dict] = []
        ask(CachedModel(from_spec("fake?reply=答案：A"), store, RunCounters()).bind(trace))
        assert not {"reasoning", "reasoning_tokens", "cut_in_thinking", "adaptations"} & set(trace[0])
        assert sample_thinking(trace) == ({}, {})
    finally:
        store.close()


# --- what results.json says ----------------------------------------------------------------------------

def test_adaptations_are_counted_per_distinct_change_and_said_in_the_notes():
    temperature = to_jsonable(Adaptation("temperature", 0.0, None, "server: Unsupported value", learned=True))
    limit = to_jsonable(Adaptation("max_tokens", 16, "max_completion_tokens=2064", "plus a thinking budget"))
    traces = [[{"role": "model", "adaptations": [limit, temperature]}], [{"role": "model", "adaptations": [limit]}],
              [{"role": "judge", "adaptations": [temperature]}, {"role": "model"}]]
    rows = adaptations_of(traces)
    assert [(r["role"], r["parameter"], r["calls"]) for r in rows] == [
        ("model", "max_tokens", 2), ("model", "temperature", 1), ("judge", "temperature", 1)]
    assert rows[1]["greedy_lost"] and "greedy_lost" not in rows[0]
    notes = adaptation_notes(rows, thinking_replies=3, reasoning_tokens=0, thinking_truncations=2)
    assert notes[0] == ("model: max_tokens 16 sent as max_completion_tokens=2064 on 2 call(s): plus a thinking "
                        "budget")
    assert "left out on 1 call(s) (learned from the server's refusal)" in notes[1] and "not greedy" in notes[1]
    assert "nobody counted apart" in notes[3] and "2 generation(s) were cut" in notes[4]
    assert adaptation_notes([], thinking_replies=3, reasoning_tokens=90) == []


def test_the_answers_own_tokens_are_kept_so_a_label_can_still_be_read_softly():
    tokens = tuple(TokenLogprob(t, -0.1) for t in ("<think>", "weigh", " it", "</think>", "\n\n", "[[", "2", "]]\n"))
    reply = GenerateResponse("".join(t.token for t in tokens), "stop", logprobs=tokens)
    split = thinking_apart(reply)
    assert split.text == "[[2]]\n" and split.logprobs == tokens[5:]
    assert "".join(t.token for t in split.logprobs) == split.text, "judges/soft.py needs the tokens to spell it"
    glued = tokens[:4] + (TokenLogprob("\n\n[[", -0.1),) + tokens[6:]  # the answer starts inside a token
    assert thinking_apart(replace(reply, logprobs=glued)).logprobs is None
