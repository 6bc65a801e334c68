"""The demo: a dozen single-choice finance questions (English and Chinese) written for this project."""

from __future__ import annotations

from ..declaration import Benchmark

BENCHMARK = Benchmark(name="demo", suite_rows="finharness.benchmarks.demo:suites.toml", display="demo", tasks={"demo": "finharness.benchmarks.demo.task:DemoTask"})
