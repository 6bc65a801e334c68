"""Run the `finharness` command line with a stamp at the first backend call (used by bench/cli_bench.py, P8).

    .venv/bin/python bench/first_request_probe.py STAMP_FILE run demo --model fake --limit 1 --out DIR

Exactly `finharness ARGS...`, except that the first `generate` or `loglikelihood` call of the `fake`
backend writes time.time() to STAMP_FILE first; the caller subtracts its own time.time() taken just
before it started this process, so the figure includes interpreter start-up and every import.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path


def stamp_first_call(stamp: Path) -> None:
    from finharness.backends import fake

    written = False

    def wrap(method):
        @functools.wraps(method)
        async def stamped(self, request):
            nonlocal written
            if not written:
                stamp.write_text(repr(time.time()))
                written = True
            return await method(self, request)
        return stamped

    fake.FakeBackend.generate = wrap(fake.FakeBackend.generate)
    fake.FakeBackend.loglikelihood = wrap(fake.FakeBackend.loglikelihood)


def main() -> int:
    stamp = Path(sys.argv[1])
    stamp_first_call(stamp)
    from finharness.cli import main as cli_main

    sys.argv = ["finharness", *sys.argv[2:]]
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
