"""FormulaEval's financial-statement classes: fields (shown to the model) and reference methods.

A method prompt shows the class with its fields and one method stub; the program that runs holds the
class with its fields only, plus the completed method, so every reference method reads fields (and its
own arguments) and never calls another method. Amounts are in currency units; ratios are decimals.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BalanceSheet:
    """A balance sheet at one date."""

    cash: float
    """Cash and cash equivalents."""
    short_term_investments: float
    """Marketable securities held for less than a year."""
    accounts_receivable: float
    """Amounts owed by customers."""
    inventory: float
    """Inventories."""
    prepaid_expenses: float
    """Prepaid expenses and other current assets."""
    property_plant_equipment: float
    """Property, plant and equipment, net of depreciation."""
    goodwill: float
    """Goodwill."""
    intangible_assets: float
    """Intangible assets other than goodwill."""
    accounts_payable: float
    """Amounts owed to suppliers."""
    accrued_liabilities: float
    """Accrued expenses and other current liabilities."""
    short_term_debt: float
    """Debt due within a year (including the current part of long-term debt)."""
    long_term_debt: float
    """Debt due after more than a year."""
    deferred_tax_liabilities: float
    """Deferred tax liabilities (non-current)."""
    shares_outstanding: float
    """Common shares outstanding."""

    def current_assets(self) -> float:
        """Total current assets: cash, short-term investments, receivables, inventory and prepaid expenses."""
        return (self.cash + self.short_term_investments + self.accounts_receivable + self.inventory
                + self.prepaid_expenses)

    def total_assets(self) -> float:
        """Total assets: current assets plus property, plant and equipment, goodwill and intangible assets."""
        return (self.cash + self.short_term_investments + self.accounts_receivable + self.inventory
                + self.prepaid_expenses + self.property_plant_equipment + self.goodwill + self.intangible_assets)

    def current_liabilities(self) -> float:
        """Total current liabilities: accounts payable, accrued liabilities and short-term debt."""
        return self.accounts_payable + self.accrued_liabilities + self.short_term_debt

    def total_liabilities(self) -> float:
        """Total liabilities: current liabilities plus long-term debt and deferred tax liabilities."""
        return (self.accounts_payable + self.accrued_liabilities + self.short_term_debt + self.long_term_debt
                + self.deferred_tax_liabilities)

    def shareholders_equity(self) -> float:
        """Shareholders' equity: total assets minus total liabilities."""
        assets = (self.cash + self.short_term_investments + self.accounts_receivable + self.inventory
                  + self.prepaid_expenses + self.property_plant_equipment + self.goodwill + self.intangible_assets)
        liabilities = (self.accounts_payable + self.accrued_liabilities + self.short_term_debt
                       + self.long_term_debt + self.deferred_tax_liabilities)
        return assets - liabilities

    def working_capital(self) -> float:
        """Working capital: current assets minus current liabilities."""
        current_assets = (self.cash + self.short_term_investments + self.accounts_receivable + self.inventory
                          + self.prepaid_expenses)
        return current_assets - (self.accounts_payable + self.accrued_liabilities + self.short_term_debt)

    def current_ratio(self) -> float:
        """Current ratio: current assets divided by current liabilities."""
        current_assets = (self.cash + self.short_term_investments + self.accounts_receivable + self.inventory
                          + self.prepaid_expenses)
        return current_assets / (self.accounts_payable + self.accrued_liabilities + self.short_term_debt)

    def quick_ratio(self) -> float:
        """Quick (acid-test) ratio: cash, short-term investments and receivables divided by current liabilities."""
        quick = self.cash + self.short_term_investments + self.accounts_receivable
        return quick / (self.accounts_payable + self.accrued_liabilities + self.short_term_debt)

    def cash_ratio(self) -> float:
        """Cash ratio: cash and short-term investments divided by current liabilities."""
        return (self.cash + self.short_term_investments) / (
            self.accounts_payable + self.accrued_liabilities + self.short_term_debt)

    def debt_to_equity(self) -> float:
        """Debt-to-equity ratio: short-term plus long-term debt divided by shareholders' equity."""
        assets = (self.cash + self.short_term_investments + self.accounts_receivable + self.inventory
                  + self.prepaid_expenses + self.property_plant_equipment + self.goodwill + self.intangible_assets)
        liabilities = (self.accounts_payable + self.accrued_liabilities + self.short_term_debt
                       + self.long_term_debt + self.deferred_tax_liabilities)
        return (self.short_term_debt + self.long_term_debt) / (assets - liabilities)

    def net_debt(self) -> float:
        """Net debt: short-term plus long-term debt minus cash and short-term investments."""
        return self.short_term_debt + self.long_term_debt - self.cash - self.short_term_investments

    def tangible_book_value_per_share(self) -> float:
        """Tangible book value per share: shareholders' equity less goodwill and intangible assets, per share."""
        assets = (self.cash + self.short_term_investments + self.accounts_receivable + self.inventory
                  + self.prepaid_expenses + self.property_plant_equipment + self.goodwill + self.intangible_assets)
        liabilities = (self.accounts_payable + self.accrued_liabilities + self.short_term_debt
                       + self.long_term_debt + self.deferred_tax_liabilities)
        tangible = assets - liabilities - self.goodwill - self.intangible_assets
        return tangible / self.shares_outstanding


@dataclass
class IncomeStatement:
    """An income statement for one period."""

    revenue: float
    """Total revenue (net sales)."""
    cost_of_goods_sold: float
    """Cost of goods sold (excluding depreciation and amortization)."""
    selling_general_and_administrative: float
    """Selling, general and administrative expenses."""
    research_and_development: float
    """Research and development expenses."""
    depreciation_and_amortization: float
    """Depreciation and amortization expense."""
    interest_expense: float
    """Interest expense (a positive number)."""
    interest_income: float
    """Interest income."""
    other_income: float
    """Other non-operating income (negative for a net expense)."""
    income_tax_expense: float
    """Income tax expense."""
    preferred_dividends: float
    """Dividends on preferred shares."""
    weighted_average_shares: float
    """Weighted average common shares outstanding."""

    def gross_profit(self) -> float:
        """Gross profit: revenue minus cost of goods sold."""
        return self.revenue - self.cost_of_goods_sold

    def gross_margin(self) -> float:
        """Gross margin: gross profit as a fraction of revenue."""
        return (self.revenue - self.cost_of_goods_sold) / self.revenue

    def operating_income(self) -> float:
        """Operating income (EBIT): revenue minus cost of goods sold, SG&A, R&D, and depreciation and amortization."""
        return (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                - self.research_and_development - self.depreciation_and_amortization)

    def operating_margin(self) -> float:
        """Operating margin: operating income (EBIT) as a fraction of revenue."""
        operating = (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                     - self.research_and_development - self.depreciation_and_amortization)
        return operating / self.revenue

    def ebitda(self) -> float:
        """EBITDA: operating income before depreciation and amortization."""
        return (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                - self.research_and_development)

    def ebitda_margin(self) -> float:
        """EBITDA as a fraction of revenue."""
        return (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                - self.research_and_development) / self.revenue

    def pretax_income(self) -> float:
        """Income before taxes: operating income minus interest expense plus interest income and other income."""
        operating = (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                     - self.research_and_development - self.depreciation_and_amortization)
        return operating - self.interest_expense + self.interest_income + self.other_income

    def net_income(self) -> float:
        """Net income: income before taxes minus income tax expense."""
        operating = (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                     - self.research_and_development - self.depreciation_and_amortization)
        pretax = operating - self.interest_expense + self.interest_income + self.other_income
        return pretax - self.income_tax_expense

    def net_margin(self) -> float:
        """Net profit margin: net income as a fraction of revenue."""
        operating = (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                     - self.research_and_development - self.depreciation_and_amortization)
        pretax = operating - self.interest_expense + self.interest_income + self.other_income
        return (pretax - self.income_tax_expense) / self.revenue

    def effective_tax_rate(self) -> float:
        """Effective tax rate: income tax expense as a fraction of income before taxes."""
        operating = (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                     - self.research_and_development - self.depreciation_and_amortization)
        pretax = operating - self.interest_expense + self.interest_income + self.other_income
        return self.income_tax_expense / pretax

    def earnings_per_share(self) -> float:
        """Basic earnings per share: net income less preferred dividends, per weighted average common share."""
        operating = (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                     - self.research_and_development - self.depreciation_and_amortization)
        net = operating - self.interest_expense + self.interest_income + self.other_income - self.income_tax_expense
        return (net - self.preferred_dividends) / self.weighted_average_shares

    def interest_coverage_ratio(self) -> float:
        """Interest coverage: operating income (EBIT) divided by interest expense."""
        operating = (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                     - self.research_and_development - self.depreciation_and_amortization)
        return operating / self.interest_expense


@dataclass
class CashFlowStatement:
    """A cash flow statement for one period (indirect method). Outflows are given as positive amounts."""

    net_income: float
    """Net income for the period."""
    depreciation_and_amortization: float
    """Depreciation and amortization (a non-cash expense)."""
    stock_based_compensation: float
    """Stock-based compensation (a non-cash expense)."""
    deferred_taxes: float
    """Deferred income taxes (a non-cash expense; negative for a benefit)."""
    increase_in_receivables: float
    """Increase in accounts receivable over the period (negative for a decrease)."""
    increase_in_inventory: float
    """Increase in inventory over the period (negative for a decrease)."""
    increase_in_payables: float
    """Increase in accounts payable over the period (negative for a decrease)."""
    capital_expenditures: float
    """Purchases of property, plant and equipment (a positive amount spent)."""
    acquisitions: float
    """Cash paid for acquisitions (a positive amount spent)."""
    proceeds_from_asset_sales: float
    """Cash received from selling assets."""
    debt_issued: float
    """Cash received from new borrowing."""
    debt_repaid: float
    """Cash paid to repay debt (a positive amount)."""
    dividends_paid: float
    """Dividends paid (a positive amount)."""
    share_repurchases: float
    """Cash paid to buy back shares (a positive amount)."""
    beginning_cash: float
    """Cash at the start of the period."""

    def operating_cash_flow(self) -> float:
        """Cash from operations: net income plus the non-cash expenses (D&A, stock-based compensation,
        deferred taxes), minus increases in receivables and inventory, plus the increase in payables."""
        return (self.net_income + self.depreciation_and_amortization + self.stock_based_compensation
                + self.deferred_taxes - self.increase_in_receivables - self.increase_in_inventory
                + self.increase_in_payables)

    def investing_cash_flow(self) -> float:
        """Cash from investing: asset-sale proceeds minus capital expenditures and acquisitions."""
        return self.proceeds_from_asset_sales - self.capital_expenditures - self.acquisitions

    def financing_cash_flow(self) -> float:
        """Cash from financing: debt issued minus debt repaid, dividends paid and share repurchases."""
        return self.debt_issued - self.debt_repaid - self.dividends_paid - self.share_repurchases

    def net_change_in_cash(self) -> float:
        """Net change in cash: the sum of operating, investing and financing cash flows."""
        operating = (self.net_income + self.depreciation_and_amortization + self.stock_based_compensation
                     + self.deferred_taxes - self.increase_in_receivables - self.increase_in_inventory
                     + self.increase_in_payables)
        investing = self.proceeds_from_asset_sales - self.capital_expenditures - self.acquisitions
        financing = self.debt_issued - self.debt_repaid - self.dividends_paid - self.share_repurchases
        return operating + investing + financing

    def ending_cash(self) -> float:
        """Cash at the end of the period: beginning cash plus the net change in cash."""
        operating = (self.net_income + self.depreciation_and_amortization + self.stock_based_compensation
                     + self.deferred_taxes - self.increase_in_receivables - self.increase_in_inventory
                     + self.increase_in_payables)
        investing = self.proceeds_from_asset_sales - self.capital_expenditures - self.acquisitions
        financing = self.debt_issued - self.debt_repaid - self.dividends_paid - self.share_repurchases
        return self.beginning_cash + operating + investing + financing

    def free_cash_flow(self) -> float:
        """Free cash flow: cash from operations minus capital expenditures."""
        operating = (self.net_income + self.depreciation_and_amortization + self.stock_based_compensation
                     + self.deferred_taxes - self.increase_in_receivables - self.increase_in_inventory
                     + self.increase_in_payables)
        return operating - self.capital_expenditures

    def free_cash_flow_to_equity(self) -> float:
        """Free cash flow to equity: free cash flow plus net borrowing (debt issued minus debt repaid)."""
        operating = (self.net_income + self.depreciation_and_amortization + self.stock_based_compensation
                     + self.deferred_taxes - self.increase_in_receivables - self.increase_in_inventory
                     + self.increase_in_payables)
        return operating - self.capital_expenditures + self.debt_issued - self.debt_repaid

    def working_capital_cash_effect(self) -> float:
        """The effect of working-capital changes on cash: minus the increases in receivables and inventory,
        plus the increase in payables."""
        return -self.increase_in_receivables - self.increase_in_inventory + self.increase_in_payables

    def cash_conversion_ratio(self) -> float:
        """Cash conversion: cash from operations divided by net income."""
        operating = (self.net_income + self.depreciation_and_amortization + self.stock_based_compensation
                     + self.deferred_taxes - self.increase_in_receivables - self.increase_in_inventory
                     + self.increase_in_payables)
        return operating / self.net_income

    def capex_to_depreciation(self) -> float:
        """Capital expenditures divided by depreciation and amortization."""
        return self.capital_expenditures / self.depreciation_and_amortization

    def shareholder_payout(self) -> float:
        """Cash returned to shareholders: dividends paid plus share repurchases."""
        return self.dividends_paid + self.share_repurchases

    def free_cash_flow_margin(self, revenue: float) -> float:
        """Free cash flow (cash from operations minus capital expenditures) as a fraction of `revenue`."""
        operating = (self.net_income + self.depreciation_and_amortization + self.stock_based_compensation
                     + self.deferred_taxes - self.increase_in_receivables - self.increase_in_inventory
                     + self.increase_in_payables)
        return (operating - self.capital_expenditures) / revenue
