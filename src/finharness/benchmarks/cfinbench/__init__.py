"""CFinBench: Chinese financial exams (and any exam in the same layout), official and robust.

The task lives in `.task` (CFinBenchTask), the IDEAFinBench converter in `.convert`; nothing is
imported here so that the CLI starts without loading scipy.
"""

from __future__ import annotations

from ..declaration import Benchmark

BENCHMARK = Benchmark(
    name="cfinbench", suite_rows="finharness.benchmarks.cfinbench:suites.toml", display="CFinBench", tasks={"cfinbench": "finharness.benchmarks.cfinbench.task:CFinBenchTask"},
    commands={"data.convert.ideafinbench": "finharness.benchmarks.cfinbench.cli:ideafinbench_command"},
    report_section="finharness.benchmarks.cfinbench.report:SECTION",
    datasets=("cfinbench", "cfinbench-categories", "cfinbench-release", "ideafinbench"),
    hooks="finharness.benchmarks.cfinbench.suite_hooks:HOOKS")
