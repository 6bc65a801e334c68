"""What the built-in benchmarks add besides their tasks: commands of `finharness`, and sections of the report.

The same door as their tasks (registry.TASKS) and as a benchmark installed from outside (plugins.py): each
table maps a name to the `module:attr` that defines it, imported only when used. An installed distribution
declares the same under the entry-point groups `finharness.commands` and `finharness.report_sections`
(docs/write-a-task.md), so adding a benchmark edits neither the CLI nor the report.
"""

from __future__ import annotations

COMMANDS: dict[str, str] = {
    "ucfe": "finharness.benchmarks.ucfe.cli:ucfe_app",
    "fintradebench": "finharness.benchmarks.fintradebench.cli:fintradebench_app",
    "fintradebench.build": "finharness.benchmarks.fintradebench.construction.cli:build_app",
    "financebench": "finharness.benchmarks.financebench.cli:financebench_app",
    "data.convert.ideafinbench": "finharness.benchmarks.cfinbench.cli:ideafinbench_command",
    "data.build.secnum": "finharness.benchmarks.bizbench.cli:secnum_command",
    "data.build.tatqa": "finharness.benchmarks.bizbench.cli:tatqa_command",
}
"""Command path with dots -> a typer.Typer (a group) or a command function (cli_plugins.py)."""

REPORT_SECTIONS: dict[str, str] = {
    "cfinbench": "finharness.benchmarks.cfinbench.report:SECTION",
    "bizbench": "finharness.benchmarks.bizbench.report:SECTION",
    "ucfe": "finharness.benchmarks.ucfe.report:SECTION",
    "fintradebench": "finharness.benchmarks.fintradebench.report:SECTION",
    "financebench": "finharness.benchmarks.financebench.report:SECTION",
}
"""Benchmark -> its report.sections.ReportSection, in the order the report shows them."""
