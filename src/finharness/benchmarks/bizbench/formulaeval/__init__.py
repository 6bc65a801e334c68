"""FormulaEval (BizBench): finance formulas as Python functions and statement methods, written here.

- `standalone`  15 standalone formulas (interest, NPV, IRR, CAGR, annuities, WACC, CAPM, bonds...)
- `statements`  BalanceSheet, IncomeStatement, CashFlowStatement with 12 methods each
- `inputs`      seeded random inputs per formula
- `formulas`    stubs, program assembly, comparison (`FORMULAS`, `formula(name)`)
- `task`        `FormulaEvalTask` (`bizbench/formulaeval`)
"""
