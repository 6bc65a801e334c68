"""FinanceBench (Islam et al., 2023, arXiv 2311.11944; patronus-ai/financebench): open-book questions over
public companies' filings, in the paper's configurations, graded against its released human labels."""

from __future__ import annotations

from ..declaration import Benchmark

BENCHMARK = Benchmark(
    name="financebench", suite_rows="finharness.benchmarks.financebench:suites.toml", display="FinanceBench",
    tasks={"financebench": "finharness.benchmarks.financebench.task:FinanceBenchTask"},
    commands={"financebench": "finharness.benchmarks.financebench.cli:financebench_app"},
    report_section="finharness.benchmarks.financebench.report:SECTION",
    datasets=("financebench", "financebench-results"))
