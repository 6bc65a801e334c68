"""Task registry: name -> "module:Class", imported only when used (fast start-up)."""

from __future__ import annotations

import importlib

from ..core.task import Task

TASKS: dict[str, str] = {
    "demo": "finharness.benchmarks.demo.task:DemoTask",
    "cfinbench": "finharness.benchmarks.cfinbench.task:CFinBenchTask",
    "ucfe": "finharness.benchmarks.ucfe.task:UCFETask",
    "fintradebench": "finharness.benchmarks.fintradebench.task:FinTradeBenchTask",
    "bizbench/codetatqa": "finharness.benchmarks.bizbench.task:CodeTatqaTask",
    "bizbench/tatqa-e": "finharness.benchmarks.bizbench.task:TatqaETask",
    "bizbench/secnum": "finharness.benchmarks.bizbench.task:SecNumTask",
    "bizbench/fincode": "finharness.benchmarks.bizbench.task:FinCodeTask",
    "bizbench/codefinqa": "finharness.benchmarks.bizbench.task:CodeFinQATask",
    "bizbench/convfinqa-e": "finharness.benchmarks.bizbench.task:ConvFinQAETask",
    "bizbench/finknow": "finharness.benchmarks.bizbench.finknow:FinKnowTask",
    "bizbench/formulaeval": "finharness.benchmarks.bizbench.formulaeval.task:FormulaEvalTask",
}


def task_class(name: str) -> type[Task]:
    target = TASKS.get(name)
    if target is None:
        raise KeyError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))} (see `finharness list`)")
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)
