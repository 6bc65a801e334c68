"""Wall time of load_prices + compute_signals over the shared price files (run by hand).

    .venv/bin/python bench/signals_bench.py [DATA_DIR]

DATA_DIR defaults to $FINHARNESS_DATA_DIR, else ../shared/data beside the checkout. Prints, per
corpus, the files, the rows, the wall seconds spent loading and computing, and the process CPU
seconds of the whole pass (close to the wall time an idle machine would show), best of --repeat.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchlib import DATA_DIR, Goal, Row

from finharness.markets.prices import load_prices
from finharness.markets.signals import compute_signals

CORPORA = {
    "fintradebench (7 tickers, .xlsx)": ("fintradebench/history_xlsx", "*-history.xlsx"),
    "nasdaq.com NASDAQ-100 (.csv)": ("nasdaq100_ohlcv/nasdaq_com_2014_2024", "*.csv"),
}


def run_corpus(files: list[Path]) -> tuple[int, float, float, float]:
    rows, load_s, signal_s = 0, 0.0, 0.0
    cpu_start = time.process_time()
    for path in files:
        start = time.perf_counter()
        prices = load_prices(path)
        loaded = time.perf_counter()
        rows += len(compute_signals(prices))
        load_s += loaded - start
        signal_s += time.perf_counter() - loaded
    return rows, load_s, signal_s, time.process_time() - cpu_start


P7_GOAL = Goal("<=", 3, "s")
NASDAQ = "nasdaq.com NASDAQ-100 (.csv)"


def p7(repeat: int = 1) -> Row:
    """load_prices + compute_signals over the 143 NASDAQ-100 price files, best of REPEAT passes."""
    folder, pattern = CORPORA[NASDAQ]
    files = sorted((DATA_DIR / folder).glob(pattern))
    if not files:
        raise FileNotFoundError(f"no {pattern} under {DATA_DIR / folder} (set FINHARNESS_DATA_DIR)")
    rows, load_s, signal_s, cpu_s = min((run_corpus(files) for _ in range(repeat)), key=lambda r: r[1] + r[2])
    total = load_s + signal_s
    return Row("P7", f"trading signals, {len(files)} NASDAQ price files",
               f"{total:.2f} s wall (load {load_s:.2f} + signals {signal_s:.2f}), {rows:,} rows",
               f"process CPU {cpu_s:.2f} s", total, P7_GOAL,
               details={"files": len(files), "rows": rows, "load_s": round(load_s, 3), "signals_s": round(signal_s, 3),
                        "cpu_s": round(cpu_s, 3), "repeat": repeat})


def main() -> None:
    default = str(DATA_DIR)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", default=default)
    parser.add_argument("--repeat", type=int, default=3, help="runs per corpus; the fastest is shown")
    args = parser.parse_args()
    print(f"{'corpus':36} {'files':>5} {'rows':>8} {'load s':>7} {'signals s':>9} {'total s':>7} {'cpu s':>6}")
    for label, (folder, pattern) in CORPORA.items():
        files = sorted((Path(args.data_dir) / folder).glob(pattern))
        if not files:
            print(f"{label:36} (no files under {Path(args.data_dir) / folder})")
            continue
        rows, load_s, signal_s, cpu_s = min((run_corpus(files) for _ in range(args.repeat)),
                                            key=lambda result: result[1] + result[2])
        print(f"{label:36} {len(files):5d} {rows:8d} {load_s:7.2f} {signal_s:9.2f} {load_s + signal_s:7.2f} "
              f"{cpu_s:6.2f}")


if __name__ == "__main__":
    main()
