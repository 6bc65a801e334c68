"""FinTradeBench in a suite: the scorecard adds RAG Δ (the RAG row's accuracy minus the No-RAG row's, paired on the
questions both scored) and reads its rubric judge's health from the runs."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..declaration import Health, HealthRate, PairedDelta, SuiteHooks
from .judge import rubric_copy_note


class FinTradeBenchSuiteHooks(SuiteHooks):
    composites = (PairedDelta("mode", "norag", "rag", "rag_delta", "RAG Δ (RAG − No-RAG)",
                              "RAG Δ = accuracy with retrieval − without, paired on the questions both rows scored "
                              "(the paper reports accuracy for No-RAG and RAG and the gain); informational"),)

    def judge_health(self, results: Sequence[Mapping[str, Any]]) -> Health | None:
        """How many verdicts are exactly the rubric's own example (results.json extra.judge_example_scores), pooled
        over the row's runs, with the task's warning when most are, and the answers no verdict scored."""
        copies = of = unparseable = 0
        for r in results:
            extra = r.get("extra") or {}
            echoed = extra.get("judge_example_scores") or {}
            copies += int(echoed.get("verdicts") or 0)
            of += int(echoed.get("of") or 0)
            unparseable += len(extra.get("unparseable") or ())
        rates = (HealthRate("rubric-example copy", copies, of, "verdicts that are exactly the rubric's example scores "
                            "(a judge copying it instead of grading); healthy: near 0"),)
        notes = [note] if (note := rubric_copy_note(copies, of)) else []
        if unparseable:
            notes.append(f"{unparseable} answer(s) got no usable verdict in 3 attempts and are not scored")
        return Health(rates, tuple(notes))


HOOKS = FinTradeBenchSuiteHooks()
"""FinTradeBench's suite hooks (its Benchmark declaration names them)."""
