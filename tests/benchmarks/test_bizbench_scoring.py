"""BizBench scoring helpers (benchmarks/bizbench/scoring.py): the gold's unit that scale-aware matching uses, and
the program runner's memory of what it ran. Found by mutation testing (`make mutation`); expected values by hand."""

from __future__ import annotations

import pytest

from finharness.benchmarks.bizbench.scoring import ProgramJob, ProgramRunner, gold_scale


@pytest.mark.parametrize("question, metadata, expected", [
    ("What was revenue?", {"scale": "Million"}, "million"),      # TAT-QA's scale, lower-cased
    ("What was revenue?", {"scale": 6}, "million"),              # SEC-Num's XBRL scale
    ("What was revenue?", {"scale": 3}, "thousand"),
    ("What was the margin?", {"scale": -2}, "percent"),
    ("What was revenue?", {"scale": 0}, ""),                     # units: no scale
    ("Revenue (in millions)", {"scale": True}, "million"),       # a bool is not an XBRL scale: the question decides
    ("Revenue (in millions)", {"scale": ""}, "million"),
    ("Revenue (in millions)", {}, "million"),
    ("Net income (Thousand)", {}, "thousand"),
    ("Gross margin (percent)", {}, "percent"),
    ("Revenue (millions) in 2019?", {}, ""),                     # only a trailing note counts
    ("What was revenue?", {}, ""),
    (None, {}, ""),
])
def test_gold_scale(question, metadata, expected):
    assert gold_scale(question, metadata) == expected


def test_program_runner_counts_each_distinct_program_once():
    class Sandbox:  # stands in for finharness.sandbox.Sandbox: the counting is the runner's
        isolation = "stub"

        def run(self, code, **options):
            return ("ran", code)

    runner = ProgramRunner()
    runner._sandbox = Sandbox()
    first = runner.run(ProgramJob("x = 1", cache_key="s1"))
    assert runner.run(ProgramJob("x = 1", cache_key="s1")) is first  # served from memory
    runner.run(ProgramJob("x = 2", cache_key="s1"))
    runner.run(ProgramJob("x = 1", cache_key="s2"))  # same code, other inputs: runs again
    assert runner.executions == 3
