"""UCFE's section of the HTML report (its BENCHMARK declaration): the pairwise ratings that rank
its models (`report --matches` from `finharness ucfe judge`, `--ratings` from `finharness rate --json`), then
the shape of its runs' dialogues (rounds, tokens, who ended them: values that describe, not scores)."""

from __future__ import annotations

from typing import Sequence

from markupsafe import Markup

from ...report.markup import note
from ...report.runs import RunData
from ...report.sections import ReportSection, generic_section


def dialogues_section(runs: Sequence[RunData]) -> Markup:
    return note("A UCFE run holds dialogues, not scores: its values describe them (rounds, tokens) and rank "
                "nothing; models are ranked by judging runs in pairs (`finharness ucfe judge`, then "
                "`finharness rate`).") + generic_section(runs)


SECTION = ReportSection("UCFE", applies=lambda task: task == "ucfe", render=dialogues_section, pairwise=True)
