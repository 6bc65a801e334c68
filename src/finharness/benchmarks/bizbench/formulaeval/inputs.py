"""Seeded random inputs for every FormulaEval formula.

Each generator takes a `random.Random` and returns one case: (fields, args) -- `fields` builds the
statement object for a method (None for a standalone function), `args` are the positional arguments.
Ranges keep every reference well defined (no zero denominators, equity and pre-tax income positive,
one IRR) and realistic (amounts over several orders of magnitude, rates as decimals).
"""

from __future__ import annotations

import random
from typing import Any, Callable

Case = tuple[dict[str, float] | None, list[Any]]
Generator = Callable[[random.Random], Case]


def _money(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 2)


def _rate(rng: random.Random, low: float, high: float) -> float:
    return round(rng.uniform(low, high), 6)


def _scale(rng: random.Random) -> float:
    """A company size between 10^4 and 10^9 currency units (log-uniform)."""
    return 10 ** rng.uniform(4, 9)


# --- standalone ---------------------------------------------------------------------------------------

def _irr_flows(rng: random.Random) -> list[float]:
    """An investment now and positive flows after, scaled so that the IRR is a chosen rate."""
    target = rng.uniform(-0.2, 0.5)
    weights = [rng.uniform(0.1, 1.0) for _ in range(rng.randint(2, 10))]
    present = sum(w / (1 + target) ** (t + 1) for t, w in enumerate(weights))
    investment = _money(rng, 1e3, 1e6)
    return [-investment] + [round(w * investment / present, 2) for w in weights]


def _gordon(rng: random.Random) -> Case:
    growth = _rate(rng, -0.02, 0.06)
    return None, [_money(rng, 0.1, 10), round(growth + rng.uniform(0.01, 0.1), 6), growth]


def _cagr(rng: random.Random) -> Case:
    beginning = _money(rng, 100, 1e9)
    return None, [beginning, round(beginning * rng.uniform(0.2, 5), 2), round(rng.uniform(1, 30), 2)]


STANDALONE: dict[str, Generator] = {
    "simple_interest": lambda r: (None, [_money(r, 100, 1e6), _rate(r, 0.001, 0.15), round(r.uniform(0.25, 30), 2)]),
    "compound_interest": lambda r: (None, [_money(r, 100, 1e6), _rate(r, 0.001, 0.15), round(r.uniform(0.5, 40), 2),
                                           r.choice([1, 2, 4, 12, 52, 365])]),
    "continuous_compounding_value": lambda r: (None, [_money(r, 100, 1e6), _rate(r, -0.05, 0.15),
                                                      round(r.uniform(0.1, 30), 2)]),
    "present_value": lambda r: (None, [_money(r, 100, 1e7), _rate(r, 0.001, 0.2), r.randint(1, 50)]),
    "net_present_value": lambda r: (None, [_rate(r, 0.0, 0.25), [-_money(r, 1e3, 1e6)]
                                           + [_money(r, -1e4, 5e5) for _ in range(r.randint(1, 15))]]),
    "internal_rate_of_return": lambda r: (None, [_irr_flows(r)]),
    "compound_annual_growth_rate": _cagr,
    "loan_payment": lambda r: (None, [_money(r, 1e3, 1e6), _rate(r, 0.005, 0.15), r.randint(1, 30),
                                      r.choice([1, 4, 12, 26])]),
    "present_value_of_annuity": lambda r: (None, [_money(r, 10, 1e5), _rate(r, 0.001, 0.2), r.randint(1, 60),
                                                  r.random() < 0.5]),
    "future_value_of_annuity": lambda r: (None, [_money(r, 10, 1e5), _rate(r, 0.001, 0.2), r.randint(1, 60)]),
    "weighted_average_cost_of_capital": lambda r: (None, [_money(r, 1e6, 1e10), _money(r, 0, 1e10),
                                                          _rate(r, 0.05, 0.2), _rate(r, 0.01, 0.1), _rate(r, 0, 0.4)]),
    "capm_expected_return": lambda r: (None, [_rate(r, 0, 0.06), round(r.uniform(-0.5, 2.5), 4), _rate(r, 0.02, 0.15)]),
    "gordon_growth_value": _gordon,
    "effective_annual_rate": lambda r: (None, [_rate(r, 0.001, 0.3), r.choice([1, 2, 4, 12, 52, 365])]),
    "bond_price": lambda r: (None, [r.choice([100, 1000]), _rate(r, 0, 0.12), _rate(r, 0.001, 0.15), r.randint(1, 30),
                                    r.choice([1, 2, 4])]),
}


# --- statements ---------------------------------------------------------------------------------------

def balance_sheet(rng: random.Random) -> dict[str, float]:
    s = _scale(rng)
    assets = {"cash": _money(rng, 0.02 * s, 0.2 * s), "short_term_investments": _money(rng, 0, 0.1 * s),
              "accounts_receivable": _money(rng, 0.05 * s, 0.2 * s), "inventory": _money(rng, 0, 0.2 * s),
              "prepaid_expenses": _money(rng, 0, 0.05 * s), "property_plant_equipment": _money(rng, 0.1 * s, 0.5 * s),
              "goodwill": _money(rng, 0, 0.2 * s), "intangible_assets": _money(rng, 0, 0.1 * s)}
    total = sum(assets.values())  # liabilities stay below 61% of assets: equity is positive
    liabilities = {"accounts_payable": _money(rng, 0.02 * total, 0.1 * total),
                   "accrued_liabilities": _money(rng, 0.01 * total, 0.08 * total),
                   "short_term_debt": _money(rng, 0.01 * total, 0.08 * total),
                   "long_term_debt": _money(rng, 0, 0.3 * total),
                   "deferred_tax_liabilities": _money(rng, 0, 0.05 * total)}
    return {**assets, **liabilities, "shares_outstanding": float(rng.randint(10 ** 6, 10 ** 9))}


def income_statement(rng: random.Random) -> dict[str, float]:
    revenue = _money(rng, 1e4, 1e10)
    fields = {"revenue": revenue, "cost_of_goods_sold": _money(rng, 0.2 * revenue, 0.6 * revenue),
              "selling_general_and_administrative": _money(rng, 0.05 * revenue, 0.15 * revenue),
              "research_and_development": _money(rng, 0, 0.1 * revenue),
              "depreciation_and_amortization": _money(rng, 0.01 * revenue, 0.05 * revenue),
              "interest_expense": _money(rng, 0.001 * revenue, 0.03 * revenue),
              "interest_income": _money(rng, 0, 0.01 * revenue),
              "other_income": _money(rng, -0.01 * revenue, 0.01 * revenue)}
    pretax = (revenue - fields["cost_of_goods_sold"] - fields["selling_general_and_administrative"]
              - fields["research_and_development"] - fields["depreciation_and_amortization"]
              - fields["interest_expense"] + fields["interest_income"] + fields["other_income"])
    fields["income_tax_expense"] = round(pretax * rng.uniform(0.1, 0.3), 2)  # pre-tax income >= 6% of revenue
    fields["preferred_dividends"] = _money(rng, 0, 0.01 * revenue) if rng.random() < 0.5 else 0.0
    fields["weighted_average_shares"] = float(rng.randint(10 ** 6, 10 ** 9))
    return fields


def cash_flow_statement(rng: random.Random) -> dict[str, float]:
    s = _scale(rng)
    return {"net_income": _money(rng, 0.05 * s, 0.2 * s), "depreciation_and_amortization": _money(rng, 0.01 * s, 0.1 * s),
            "stock_based_compensation": _money(rng, 0, 0.03 * s), "deferred_taxes": _money(rng, -0.01 * s, 0.02 * s),
            "increase_in_receivables": _money(rng, -0.03 * s, 0.05 * s),
            "increase_in_inventory": _money(rng, -0.03 * s, 0.05 * s),
            "increase_in_payables": _money(rng, -0.03 * s, 0.05 * s),
            "capital_expenditures": _money(rng, 0.01 * s, 0.15 * s),
            "acquisitions": _money(rng, 0, 0.1 * s) if rng.random() < 0.5 else 0.0,
            "proceeds_from_asset_sales": _money(rng, 0, 0.02 * s), "debt_issued": _money(rng, 0, 0.1 * s),
            "debt_repaid": _money(rng, 0, 0.1 * s), "dividends_paid": _money(rng, 0, 0.05 * s),
            "share_repurchases": _money(rng, 0, 0.08 * s), "beginning_cash": _money(rng, 0.05 * s, 0.3 * s)}


STATEMENT_FIELDS: dict[str, Callable[[random.Random], dict[str, float]]] = {
    "BalanceSheet": balance_sheet, "IncomeStatement": income_statement, "CashFlowStatement": cash_flow_statement}

METHOD_ARGS: dict[str, Callable[[random.Random, dict[str, float]], list[Any]]] = {
    "CashFlowStatement.free_cash_flow_margin": lambda r, f: [_money(r, 2 * f["net_income"], 10 * f["net_income"])],
}
"""Arguments of the methods that take any (by 'Class.method')."""
