"""BizBench in a suite: the scorecard adds the mean of its task rows' headlines (ours: the paper reports each task
on its own)."""

from __future__ import annotations

from ..declaration import MeanOfTasks, SuiteHooks


class BizBenchSuiteHooks(SuiteHooks):
    composites = (MeanOfTasks("mean of the BizBench task headlines (ours: the paper reports each task on its own); "
                              "interval over the tasks as independent parts"),)


HOOKS = BizBenchSuiteHooks()
"""BizBench's suite hooks (its Benchmark declaration names them)."""
