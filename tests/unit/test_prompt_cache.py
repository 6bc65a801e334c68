"""Prompt caching (backends/prompt_cache.py): where the Anthropic backend marks a request, what the providers' usage
reports become, and the dry run's estimate of what caching and batches save."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends import from_spec
from finharness.backends.anthropic import parse_message
from finharness.backends.openai_compat import parse_chat_reply
from finharness.backends.prompt_cache import Block, PrefixCache, breakpoints, min_cache_tokens
from finharness.cli import app
from finharness.core.spending import Price, price_for, with_provider_rates
from finharness.core.types import GenerateParams, GenerateRequest, Message

LONG = "The analyst reads the filing closely and answers in one letter. " * 120  # ~2,000 estimated tokens


def marks(body: dict) -> list[str]:
    found = ["system"] if isinstance(body.get("system"), list) and "cache_control" in body["system"][-1] else []
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list) and "cache_control" in m["content"][-1]:
            found.append(f"message {i}")
    return found


def anthropic_body(messages: list[Message], spec: str = "anthropic:claude-sonnet-4@http://127.0.0.1:9/v1") -> dict:
    return from_spec(spec).payload(GenerateRequest(tuple(messages), GenerateParams(max_tokens=8)))


def test_a_long_system_prompt_is_marked_a_short_one_is_not():
    assert marks(anthropic_body([Message("system", LONG), Message("user", "Q1")])) == ["system"]
    assert marks(anthropic_body([Message("system", "Be brief."), Message("user", "Q1")])) == []
    assert marks(anthropic_body([Message("system", LONG), Message("user", "Q1")],
                                "anthropic:claude-sonnet-4@http://127.0.0.1:9/v1?cache=0")) == []


def test_a_dialogue_marks_its_history_and_its_last_turn_within_four_marks():
    turns = [Message("system", LONG), Message("user", "first " * 50), Message("assistant", "reply " * 50),
             Message("user", "second question")]
    assert marks(anthropic_body(turns)) == ["system", "message 1", "message 2"]
    assert breakpoints(5000, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}] * 4,
                       1024).messages == (6, 7)
    assert min_cache_tokens("claude-haiku-4-5-20251001") == 4096 and min_cache_tokens("claude-sonnet-4") == 1024


def test_usage_keeps_cache_reads_and_writes_apart():
    anthropic = parse_message({"content": [{"type": "text", "text": "A"}], "stop_reason": "end_turn", "usage": {
        "input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 300}},
        "test")
    assert (anthropic.prompt_tokens, anthropic.cached_tokens, anthropic.cache_write_tokens) == (2310, 2000, 300)
    request = GenerateRequest((Message("user", "q"),))
    openai = parse_chat_reply({"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}], "usage": {
        "prompt_tokens": 1500, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 1280}}},
        "test", request)
    assert (openai.prompt_tokens, openai.cached_tokens, openai.cache_write_tokens) == (1500, 1280, 0)
    llamacpp = parse_chat_reply({"choices": [{"message": {"content": "A"}, "finish_reason": "stop"}],
                                 "usage": {"prompt_tokens": 50}, "timings": {"cache_n": 40}}, "test", request)
    assert llamacpp.cached_tokens == 40


def test_the_prefix_cache_replays_each_providers_rule():
    system, question = Block("sys", 1500), Block("q1", 20)
    automatic = PrefixCache("automatic", 1024)
    assert automatic.see([system, question]) == (0, 0)  # the first request writes, reads nothing
    assert automatic.see([system, Block("q2", 20)]) == (1408, 0)  # 1,500 shared, in steps of 128
    marked = PrefixCache("breakpoints", 1024)
    assert marked.see([Block("sys", 1500, marked=True), question]) == (0, 1500)
    assert marked.see([Block("sys", 1500, marked=True), Block("q2", 20)]) == (1500, 0)
    assert PrefixCache("breakpoints", 1024).see([Block("sys", 500, marked=True), question]) == (0, 0)  # too short


def test_rates_a_price_leaves_out_are_the_providers():
    gpt = with_provider_rates(Price(2.5, 10), "openai:gpt-4o")
    assert (gpt.cached, gpt.cache_write, gpt.batch) == (1.25, None, 0.5)
    claude = price_for({"claude-sonnet-4": Price(3, 15)}, "anthropic:claude-sonnet-4@http://h/v1")
    assert (claude.cached, claude.cache_write, claude.batch) == (pytest.approx(0.3), 3.75, 0.5)
    given = with_provider_rates(Price(2.5, 10, cached=0.25, batch=1.0), "openai:gpt-5")
    assert (given.cached, given.batch) == (0.25, 1.0)
    assert with_provider_rates(Price(1, 1), "fake").batch is None
    assert claude.cost(1_000_000, 0, cached_tokens=500_000, cache_write_tokens=100_000, batch=True) == \
        pytest.approx((400_000 * 3 + 500_000 * 0.3 + 100_000 * 3.75) / 1e6 * 0.5)


def test_the_dry_run_prices_live_cached_and_batch(tmp_path: Path):
    spec = "openai:gpt-4o@http://127.0.0.1:9/v1"
    result = CliRunner().invoke(app, ["run", "demo", "--model", spec, "--system", LONG, "--dry-run", "--json",
                                      "--price", "gpt-4o=2.5/10", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    (tally,) = plan["tasks"][0]["roles"]
    assert tally["calls"] == 12 and tally["cached_tokens_estimate"] > 0.8 * tally["prompt_tokens"] * 11 / 12
    assert tally["cost_live"] > tally["cost_live_cached"] > tally["cost_batch_cached"]
    assert tally["cost_batch_cached"] == tally["cost_live_cached"] / 2
    assert tally["cost_expected"] == tally["cost_live"] and not tally["batch"]
    batched = CliRunner().invoke(app, ["run", "demo", "--model", spec, "--system", LONG, "--dry-run", "--json",
                                       "--price", "gpt-4o=2.5/10", "--batch", "--out", str(tmp_path)])
    (tally,) = json.loads(batched.stdout)["tasks"][0]["roles"]
    assert tally["batch"] and tally["cost_expected"] == tally["cost_live"] / 2  # the run's mode: batch price
    text = CliRunner().invoke(app, ["run", "demo", "--model", spec, "--system", LONG, "--dry-run", "--price",
                                    "gpt-4o=2.5/10", "--out", str(tmp_path)])
    words = " ".join(text.output.split())
    assert "caching (estimate)" in words and "of the live list price" in words
