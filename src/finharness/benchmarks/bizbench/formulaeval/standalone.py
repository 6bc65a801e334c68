"""FormulaEval's standalone formulas: reference implementations.

The source of each function is the reference: its signature and docstring are the stub shown to the
model (formulas.py cuts the body off), and the whole source, fed back as a completion, must pass its
own check. Every program runs with `math` imported, so a reference may use it without importing it.
Keep each function self-contained (no helpers): a completion replaces exactly one function.
"""

from __future__ import annotations

import math


def simple_interest(principal: float, annual_rate: float, years: float) -> float:
    """Interest earned (not the final balance) on `principal` at simple interest.

    `annual_rate` is a decimal (0.05 for 5%); interest accrues only on the principal.
    """
    return principal * annual_rate * years


def compound_interest(principal: float, annual_rate: float, years: float, periods_per_year: int) -> float:
    """Interest earned (final balance minus principal) when `principal` compounds `periods_per_year`
    times a year at the nominal `annual_rate` (a decimal) for `years` years.
    """
    balance = principal * (1 + annual_rate / periods_per_year) ** (periods_per_year * years)
    return balance - principal


def continuous_compounding_value(principal: float, annual_rate: float, years: float) -> float:
    """Final balance of `principal` compounded continuously at `annual_rate` (a decimal) for `years` years."""
    return principal * math.exp(annual_rate * years)


def present_value(future_value: float, rate: float, periods: int) -> float:
    """Present value of `future_value` received after `periods` periods, discounted at `rate` per period
    (a decimal), compounding once per period.
    """
    return future_value / (1 + rate) ** periods


def net_present_value(rate: float, cash_flows: list[float]) -> float:
    """Net present value of `cash_flows` at the discount `rate` per period (a decimal).

    `cash_flows[0]` occurs now (not discounted), `cash_flows[t]` at the end of period t.
    """
    return sum(cash_flow / (1 + rate) ** t for t, cash_flow in enumerate(cash_flows))


def internal_rate_of_return(cash_flows: list[float]) -> float:
    """The internal rate of return per period (a decimal): the rate at which the net present value of
    `cash_flows` is zero. `cash_flows[0]` (negative, the investment) occurs now and the later, positive
    cash flows at the end of each period, so there is exactly one such rate above -100%.
    Accurate to at least 1e-7.
    """
    def npv(rate: float) -> float:
        return sum(cash_flow / (1 + rate) ** t for t, cash_flow in enumerate(cash_flows))

    low, high = -0.99, 1.0
    while npv(high) > 0:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if npv(middle) > 0:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def compound_annual_growth_rate(beginning_value: float, ending_value: float, years: float) -> float:
    """Compound annual growth rate (a decimal, 0.07 for 7%) from `beginning_value` to `ending_value` over
    `years` years.
    """
    return (ending_value / beginning_value) ** (1 / years) - 1


def loan_payment(principal: float, annual_rate: float, years: int, payments_per_year: int) -> float:
    """The level payment that repays a fully amortising loan of `principal` with `payments_per_year`
    payments a year for `years` years, at the nominal `annual_rate` (a decimal, compounded at each
    payment; the rate is positive). Payments are made at the end of each period.
    """
    rate = annual_rate / payments_per_year
    count = years * payments_per_year
    return principal * rate / (1 - (1 + rate) ** -count)


def present_value_of_annuity(payment: float, rate: float, periods: int, due: bool = False) -> float:
    """Present value of `periods` equal payments of `payment`, discounted at `rate` per period (a decimal,
    positive). Payments come at the end of each period (an ordinary annuity), or at the start of each
    period when `due` is True (an annuity due).
    """
    value = payment * (1 - (1 + rate) ** -periods) / rate
    return value * (1 + rate) if due else value


def future_value_of_annuity(payment: float, rate: float, periods: int) -> float:
    """Future value, at the end of the last period, of `periods` equal payments of `payment` made at the
    end of each period and earning `rate` per period (a decimal, positive).
    """
    return payment * ((1 + rate) ** periods - 1) / rate


def weighted_average_cost_of_capital(equity_value: float, debt_value: float, cost_of_equity: float,
                                     cost_of_debt: float, tax_rate: float) -> float:
    """Weighted average cost of capital (a decimal). Weights are the market values of equity and debt;
    the pre-tax `cost_of_debt` is reduced by the `tax_rate` (all rates decimals).
    """
    total = equity_value + debt_value
    return equity_value / total * cost_of_equity + debt_value / total * cost_of_debt * (1 - tax_rate)


def capm_expected_return(risk_free_rate: float, beta: float, market_return: float) -> float:
    """Expected return of an asset under the capital asset pricing model (rates as decimals)."""
    return risk_free_rate + beta * (market_return - risk_free_rate)


def gordon_growth_value(last_dividend: float, required_return: float, growth_rate: float) -> float:
    """Value today of a share whose dividend, `last_dividend` just paid, grows forever at `growth_rate`,
    discounted at `required_return` (decimals; required_return > growth_rate). The next dividend is one
    year away.
    """
    return last_dividend * (1 + growth_rate) / (required_return - growth_rate)


def effective_annual_rate(nominal_rate: float, periods_per_year: int) -> float:
    """Effective annual rate (a decimal) of a nominal annual rate compounded `periods_per_year` times a year."""
    return (1 + nominal_rate / periods_per_year) ** periods_per_year - 1


def bond_price(face_value: float, coupon_rate: float, yield_rate: float, years: int, payments_per_year: int) -> float:
    """Price of a plain bond: coupons of `face_value * coupon_rate / payments_per_year` paid
    `payments_per_year` times a year for `years` years, plus `face_value` with the last coupon, all
    discounted at `yield_rate / payments_per_year` per period (annual rates as decimals).
    """
    rate = yield_rate / payments_per_year
    count = years * payments_per_year
    coupon = face_value * coupon_rate / payments_per_year
    return sum(coupon / (1 + rate) ** t for t in range(1, count + 1)) + face_value / (1 + rate) ** count
