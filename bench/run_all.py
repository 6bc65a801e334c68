"""Run every performance script in bench/ in turn (by hand: `make bench`); never part of `make test`.

Each script prints its own table; this runner adds the machine and the wall time of each.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
SCRIPTS = ["overhead_bench.py", "signals_bench.py", "sandbox_bench.py", "ll_reuse.py", "retrieval_bench.py", "openai_throughput.py"]


def main() -> int:
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    failed = 0
    for script in SCRIPTS:
        print(f"\n== {script}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(BENCH / script)], cwd=BENCH.parent)
        print(f"-- {script}: exit {code}, {time.perf_counter() - started:.1f} s wall", flush=True)
        failed += code != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
