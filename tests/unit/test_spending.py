"""The budget's account (core/spending.py): calls in flight hold their worst case, and what the stop says."""

from __future__ import annotations

import pytest
import typer

from finharness.cli import BUDGET_EXIT, stop_if_budget_reached
from finharness.core.spending import Price, Spending


def test_a_refusal_while_calls_are_in_flight_names_what_they_hold_and_the_stop_says_what_was_spent(capsys):
    spending = Spending(max_tokens=600)
    admitted = [spending.admit("m", 45, 124) for _ in range(3)]  # 3 × 169 = 507 held, none answered yet
    assert admitted == [None, None, None]
    refusal = spending.admit("m", 45, 124)
    assert refusal == ("budget reached: the token budget of 600 (spent 0 and 507 held for calls in flight when the "
                       "next call could take up to 169 more)")
    assert spending.admit("m", 1, 1) is not None and spending.refused == 2, "once refused, every later call is"
    for _ in range(3):  # the three in flight return with what they really used
        spending.charge("m", 45, 20, reserved=(45, 124))
    with pytest.raises(typer.Exit) as stop:
        stop_if_budget_reached(spending)
    assert stop.value.exit_code == BUDGET_EXIT
    said = " ".join(capsys.readouterr().err.split())
    assert "budget reached after 3 call(s) (2 refused)" in said and "spent in all 195 tokens;" in said


def test_a_cost_budget_says_its_money():
    spending = Spending(prices={"m": Price(2.5, 10.0)}, max_cost=0.001)
    assert spending.admit("m", 100, 50) is None  # $0.00075
    refusal = spending.admit("m", 100, 50)
    assert "the cost budget of $0.0010 (spent $0.0000 and $0.0008 held for calls in flight" in refusal
