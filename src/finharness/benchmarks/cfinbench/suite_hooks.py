"""CFinBench in a suite: its score weighs items unequally (0.4·single + 0.4·multiple + 0.2·judgment of macro means
over categories), so a plan's effective n is smaller than its item count."""

from __future__ import annotations

from typing import Any, Sequence

from ..declaration import SuiteHooks
from .scoring import item_weights


class CFinBenchSuiteHooks(SuiteHooks):
    def item_weights(self, samples: Sequence[Any]) -> Sequence[float] | None:
        cells = [(s.metadata.get("type"), s.metadata.get("category")) for s in samples]
        if any(None in cell for cell in cells):  # not the exam's layout (a user's own file): equal weights
            return None
        return item_weights(cells)  # type: ignore[arg-type]


HOOKS = CFinBenchSuiteHooks()
"""CFinBench's suite hooks (its Benchmark declaration names them)."""
