"""End to end: `finharness run` of the demo and a CFinBench exam on local stubs of reasoning-model providers
(tests/servers/provider_stubs.py): what each run sent, and what its results.json and samples.jsonl say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.cli import app
from finharness.core.types import DEFAULT_THINKING_TOKENS
from tests.servers.provider_stubs import provider_server

from ..benchmarks.test_cfinbench_task import write_exam

DEMO_ITEMS = 12
DEMO_MAX_TOKENS = 64


def run(*args: str) -> tuple[dict, list[dict], str]:
    out = Path(args[args.index("--out") + 1])
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    return json.loads((out / "results.json").read_text(encoding="utf-8")), lines, result.output


def test_demo_on_a_hosted_reasoning_model_learns_its_form_and_says_the_run_is_not_greedy(tmp_path: Path):
    with provider_server("openai-reasoning") as server:
        results, lines, output = run("demo", "--model", f"openai:o-stub@{server.base_url}", "--concurrency", "1",
                                     "--out", str(tmp_path / "run"))
        first_bodies = list(server.bodies)
        again, _, _ = run("demo", "--model", f"openai:o-stub@{server.base_url}", "--out", str(tmp_path / "run"))
    assert results["status"] == "complete" and results["counts"]["scored"] == DEMO_ITEMS
    assert len(server.refusals) == 2 and len(first_bodies) == DEMO_ITEMS + 2, "two refusals, then learned"
    assert all("max_tokens" not in b and "temperature" not in b for b in first_bodies[2:])
    limit, temperature = results["adaptations"]
    assert limit == {"role": "model", "parameter": "max_tokens", "asked": DEMO_MAX_TOKENS,
                     "sent": f"max_completion_tokens={DEMO_MAX_TOKENS + DEFAULT_THINKING_TOKENS}",
                     "reason": limit["reason"], "learned": True, "calls": DEMO_ITEMS}
    assert temperature["parameter"] == "temperature" and temperature["sent"] is None
    assert temperature["greedy_lost"] and temperature["calls"] == DEMO_ITEMS
    assert any("not greedy" in note for note in results["notes"])
    assert results["counts"]["reasoning_tokens"] == 40 * DEMO_ITEMS and results["counts"]["thinking_replies"] == 12
    assert "reasoning tokens 480 of" in " ".join(output.split()), "the run summary shows them"
    assert all(line["tokens"]["reasoning"] == 40 and line["response"].startswith("答案：") for line in lines)
    # a rerun answers from the store: no call is made, and results.json still says what was sent
    assert again["counts"]["calls"] == 0 and again["adaptations"] == results["adaptations"]


@pytest.mark.parametrize("behaviour, spec_tail", [("reasoning-field", ""), ("inline-think", "")])
def test_demo_keeps_the_thinking_beside_the_answer_and_never_scores_it(tmp_path: Path, behaviour, spec_tail):
    with provider_server(behaviour, think=8) as server:
        results, lines, _ = run("demo", "--model", f"openai:q@{server.base_url}{spec_tail}",
                                "--out", str(tmp_path / "run"))
    assert results["status"] == "complete" and results["counts"]["unparseable"] == 0
    assert results["counts"]["thinking_replies"] == DEMO_ITEMS and "adaptations" not in results
    for line in lines:
        assert line["response"] == line["trace"][0]["response"] and line["response"].startswith("答案：")
        assert "think-" not in line["response"] and len(line["reasoning"].split()) == 8
        assert line["extraction"]["parsed"]


def test_a_model_that_thinks_past_the_answers_budget_is_cut_while_thinking_and_counted(tmp_path: Path):
    with provider_server("reasoning-field", think=100) as server:  # 100 thinking tokens > demo's 64
        cut, _, output = run("demo", "--model", f"openai:q@{server.base_url}", "--out", str(tmp_path / "cut"))
        budgeted, _, _ = run("demo", "--model", f"openai:q@{server.base_url}?thinking_budget=200",
                             "--out", str(tmp_path / "budgeted"))
    assert cut["counts"]["thinking_truncations"] == DEMO_ITEMS == cut["counts"]["truncated_samples"]
    assert cut["counts"]["unparseable"] == DEMO_ITEMS
    assert any("cut by the token limit while still thinking" in note for note in cut["notes"])
    assert "cut while thinking 12" in " ".join(output.split()), "the run summary (wrapped at the terminal's width)"
    assert budgeted["counts"]["thinking_truncations"] == 0 and budgeted["counts"]["unparseable"] == 0
    assert budgeted["adaptations"][0]["sent"] == f"max_tokens={DEMO_MAX_TOKENS + 200}"
    assert budgeted["config"]["models"]["model"]["request_form"] == {"thinking_budget": 200}, "in the run key"


def test_a_cfinbench_exam_completes_on_each_provider(tmp_path: Path):
    data_root = write_exam(tmp_path / "data")  # the exam in DATA_ROOT/cfinbench/
    specs = {"openai-reasoning": "openai:o-stub@{url}", "reasoning-field": "openai:q@{url}?thinking_budget=64",
             "inline-think": "openai:q@{url}?thinking_budget=64",
             "anthropic-thinking": "anthropic:claude-stub@{url}?thinking_budget=1024"}
    for behaviour, spec in specs.items():
        with provider_server(behaviour, think=10) as server:
            results, lines, _ = run("cfinbench", "--model", spec.format(url=server.base_url), "--data-dir", str(data_root),
                                    "--shots", "0", "--method", "gen", "--out", str(tmp_path / behaviour))
        assert results["status"] == "complete", behaviour
        assert results["counts"]["scored"] == len(lines) > 0 and results["counts"]["failed_samples"] == 0
        assert results["counts"]["thinking_replies"] == len(lines)
        assert all(not line["response"].startswith(("<think>", "think-")) for line in lines), behaviour
        if behaviour in ("openai-reasoning", "anthropic-thinking"):
            assert results["counts"]["reasoning_tokens"] == 10 * len(lines)
            assert any(a["parameter"] == "temperature" and a["greedy_lost"] for a in results["adaptations"])
        else:
            assert all("think-" in line["reasoning"] for line in lines)
