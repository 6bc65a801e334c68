"""CFinBench: Chinese financial exams (and any exam in the same layout), official and robust.

The task lives in `.task` (CFinBenchTask), the IDEAFinBench converter in `.convert`; nothing is
imported here so that the CLI starts without loading scipy.
"""
