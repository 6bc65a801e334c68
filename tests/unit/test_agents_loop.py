"""The bounded agent loop (agents/loop.py) on the scripted fake behind the real model handle, and its tools
(agents/tools.py): answers, every limit, failed and unreadable calls, and a resumed episode that makes no model
call twice."""

from __future__ import annotations

import asyncio
import json

import pytest

from finharness.agents import AgentLimits, FunctionTool, ToolError, run_episode
from finharness.agents.tools import Library, calculator, document_tools, evaluate
from finharness.backends.fake import FakeBackend
from finharness.core.store import RunStore
from finharness.core.types import GenerateParams, Message, ToolSpec
from finharness.retrieval.passages import Document, build_passage_index
from tests.fakes import fake_models

QUESTION = (Message("system", "Use the tools."), Message("user", "What is 1577 minus 1373, divided by 1373?"))


def call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def echo_tool(name: str = "echo") -> FunctionTool:
    def run(arguments: dict) -> str:
        if arguments.get("fail"):
            raise ToolError("asked to fail")
        return f"echo {arguments.get('text', '')}"

    return FunctionTool(ToolSpec(name, "Echo the text.", {"type": "object", "properties": {"text": {"type": "string"}}}),
                        run)


def episode(tmp_path, replies, tools, limits=AgentLimits(), store=None, name="agent"):
    fake = FakeBackend(replies=replies, name=name)
    models = fake_models(store or tmp_path, model=fake)
    return asyncio.run(run_episode(models.model, QUESTION, tools, limits, GenerateParams(max_tokens=64))), fake


def test_a_tool_call_then_an_answer(tmp_path):
    result, fake = episode(tmp_path, [call("calculator", expression="(1577 - 1373) / 1373"), "About 14.86%."],
                           [calculator()])
    assert result.stop == "answer" and result.answer == "About 14.86%." and not result.gave_up
    assert [len(s.tools) for s in result.steps] == [1, 0]
    assert result.steps[0].tools[0].result == repr((1577 - 1373) / 1373)
    second = fake.requests[1]
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[3].tool_call_id == second.messages[2].tool_calls[0].id
    assert {t.name for t in second.tools} == {"calculator"}  # the schemas go with every step
    summary = result.summary()
    assert summary["steps"] == 2 and summary["tool_calls"] == 1 and summary["calls_by_tool"] == {"calculator": 1}


def test_parallel_calls_each_get_a_result_in_order(tmp_path):
    both = {"tool_calls": [{"name": "echo", "arguments": {"text": "a"}}, {"name": "echo", "arguments": {"text": "b"}}]}
    result, fake = episode(tmp_path, [both, "done"], [echo_tool()])
    tool_turns = [m for m in fake.requests[1].messages if m.role == "tool"]
    assert [m.content for m in tool_turns] == ["echo a", "echo b"]
    assert result.answer == "done"


def test_failed_calls_are_shown_to_the_model_and_end_the_episode_past_the_limit(tmp_path):
    replies = [call("echo", fail=True), call("nope"), {"tool_calls": [{"name": "echo", "arguments": "{not json"}]},
               "never reached"]
    result, fake = episode(tmp_path, replies, [echo_tool()], AgentLimits(max_tool_errors=2))
    assert result.stop == "tool_errors" and result.gave_up and result.answer is None
    results = [s.tools[0].result for s in result.steps]
    assert results[0] == "error: asked to fail"
    assert results[1].startswith("error: there is no tool 'nope'")
    assert "not JSON" in results[2]
    assert len(fake.requests) == 3


def test_an_unreadable_call_is_counted_and_answered_with_why(tmp_path):
    replies = [{"text": "<tool_call>{bad", "tool_call_error": "tool call 1: invalid JSON"}, "42"]
    result, fake = episode(tmp_path, replies, [echo_tool()])
    assert result.summary()["parse_failures"] == 1 and result.answer == "42"
    assert "could not be read: tool call 1: invalid JSON" in fake.requests[1].messages[-1].content


@pytest.mark.parametrize("limits, stop", [(AgentLimits(max_steps=3), "steps"),
                                          (AgentLimits(max_tokens=30), "tokens")])
def test_limits_stop_an_episode_that_never_answers(tmp_path, limits, stop):
    result, fake = episode(tmp_path, [call("echo", text=str(i)) for i in range(10)], [echo_tool()], limits)
    assert result.stop == stop and result.gave_up
    assert len(fake.requests) == len(result.steps) <= 3


def test_a_prompt_that_no_longer_fits_ends_the_episode(tmp_path):
    fake = FakeBackend(replies=[call("echo", text="x" * 600)] * 5, name="small", context_length=400)
    models = fake_models(tmp_path, model=fake)
    result = asyncio.run(run_episode(models.model, QUESTION, [echo_tool()], AgentLimits(), GenerateParams(max_tokens=64)))
    assert result.stop == "context" and result.gave_up and len(result.steps) >= 1


def arithmetic_agent(last: str):
    """A deterministic agent: what it does depends only on the last message (as a greedy model's reply would)."""
    if last.startswith("What is"):
        return call("calculator", expression="2+2")
    if last == "4":
        return call("calculator", expression="4*10")
    return f"The answer is {last}."


def test_a_resumed_episode_makes_no_model_call_twice(tmp_path):
    store = RunStore(tmp_path / "store.sqlite")
    log = tmp_path / "calls.log"

    def run(limits):
        models = fake_models(store, model=FakeBackend(reply=arithmetic_agent, name="agent", log=log))
        return asyncio.run(run_episode(models.model, QUESTION, [calculator()], limits, GenerateParams(max_tokens=64)))

    cut = run(AgentLimits(max_steps=2))  # stopped after two steps, as a kill would stop it
    assert cut.stop == "steps" and len(log.read_text().splitlines()) == 2
    done = run(AgentLimits(max_steps=12))  # the same episode resumed: its first two steps come from the store
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert done.answer == "The answer is 40." and len(done.steps) == 3
    assert len(calls) == 3 and len({c["key"] for c in calls}) == 3


def test_calculator_refuses_what_is_not_arithmetic():
    assert evaluate("1,577 - 1,373") == 204
    assert evaluate("round(204 / 1373 * 100, 2)") == 14.86
    for bad in ("__import__('os')", "2 ** 1000", "1 / 0", "open('x')"):
        with pytest.raises(ToolError):
            evaluate(bad)


def test_document_tools_search_list_and_read(tmp_path):
    pages = {"ACME_2022_10K": ["Cover page", "Capital expenditures were $1,577 million in 2022.", "Risk factors"],
             "OTHER_2021_10K": ["Revenue grew 4%.", "Nothing else"]}
    documents = [Document(name, name, tuple(p)) for name, p in pages.items()]
    index = build_passage_index(documents, cache=tmp_path)
    tools = {t.spec.name: t for t in document_tools(Library(sorted(pages), pages.__getitem__, lambda: index))}

    def use(name, **arguments):
        return asyncio.run(tools[name](arguments))

    assert use("list_documents", company="acme") == "ACME_2022_10K"
    hits = use("search", query="capital expenditures", k=1)
    assert hits.startswith("[ACME_2022_10K page 1]")
    assert "Revenue" in use("search", query="revenue", document="OTHER_2021_10K")
    assert use("read_page", document="ACME_2022_10K", page=2).endswith("Risk factors")
    with pytest.raises(ToolError, match="pages 0 to 2"):
        use("read_page", document="ACME_2022_10K", page=9)
    with pytest.raises(ToolError, match="no document"):
        use("read_page", document="NOPE", page=0)


def test_sec_tools_are_point_in_time_and_read_xbrl_facts(shared_data):
    import datetime as dt

    from finharness.agents.sec import sec_tools

    def tools_at(day):
        return {t.spec.name: t for t in sec_tools(shared_data, day)}

    def use(tools, name, **arguments):
        return asyncio.run(tools[name](arguments))

    early = tools_at(dt.date(2024, 10, 1))
    late = tools_at(dt.date(2025, 1, 15))
    assert "filed 2024-11-01" not in use(early, "list_filings", ticker="AAPL")  # Apple's FY2024 10-K: not yet filed
    assert "10-K filed 2024-11-01" in use(late, "list_filings", ticker="aapl")
    facts = use(late, "xbrl_fact", ticker="AAPL", concept="NetIncomeLoss", period_end="2024-09-28")
    assert facts.startswith("us-gaap:NetIncomeLoss = 93,736,000,000 iso4217:USD")
    with pytest.raises(ToolError, match="no filing filed on '2024-11-01'"):
        use(early, "read_section", ticker="AAPL", filed="2024-11-01", section="Item 7")
    assert "Management" in use(late, "read_section", ticker="AAPL", filed="2024-11-01", section="item 7")
    with pytest.raises(ToolError, match="the tickers are AAPL"):
        use(late, "xbrl_fact", ticker="ZZZ", concept="Revenues")


def test_lenient_reading_runs_untagged_calls_and_still_counts_them(tmp_path):
    untagged = {"text": '{"name": "calculator", "arguments": {"expression": "6*7"}}',
                "tool_call_error": "tool call 1: written without <tool_call> tags"}
    strict, _ = episode(tmp_path, [untagged, "stopped"], [calculator()], name="strict")
    assert strict.steps[0].tools == [] and strict.summary()["parse_failures"] == 1
    lenient_fake = FakeBackend(replies=[untagged, "42"], name="lenient")
    models = fake_models(tmp_path / "lenient", model=lenient_fake)
    result = asyncio.run(run_episode(models.model, QUESTION, [calculator()], AgentLimits(),
                                     GenerateParams(max_tokens=64), lenient=True))
    assert [t.result for t in result.steps[0].tools] == ["42"] and result.answer == "42"
    assert result.summary()["parse_failures"] == 1 and result.summary()["read_untagged"] == 1
    sent = lenient_fake.requests[1].messages
    assert sent[2].tool_calls[0].name == "calculator" and sent[3].role == "tool"


def test_a_dry_run_plans_an_episode_at_its_step_limit(tmp_path):
    from finharness.core.model import RunCounters
    from finharness.core.plan import DryRun, PlannedModel, TaskPlan

    class Hosted(FakeBackend):  # no planned reply of its own, as an API model
        planned_reply = None

    plan = TaskPlan("agent", "", [])
    handle = PlannedModel(Hosted(name="hosted"), None, RunCounters(), plan=plan, dry=DryRun())
    result = asyncio.run(run_episode(handle.bind([]), QUESTION, [calculator()], AgentLimits(max_steps=5),
                                     GenerateParams(max_tokens=32)))
    assert result.stop == "steps" and plan.tally(handle.spec, "model").calls == 5


def test_the_agent_task_example_runs_end_to_end_on_a_scripted_fake(shared_data, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    rules = [{"match": "NetIncomeLoss", "reply": "93,736,000,000"}, {"match": "Revenues", "reply": "60922000000"},
             {"match": "Apple", "tool_calls": [{"name": "xbrl_fact", "arguments": {
                 "ticker": "AAPL", "concept": "NetIncomeLoss", "period_end": "2024-09-28"}}]},
             {"match": "NVIDIA", "tool_calls": [{"name": "xbrl_fact", "arguments": {
                 "ticker": "NVDA", "concept": "Revenues", "period_end": "2024-01-28"}}]}]
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(r) + "\n" for r in rules), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "finharness", "run",
                           f"{repo / 'docs' / 'examples' / 'agent_task.py'}:FilingFacts", "--model",
                           f"fake?script={script}", "--data-dir", str(shared_data), "--out", str(tmp_path / "run"),
                           "-q"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["metrics"]["accuracy"]["value"] == 1.0 and results["counts"]["tool_calls"] == 2
