"""The dry run's planned path (core/plan.py, suite/plan.py): what it calls, counts and prices without a model call.

A fake backend is planned on its own replies, so the plan is its run exactly; a backend without a free reply of its
own (a hosted model, here a fake that hides its reply and its tokenizer) is planned on stand-ins that take the
longest path: every UCFE round, estimated prompt tokens, max_tokens as the completion. Stored calls are free and
give the expected completion; a prompt too long fails its item in the plan as in a run; the CLI writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.registry import resolve_task
from finharness.core.model import estimate_tokens
from finharness.core.plan import DryRun, plan_task
from finharness.core.runner import RunOptions, run_task
from finharness.core.spending import Price
from finharness.core.store import RunStore
from finharness.stats.power import difference_sd_from_one, plan_comparison
from finharness.suite.plan import Plan, PlannedCell, detectable, plan_json


class HostedLike(FakeBackend):
    """A fake with no free reply and no tokenizer of its own, as a hosted API looks to the plan."""

    planned_reply = None

    def count_tokens(self, text: str) -> int | None:
        return None


def plan(task_name: str, backends, store=None, options: RunOptions = RunOptions(), **task_options):
    task = resolve_task(task_name).make(task_options)
    return asyncio.run(plan_task(task, backends, store, options, DryRun()))


def run(task_name: str, backends, store, options: RunOptions = RunOptions(), **task_options):
    task = resolve_task(task_name).make(task_options)
    return asyncio.run(run_task(task, backends, store, options))


def asked(planned, role: str) -> int:
    """Calls a role's handle was asked for (planned once, or asked again after)."""
    tally = planned.roles[("fake", role)]
    return tally.calls + tally.repeats


def test_a_fake_is_planned_on_its_own_replies_exactly_as_it_runs(tmp_path: Path):
    fake = {"model": FakeBackend()}
    planned = plan("demo", fake, options=RunOptions(limit=5))
    tally = planned.roles[("fake", "model")]
    with RunStore(tmp_path / "store.sqlite") as store:
        result = run("demo", {"model": FakeBackend()}, store, RunOptions(limit=5))
    counts = result.results["counts"]
    assert planned.run_key == result.results["run_key"]
    assert (tally.calls, tally.prompt_tokens, tally.completion_expected) == (
        counts["calls"], counts["prompt_tokens"], counts["completion_tokens"]) == (5, tally.prompt_tokens, 5)
    assert planned.exact and tally.to_json()["exact"] and tally.completion_ceiling == 5 * 64
    assert {sid: p for sid, p in planned.predictions.items()} == {r.id: r.prediction for r in result.records}


def test_draws_are_planned_as_the_run_makes_them(tmp_path: Path):
    options = RunOptions(limit=3, draws=3)
    planned = plan("demo", {"model": FakeBackend()}, options=options)
    with RunStore(tmp_path / "store.sqlite") as store:
        result = run("demo", {"model": FakeBackend()}, store, options)
        again = plan("demo", {"model": FakeBackend()}, store, options)
    assert planned.run_key == result.results["run_key"] and planned.draws == 3
    assert planned.roles[("fake", "model")].calls == result.results["counts"]["calls"] == 9
    assert again.stored_items == 9 and again.roles[("fake", "model")].calls == 0


def test_without_a_free_reply_every_ucfe_round_is_planned_with_estimated_tokens(shared_data: Path):
    opts = {"tasks": "Financial_Knowledge_Consulting", "max_rounds": 3, "max_tokens": 40, "user_max_tokens": 30}
    options = RunOptions(data_dir=shared_data, limit=2)
    ended = FakeBackend(reply="Consultation Ended")  # a user who ends every dialogue after its first round
    exact = plan("ucfe", {"model": FakeBackend(), "user": ended}, options=options, **opts)
    assert asked(exact, "user") == 2 * 2 and asked(exact, "model") == 2
    hosted = plan("ucfe", {"model": HostedLike(), "user": HostedLike()}, options=options, **opts)
    # the opening, then a model and a user turn a round; each stand-in is its call's own, so the two dialogues do
    # not repeat each other's calls although both items give the model the same prompt
    model, user = hosted.roles[("fake", "model")], hosted.roles[("fake", "user")]
    assert (model.calls, user.calls, model.repeats, user.repeats) == (2 * 3, 2 * (1 + 3), 0, 0)
    assert model.prompt_counted == user.prompt_counted == "estimate" and not hosted.exact
    assert (model.completion_expected, model.completion_ceiling) == (model.calls * 40, model.calls * 40)
    assert (user.completion_expected, user.completion_ceiling) == (user.calls * 30, user.calls * 30)
    rounds = [p["rounds"] for p in hosted.predictions.values()]
    assert rounds == [3, 3]
    # later turns carry the earlier max_tokens-long stand-ins: each model prompt is longer than the one before
    first_item = hosted.samples[0].id
    assert hosted.predictions[first_item]["tokens"]["model"]["prompt"] > 3 * 40


def test_stored_calls_are_free_and_their_mean_is_the_expected_completion(tmp_path: Path):
    with RunStore(tmp_path / "store.sqlite") as store:
        earlier = run("demo", {"model": FakeBackend()}, store, RunOptions(limit=2))
        stored_completion = earlier.results["counts"]["completion_tokens"]
        planned = plan("demo", {"model": HostedLike()}, store, RunOptions(limit=4))
    tally = planned.roles[("fake", "model")]
    # a HostedLike is the same model to the store (same identity): the two calls made are found, two are left
    assert planned.stored_items == 0 and tally.stored_calls == 2 and tally.calls == 2
    assert tally.stored_mean == stored_completion / 2
    assert tally.completion_expected == math.ceil(stored_completion / 2 * 2) < tally.completion_ceiling
    assert "stored mean" in tally.completion_source


def test_an_earlier_run_of_the_task_with_other_options_gives_the_stored_mean(tmp_path: Path):
    with RunStore(tmp_path / "store.sqlite") as store:
        earlier = run("demo", {"model": FakeBackend()}, store, RunOptions(limit=4), max_tokens=48)
        planned = plan("demo", {"model": HostedLike()}, store, RunOptions(limit=6))  # other requests: none stored
        other_model = plan("demo", {"model": HostedLike(name="other")}, store, RunOptions(limit=6))
    tally = planned.roles[("fake", "model")]
    assert tally.calls == 6 and tally.stored_calls == 0
    assert tally.stored_mean == earlier.results["counts"]["completion_tokens"] / 4
    assert other_model.roles[("fake", "model")].stored_mean is None  # another model's runs say nothing of this one


def test_a_rerun_plans_nothing_and_the_stored_scores_give_the_spread(tmp_path: Path):
    with RunStore(tmp_path / "store.sqlite") as store:
        run("demo", {"model": FakeBackend()}, store)
        planned = plan("demo", {"model": FakeBackend()}, store)
    tally = planned.roles[("fake", "model")]
    assert planned.stored_items == planned.items == 12 and tally.calls == 0 and tally.stored_calls == 12
    assert len(planned.stored_scores) == 12 and 0 < sum(planned.stored_scores) < 12
    power = detectable(planned, "demo")
    assert power.source.startswith("stored: 12 scores")
    assert power.detectable == pytest.approx(plan_comparison(difference_sd_from_one(planned.stored_scores),
                                                             n=12).detectable)


def test_a_prompt_too_long_fails_its_item_in_the_plan_as_in_a_run(tmp_path: Path):
    tiny = FakeBackend(context_length=80)
    planned = plan("demo", {"model": tiny}, options=RunOptions(limit=3))
    with RunStore(tmp_path / "store.sqlite") as store:
        result = run("demo", {"model": FakeBackend(context_length=80)}, store, RunOptions(limit=3))
    assert len(planned.failed) == result.results["counts"]["failed_samples"] == 3
    assert "prompt-too-long" in next(iter(planned.failed.values()))
    assert planned.roles[("fake", "model")].calls == 0 and planned.roles[("fake", "model")].failing == 3


def test_costs_and_the_defaults_of_the_detectable_difference():
    planned = plan("demo", {"model": HostedLike(name="gpt")})
    the_plan = Plan("demo", [PlannedCell("demo", "fake", "demo", planned, power=detectable(planned, "demo"))],
                    prices={"fake": Price(2.5, 10.0)})
    tally = planned.roles[("fake", "model")]
    assert the_plan.cost(tally) == pytest.approx(((tally.prompt_tokens * 2.5 + tally.completion_expected * 10) / 1e6,
                                                 (tally.prompt_tokens * 2.5 + tally.completion_ceiling * 10) / 1e6))
    shown = plan_json(the_plan)
    (row,) = shown["tasks"]
    assert row["detectable"]["source"].startswith("default: 0/1 scores at p = 0.5")
    assert row["detectable"]["sd"] == pytest.approx(0.5)  # sqrt(2 * 0.25 * (1 - 0.5))
    assert shown["totals"][-1]["role"] == "total" and shown["totals"][-1]["calls"] == 12


def test_the_estimate_rule_counts_cjk_characters_one_by_one():
    assert estimate_tokens("abcd" * 10) == 10 and estimate_tokens("abcde") == 2
    assert estimate_tokens("会计准则") == 4 and estimate_tokens("会计 ab") == 3 and estimate_tokens("") == 0


def test_the_run_command_plans_without_writing_anything(tmp_path: Path):
    from finharness.cli import app

    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "demo", "--model", "fake", "--limit", "4", "--out", str(out),
                                      "--dry-run", "--json", "--price", "fake=3/15"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    (row,) = shown["tasks"]
    (tally,) = row["roles"]
    assert row["items"] == 4 and tally["calls"] == 4 and shown["store"] is None
    assert tally["cost_expected"] == pytest.approx((tally["prompt_tokens"] * 3 + tally["completion_expected"] * 15)
                                                   / 1e6)
    assert not out.exists()
    table = CliRunner().invoke(app, ["run", "demo", "--model", "fake", "--out", str(out), "--dry-run"])
    assert table.exit_code == 0 and "no model was called" in table.output and "smallest difference" in table.output
