"""FormulaEval: the formulas, their stubs and inputs, and completions checked in the sandbox."""

from __future__ import annotations

import asyncio
import random
import textwrap
from collections import Counter

import pytest

from finharness.backends.fake import FakeBackend
from finharness.benchmarks.bizbench.formulaeval.formulas import FORMULAS, formula
from finharness.benchmarks.bizbench.formulaeval.task import FormulaEvalTask
from finharness.core.task import SampleRecord

from ..fakes import fake_backend, fake_models

FAST_SUBSET = ("internal_rate_of_return", "present_value_of_annuity", "BalanceSheet.debt_to_equity",
               "IncomeStatement.ebitda", "CashFlowStatement.free_cash_flow_margin")


@pytest.fixture(scope="module")
def task():
    task = FormulaEvalTask(pool_size=1)
    yield task
    task.close()


def sample_of(task, name):
    return next(s for s in task.load(None) if s.id == f"formulaeval/{name}")


def block(code: str) -> str:
    return f"Here it is.\n```python\n{textwrap.dedent(code).strip()}\n```"


def test_at_least_50_formulas_standalone_and_three_statements():
    groups = Counter(f.group for f in FORMULAS)
    assert len(FORMULAS) >= 50 and groups["standalone"] >= 14
    assert {"BalanceSheet", "IncomeStatement", "CashFlowStatement"} <= set(groups)
    assert sum(v for k, v in groups.items() if k != "standalone") >= 36
    assert len({f.name for f in FORMULAS}) == len(FORMULAS)


def test_stubs_show_signature_and_docstring_but_not_the_body():
    for item in FORMULAS:
        stub = item.stub()
        assert f"def {item.function_name}(" in stub and '"""' in stub
        assert stub.rstrip().endswith('"""'), item.name  # nothing after the docstring
        assert item.reference_source.strip().splitlines()[-1].strip() not in stub, item.name
        if item.owner is not None:
            assert f"class {item.owner.__name__}:" in stub and "@dataclass" in stub


def test_inputs_are_seeded_and_keep_references_defined():
    item = formula("net_present_value")
    assert item.cases(0, 5) == item.cases(0, 5) and item.cases(0, 5) != item.cases(1, 5)
    for item in FORMULAS:
        values = item.expected(item.cases(0, 100))
        assert all(isinstance(v, float) and v == v and abs(v) != float("inf") for v in values), item.name


@pytest.mark.parametrize("name", FAST_SUBSET)
def test_reference_source_passes_its_own_check(task, name):
    sample = sample_of(task, name)
    score = task.score(sample, task.gold_prediction(sample))
    assert score.values == {"official": 1.0, "inputs_passed": 1.0, "robust": 1.0, "robust_inputs_passed": 1.0}


def test_subtly_wrong_completions_fail(task):
    annuity = sample_of(task, "present_value_of_annuity")
    ignores_due = block('''
        def present_value_of_annuity(payment, rate, periods, due=False):
            return payment * (1 - (1 + rate) ** -periods) / rate
    ''')
    score = task.score(annuity, ignores_due)
    assert score.value == 0.0 and 0.2 < score.values["inputs_passed"] < 0.8  # right whenever due is False
    assert score.extracted["official_outcome"] == "wrong"
    ebitda = sample_of(task, "IncomeStatement.ebitda")
    subtracts_da = block('''
        def ebitda(self):
            return (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative
                    - self.research_and_development - self.depreciation_and_amortization)
    ''')
    assert task.score(ebitda, subtracts_da).values["inputs_passed"] == 0.0
    irr = sample_of(task, "internal_rate_of_return")
    coarse = block('''
        def internal_rate_of_return(cash_flows):
            low, high = -0.99, 10.0
            for _ in range(12):
                middle = (low + high) / 2
                if sum(c / (1 + middle) ** t for t, c in enumerate(cash_flows)) > 0:
                    low = middle
                else:
                    high = middle
            return middle
    ''')
    assert task.score(irr, coarse).value == 0.0


def test_completion_shapes_body_method_and_whole_class(task):
    ebitda = sample_of(task, "IncomeStatement.ebitda")
    body = ("```python\nreturn (self.revenue - self.cost_of_goods_sold - self.selling_general_and_administrative"
            " - self.research_and_development)\n```")
    assert task.score(ebitda, body).value == 1.0
    whole_class = block('''
        from dataclasses import dataclass

        @dataclass
        class IncomeStatement:
            revenue: float

            def _operating_costs(self):
                return self.cost_of_goods_sold + self.selling_general_and_administrative + self.research_and_development

            def ebitda(self):
                return self.revenue - self._operating_costs()
    ''')
    assert task.score(ebitda, whole_class).value == 1.0
    npv = sample_of(task, "net_present_value")
    assert task.score(npv, "```python\nreturn sum(c / (1 + rate) ** t for t, c in enumerate(cash_flows))\n```").value == 1.0


def test_program_failures_are_classified(task):
    npv = sample_of(task, "net_present_value")
    cases = {
        "timeout": block("def net_present_value(rate, cash_flows):\n    while True:\n        pass"),
        "error:ZeroDivisionError": block("def net_present_value(rate, cash_flows):\n    return 1 / 0"),
        "error:NoFunction": block("def npv(rate, cash_flows):\n    return 0.0"),
        "unparseable": "I cannot write code.",
    }
    outcomes = {label: task.score(npv, reply).extracted["official_outcome"] for label, reply in cases.items()}
    assert outcomes == {label: label for label in cases}
    records = [SampleRecord(npv.id, reply, task.score(npv, reply), metadata=npv.metadata) for reply in cases.values()]
    agg = task.aggregate([npv], records)
    assert agg.extra["failure_classes"]["official"] == {label: 1 for label in cases}
    assert agg.metrics["accuracy"].value == 0.0


def test_official_needs_one_block_robust_takes_an_unclosed_one(task):
    cagr = sample_of(task, "compound_annual_growth_rate")
    reply = ("```python\ndef compound_annual_growth_rate(beginning_value, ending_value, years):\n"
             "    return (ending_value / beginning_value) ** (1 / years) - 1\n")
    score = task.score(cagr, reply)
    assert score.values["official"] == 0.0 and score.values["robust"] == 1.0
    assert score.extracted["robust_rule"] == "fenced_unclosed"


def test_solve_sends_the_stub_and_runs_while_solving(task, tmp_path):
    sample = sample_of(task, "simple_interest")
    models = fake_models(tmp_path, model=FakeBackend(reply=task.gold_prediction(sample)))
    reply = asyncio.run(task.solve(sample, models))
    (sent,) = fake_backend(models).requests
    assert sent.messages[-1].content.count("def simple_interest(") == 1 and sent.messages[0].role == "system"
    executions = task.runner.executions
    assert task.score(sample, reply).value == 1.0 and task.runner.executions == executions


@pytest.mark.slow
def test_every_reference_passes_its_own_check(task):
    samples = task.load(None)
    records = [SampleRecord(s.id, task.gold_prediction(s), task.score(s, task.gold_prediction(s)),
                            metadata=s.metadata) for s in samples]
    failing = [r.id for r in records if r.score.value != 1.0]
    assert not failing
    assert task.aggregate(samples, records).metrics["accuracy"].value == 1.0


def test_random_is_not_used_unseeded():
    """The generators only draw from the Random they are given (the seed fixes every input)."""
    state = random.getstate()
    formula("bond_price").cases(3, 10)
    assert random.getstate() == state
