"""UCFE: user-centred financial dialogues with a simulated user, compared in pairs by an LLM judge.

The task lives in `.task` (UCFETask), dialogue simulation in `.dialogue`, official prompt texts in
`.prompts`, pairwise judging in `.judge` and its command in `.cli`; nothing is imported here so that
the CLI starts fast.
"""

from __future__ import annotations

from ..declaration import Benchmark

BENCHMARK = Benchmark(
    name="ucfe", suite_rows="finharness.benchmarks.ucfe:suites.toml", display="UCFE", tasks={"ucfe": "finharness.benchmarks.ucfe.task:UCFETask"},
    commands={"ucfe": "finharness.benchmarks.ucfe.cli:ucfe_app"},
    report_section="finharness.benchmarks.ucfe.report:SECTION",
    datasets=("ucfe", "ucfe-gpt4o-dialogues", "ucfe-release"),
    hooks="finharness.benchmarks.ucfe.suite_step:HOOKS")
