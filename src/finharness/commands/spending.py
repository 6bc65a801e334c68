"""The budget options every command that makes model calls shares (`run`, `suite`, `contamination`): --price,
--max-cost and --budget-tokens declared once, the Spending they make (api.make_spending), and the budget stop's
message and exit status."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from ..cli_common import fail

if TYPE_CHECKING:
    from ..core.spending import Spending

PRICE_OPTION = typer.Option([], "--price", help="MODEL=IN/OUT: USD per million input and output tokens of a model (its "
                            "spec or name; repeatable; a suite's [prices] too): results carry the cost.")
MAX_COST_OPTION = typer.Option(None, "--max-cost", min=0, help="Stop before the call that would take the cost (at the "
                               "prices) past USD; everything made is kept: rerun with more to resume.")
BUDGET_TOKENS_OPTION = typer.Option(None, "--budget-tokens", min=1, help="Stop before the call that would take the "
                                    "tokens of every role (and model) past N; rerun with more to resume.")

BUDGET_EXIT = 3
"""Exit status of a run the budget stopped (1: incomplete, 2: a usage error, 130: interrupted)."""


def make_spending(prices: list[str], max_cost: float | None, budget_tokens: int | None) -> "Spending | None":
    """The command's Spending (core/spending.py) from --price, --max-cost and --budget-tokens; None when none is
    given (nothing is priced or limited). A bad price or a cost budget without prices is a usage error. (A suite's
    [prices] join its --price in suite.evaluate.prepare_suite.)"""
    from ..api import make_spending as api_spending  # on use: the command line starts without the run machinery

    try:
        return api_spending(prices, max_cost, budget_tokens)
    except ValueError as err:
        fail(str(err))


def stop_if_budget_reached(spending: Any) -> None:
    """Say that the budget stopped the command and exit BUDGET_EXIT (everything made is stored)."""
    if spending is None or spending.reached is None:
        return
    spent = f"{spending.tokens:,} tokens" + (f", ${spending.cost:.4f}" if spending.cost else "")
    typer.secho(f"budget reached after {spending.calls} call(s) ({spending.refused} refused): {spending.reached}; "
                f"spent in all {spent}; everything made is stored: raise it and rerun the same command to resume",
                fg="yellow", err=True)
    raise typer.Exit(BUDGET_EXIT)
