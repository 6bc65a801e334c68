"""FinTradeBench: fundamentals and trading-signal questions, No-RAG / RAG / ideal contexts, rubric judge.

The task is `finharness.benchmarks.fintradebench.task:FinTradeBenchTask`; the CLI group
(`finharness fintradebench scale|compare|agreement|fundamentals`) is in `cli.py`.
"""
