"""CFinBench in a suite: its score weighs items unequally (0.4·single + 0.4·multiple + 0.2·judgment of macro means
over categories), so a plan's effective n is smaller than its item count, and the scorecard says its headline is
the paper's score."""

from __future__ import annotations

from typing import Any, Sequence

from ..declaration import SuiteHooks
from .scoring import item_weights

HEADLINE_NOTE = ("CFinBench's own score (the paper's): 0.4·single + 0.4·multiple + 0.2·judgment, strict scoring; "
                 "it is the task's headline strict.score")


class CFinBenchSuiteHooks(SuiteHooks):
    def headline_note(self, metric: str | None) -> str:
        return HEADLINE_NOTE if metric == "strict.score" else ""

    def item_weights(self, samples: Sequence[Any]) -> Sequence[float] | None:
        cells = [(s.metadata.get("type"), s.metadata.get("category")) for s in samples]
        if any(None in cell for cell in cells):  # not the exam's layout (a user's own file): equal weights
            return None
        return item_weights(cells)  # type: ignore[arg-type]


HOOKS = CFinBenchSuiteHooks()
"""CFinBench's suite hooks (its Benchmark declaration names them)."""
