"""Draws and generation controls (issue 24 item 6, issue 27 item 4).

`--draws K` answers each item K times, draw k adding k to every generation's sample_index, so each draw has its own
cache key and its own seed (GenerateRequest.backend_seed); metrics then carry the item-clustered interval and the
share of variance from the model's sampling, with majority vote and pass@K. K = 1 is exactly a run without draws.
`--temperature/--max-tokens/--system` change the requests of the model under test and the run key.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.demo.task import DemoTask
from finharness.core.model import GenerationOverrides
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import GenerateParams, GenerateRequest, Message


def run(tmp_path: Path, backend, store_name: str = "s.sqlite", **options):
    store = RunStore(tmp_path / store_name)
    try:
        return asyncio.run(run_task(DemoTask(), {"model": backend}, store, RunOptions(**options)))
    finally:
        store.close()


def test_one_draw_is_exactly_a_run_without_draws(tmp_path: Path):
    plain = run(tmp_path, FakeBackend(), "a.sqlite")
    one = run(tmp_path, FakeBackend(), "b.sqlite", draws=1)
    assert one.results["run_key"] == plain.results["run_key"] and "draws" not in one.results
    assert one.results["metrics"] == plain.results["metrics"] and "draws" not in one.results["config"]


def test_draws_are_separate_calls_cached_per_draw_and_summarised(tmp_path: Path):
    fake = FakeBackend()
    first = run(tmp_path, fake, draws=3, generation=GenerationOverrides(temperature=0.7, seed=5))
    assert first.results["status"] == "complete" and first.results["counts"]["calls"] == 36
    indices = sorted({r.sample_index for r in fake.requests})
    assert indices == [0, 1, 2] and {r.params.temperature for r in fake.requests} == {0.7}
    draws = first.results["draws"]
    assert draws["k"] == 3 and draws["metrics"]["accuracy"]["n"] == 12
    # the clustered value is the mean of each item's mean over its draws, computed here from the records' scores
    per_item = {}
    for request in fake.requests:
        per_item.setdefault(request.messages[-1].content, []).append(request.sample_index)
    assert all(sorted(v) == [0, 1, 2] for v in per_item.values())
    clustered = first.results["metrics"]["accuracy"]["clustered"]
    assert clustered["draws"] == 3 and clustered["value"] == draws["metrics"]["accuracy"]["value"]
    # 12 items are few for the clustered interval as for any: said in both places, as for a single draw
    assert "n = 12 < 30" in draws["metrics"]["accuracy"]["warning"] and clustered["warning"] == \
        draws["metrics"]["accuracy"]["warning"]
    assert 0.0 <= draws["metrics"]["accuracy"]["variance"]["sampling_share"] <= 1.0
    assert set(draws) >= {"majority", "pass_at_k"} and draws["pass_at_k"]["k"] == 3
    assert draws["pass_at_k"]["value"] >= draws["metrics"]["accuracy"]["value"]  # at least one of 3 >= the mean
    again = run(tmp_path, FakeBackend(), draws=3, generation=GenerationOverrides(temperature=0.7, seed=5))
    assert again.results["counts"]["calls"] == 0 and again.results["draws"] == draws  # every draw is stored


def test_a_failed_draw_leaves_the_run_incomplete(tmp_path: Path):
    from finharness.core.backend import BackendError

    class FailsOnceOnDrawTwo(FakeBackend):
        failed = False

        async def generate(self, request):
            if request.sample_index == 2 and not self.failed:
                self.failed = True
                raise BackendError("injected on a later draw")
            return await super().generate(request)

    result = run(tmp_path, FailsOnceOnDrawTwo(), draws=3)
    assert result.results["status"] == "incomplete" and result.results["counts"]["failures"] == 1
    assert result.results["draws"]["metrics"]["accuracy"]["n"] == 12  # the item still counts with its other draws
    rerun = run(tmp_path, FakeBackend(), draws=3)
    assert rerun.results["status"] == "complete" and rerun.results["counts"]["calls"] == 1


def test_another_draw_is_another_seed_and_the_same_draw_repeats():
    params = GenerateParams(temperature=0.7, seed=123)
    first, second = (GenerateRequest((Message("user", "q"),), params, k).backend_seed for k in (0, 1))
    assert first == 123 and second != 123  # draw 0 keeps the task's seed: earlier runs are unchanged
    assert GenerateRequest((Message("user", "q"),), params, 1).backend_seed == second
    assert GenerateRequest((Message("user", "q"),), GenerateParams(), 0).backend_seed is None


def test_generation_controls_change_the_requests_and_the_run_key(tmp_path: Path):
    fake = FakeBackend()
    plain = run(tmp_path, FakeBackend(), "a.sqlite")
    changed = run(tmp_path, fake, "b.sqlite", generation=GenerationOverrides(
        temperature=0.3, max_tokens=7, system="Be brief.", seed=9, thinking_tokens=300))
    assert changed.results["run_key"] != plain.results["run_key"]
    assert changed.results["config"]["generation"] == {"temperature": 0.3, "max_tokens": 7, "system": "Be brief.",
                                                       "seed": 9, "thinking_tokens": 300}
    sent = fake.requests[0]
    assert sent.params.temperature == 0.3 and sent.params.max_tokens == 7 and sent.params.seed == 9
    assert sent.params.thinking_tokens == 300
    assert sent.messages[0] == Message("system", "Be brief.")


def test_the_command_line_takes_the_controls_and_draws(tmp_path: Path):
    from finharness.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", "demo", "--model", "fake", "--temperature", "0.7", "--draws", "2",
                                      "--max-tokens", "16", "--thinking-budget", "64", "--out", str(out), "-q"])
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["config"]["draws"] == 2 and results["config"]["generation"]["max_tokens"] == 16
    assert results["config"]["generation"]["thinking_tokens"] == 64
    assert "over 2 draws per item" in result.output and "pass@2" in result.output
    assert "items 12 ! (" in result.output and "! accuracy over draws: n = 12 < 30" in result.output


@pytest.mark.model
def test_two_draws_differ_on_the_embedded_model_and_a_draw_repeats(tmp_path: Path):
    """The seed each draw sends reaches the engine: draw 0 and draw 1 of one sampled prompt differ, and draw 1
    asked again without the store (a fresh engine call) gives the same text."""
    from finharness import open_model
    from finharness.backends import from_spec

    backend = from_spec("embedded")
    request = GenerateRequest((Message("user", "Name three things a balance sheet shows."),),
                              GenerateParams(max_tokens=24, temperature=1.0, seed=123))

    def ask(store: str, draw: int) -> str:
        handle = open_model(backend, tmp_path / store).bind([], draw)
        return asyncio.run(handle.generate(request)).text

    zero, one = ask("a.sqlite", 0), ask("a.sqlite", 1)
    assert zero != one
    assert ask("b.sqlite", 1) == one  # another store: computed again, the same sample
