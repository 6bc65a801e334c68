"""The budget's account (core/spending.py): calls in flight hold their worst case, a reply that reports more than
its call asked for is charged at once and held on top of later calls, and what the stop says."""

from __future__ import annotations

import random

import pytest
import typer

from finharness.commands.spending import BUDGET_EXIT, stop_if_budget_reached
from finharness.core.spending import BudgetRefused, Price, Spending


def test_a_refusal_while_calls_are_in_flight_names_what_they_hold_and_the_stop_says_what_was_spent(capsys):
    spending = Spending(max_tokens=600)
    admitted = [spending.admit("m", 45, 124) for _ in range(3)]  # 3 × 169 = 507 held, none answered yet
    assert [held.tokens for held in admitted] == [169, 169, 169]
    with pytest.raises(BudgetRefused) as refusal:
        spending.admit("m", 45, 124)
    assert str(refusal.value) == ("budget reached: the token budget of 600 (spent 0 and 507 held for calls in flight "
                                  "when the next call could take up to 169 more)")
    with pytest.raises(BudgetRefused):
        spending.admit("m", 1, 1)
    assert spending.refused == 2, "once refused, every later call is"
    for held in admitted:  # the three in flight return with what they really used
        spending.charge("m", 45, 20, reserved=held)
    with pytest.raises(typer.Exit) as stop:
        stop_if_budget_reached(spending)
    assert stop.value.exit_code == BUDGET_EXIT
    said = " ".join(capsys.readouterr().err.split())
    assert "budget reached after 3 call(s) (2 refused)" in said and "spent in all 195 tokens;" in said
    assert "reported more" not in said, "no reply reported more than asked"


def test_a_cost_budget_says_its_money():
    spending = Spending(prices={"m": Price(2.5, 10.0)}, max_cost=0.001)
    assert spending.admit("m", 100, 50).cost == pytest.approx(0.00075)
    with pytest.raises(BudgetRefused, match=r"the cost budget of \$0.0010 \(spent \$0.0000 and \$0.0008 held for "
                                            r"calls in flight"):
        spending.admit("m", 100, 50)


def test_a_reply_past_its_reservation_is_charged_at_once_held_on_later_calls_and_stops_the_run_past_the_budget():
    spending = Spending(max_tokens=1000)
    first, second = spending.admit("m", 40, 8), spending.admit("m", 40, 8)  # 48 each: the server ignores max_tokens
    spending.charge("m", 40, 60, reserved=first)  # 52 more than asked for
    assert spending.tokens == 100 and spending.reached is None, "charged whole, and still inside the budget"
    third = spending.admit("m", 40, 8)
    assert (third.margin_completion, third.tokens) == (52, 100), "a later call holds what the server really takes"
    topped = spending.top_up(second)  # admitted before the over-report was known: topped up before it is sent
    assert topped.tokens == 100 and spending.top_up(topped) is topped
    for held in (topped, third):
        spending.charge("m", 40, 60, reserved=held)
    assert spending.tokens == 300 and spending.reached is None
    others = [spending.admit("m", 40, 8) for _ in range(7)]  # 300 + 7 × 100 = 1000: fits exactly
    with pytest.raises(BudgetRefused):
        spending.admit("m", 40, 8)
    for held in others:
        spending.charge("m", 40, 70, reserved=held)  # 10 more than the margin, each: 3 × 52 + 7 × 62 beyond the ask
    assert spending.tokens == 1070
    reason = spending.reached
    assert reason.startswith("the token budget of 1,000 (spent 300 and 700 held for calls in flight")
    assert "replies of calls already in flight took the spent tokens to 1,070, 70 past it" in reason
    assert ("m reported more than its calls asked for: 10 call(s), up to 70 completion tokens where a call asked "
            "for at most 8 (62 more); 590 token(s) in all beyond what they asked for") in reason


def test_a_call_admitted_before_an_over_report_is_refused_when_its_top_up_does_not_fit():
    spending = Spending(max_tokens=200)
    waiting = [spending.admit("m", 40, 8) for _ in range(4)]  # 192 held
    spending.charge("m", 40, 60, reserved=waiting[0])  # 100 spent, 144 held: the next top-up of 52 cannot fit
    with pytest.raises(BudgetRefused, match="a call admitted before a reply reported more than asked could take up "
                                            "to 52 more"):
        spending.top_up(waiting[1])
    for held in waiting[1:]:  # refused calls are released by the caller, never charged
        spending.release(held)
    assert (spending.tokens, spending.refused, spending.calls) == (100, 1, 1)
    assert "m reported more than its calls asked for: 1 call(s), up to 60 completion tokens" in spending.reached


def test_a_reply_that_crosses_the_budget_stops_the_run_even_when_no_call_was_refused(capsys):
    spending = Spending(max_tokens=90)
    spending.charge("m", 40, 60, reserved=spending.admit("m", 40, 8))
    assert spending.refused == 0
    with pytest.raises(typer.Exit) as stop:
        stop_if_budget_reached(spending)
    assert stop.value.exit_code == BUDGET_EXIT
    said = " ".join(capsys.readouterr().err.split())
    assert "the token budget of 90; replies of calls already in flight took the spent tokens to 100, 10 past it" in said
    assert "up to 60 completion tokens where a call asked for at most 8 (52 more)" in said


def test_a_prompt_counted_short_is_held_on_later_calls_too_and_the_cost_budget_holds_the_same_way():
    spending = Spending(prices={"m": Price(1000.0, 1000.0)}, max_cost=0.5)  # $0.001 a token: 500 tokens
    spending.charge("m", 70, 8, reserved=spending.admit("m", 50, 8))  # the prompt estimate was 20 short
    held = spending.admit("m", 50, 8)
    assert (held.margin_prompt, held.margin_completion) == (20, 0) and held.cost == pytest.approx(0.078)
    spending.charge("m", 70, 8, reserved=held)
    assert "up to 70 prompt tokens where 50 were counted (20 more)" in spending.over_reports["m"].describe("m")
    with pytest.raises(BudgetRefused, match=r"the cost budget of \$0.5000"):
        for _ in range(10):
            spending.admit("m", 50, 8)


def test_the_crossing_is_bounded_by_the_excess_of_the_calls_in_flight_at_the_last_admission():
    """Calls admitted, topped up and answered in a random order by a server whose replies report ever more beyond
    what they asked for: the spend never passes the budget by more than what the calls answered after the last
    admission (or top-up) took beyond what they held; and it does pass it (the bound is what holds it)."""
    crossed = 0
    for seed in range(60):
        rng = random.Random(seed)
        spending = Spending(max_tokens=rng.randint(300, 3000))
        waiting, sent = [], []
        excess_since = 0
        """Tokens charged beyond their holds since the last call was admitted or topped up."""

        def answer(held, excess: int) -> None:
            nonlocal excess_since
            charged = held.prompt_tokens + held.completion_tokens + excess
            spending.charge("m", held.prompt_tokens, held.completion_tokens + excess, reserved=held)
            excess_since += max(0, charged - held.tokens)

        for step in range(rng.randint(20, 150)):
            draw = rng.random()
            try:
                if draw < 0.4:
                    waiting.append(spending.admit("m", rng.randint(10, 60), rng.randint(1, 16)))
                    excess_since = 0
                elif draw < 0.7 and waiting:
                    held = waiting.pop(rng.randrange(len(waiting)))
                    try:
                        sent.append(spending.top_up(held))
                        excess_since = 0
                    except BudgetRefused:
                        spending.release(held)
                        raise
                elif sent:
                    answer(sent.pop(rng.randrange(len(sent))), rng.choice([0, rng.randint(0, 10 + 2 * step)]))
            except BudgetRefused:
                pass
        for held in waiting:
            spending.release(held)
        for held in sent:  # the calls still in flight come back, each reporting more than any reply before
            answer(held, 400)
        assert spending.tokens <= spending.max_tokens + excess_since, seed
        crossed += spending.tokens > spending.max_tokens
    assert crossed >= 5, crossed
