"""FinTradeBench: fundamentals and trading-signal questions, No-RAG / RAG / ideal contexts, rubric judge.

The task is `finharness.benchmarks.fintradebench.task:FinTradeBenchTask`; the CLI group
(`finharness fintradebench scale|compare|agreement|fundamentals`) is in `cli.py`.
"""

from __future__ import annotations

from ..declaration import Benchmark

BENCHMARK = Benchmark(
    name="fintradebench", suite_rows="finharness.benchmarks.fintradebench:suites.toml", display="FinTradeBench",
    tasks={"fintradebench": "finharness.benchmarks.fintradebench.task:FinTradeBenchTask"},
    commands={"fintradebench": "finharness.benchmarks.fintradebench.cli:fintradebench_app",
              "fintradebench.build": "finharness.benchmarks.fintradebench.construction.cli:build_app"},
    report_section="finharness.benchmarks.fintradebench.report:SECTION",
    datasets=("fintradebench-seed", "fintradebench-history", "fintradebench-fundamentals", "fintradebench-sec-filings",
              "fintradebench-release", "nasdaq100-ohlcv"),
    hooks="finharness.benchmarks.fintradebench.suite_hooks:HOOKS")
