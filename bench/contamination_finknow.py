"""FinKnow's CFA items (FinEval's 1,032, `-o source=fineval`) run and probed for membership on one model: the
seen/unseen split of the score, and what the probes cost beside the benchmark's own run.

    python bench/contamination_finknow.py [--model embedded] [--sample N] [--out runs/contamination/finknow-MODEL]

Runs `finharness run bizbench/finknow -o source=fineval -o method=ll` (the paper's log-likelihood method) into
OUT, then `finharness contamination` on the same items into the same folder (so the run's per-sample scores are
split), both on OUT/store.sqlite: a rerun of either computes nothing twice. Prints the run's accuracy, the probes'
validated status, the share above the threshold, the score on the likely-seen and likely-unseen items with their
difference, and the wall time of each per 1,000 items (on whatever machine runs it: measured under load, the two
figures' ratio says more than either).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--sample", type=int, default=None, help="a seeded subset of N items (default: all 1,032)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out = args.out or ROOT / "runs" / "contamination" / f"finknow-{args.model.replace(':', '_')}"
    task = ["bizbench/finknow", "-o", "source=fineval", "-o", "method=ll", "--model", args.model, "--out", str(out),
            "--seed", str(args.seed)] + (["--sample", str(args.sample)] if args.sample else [])
    run = subprocess.run([sys.executable, "-m", "finharness", "run", *task, "-q"], cwd=ROOT)
    if run.returncode not in (0, 1):
        return run.returncode
    probe = subprocess.run([sys.executable, "-m", "finharness", "contamination", *task, "-q", "--json"], cwd=ROOT,
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(probe.stderr, file=sys.stderr)
        return probe.returncode
    record = json.loads(probe.stdout)
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    n = record["n_items"]
    run_wall = (results.get("cumulative") or {}).get("wall_s") or results["timing"]["wall_s"]
    probe_wall = record["cost"]["wall_s"]
    headline = results["metrics"][results.get("headline") or "accuracy"]
    print(f"{args.model}: FinKnow CFA, {n} items, accuracy {headline['value']:.3f} "
          f"[{headline['ci95'][0]:.3f}, {headline['ci95'][1]:.3f}]")
    for probe_name, v in record["validation"]["probes"].items():
        print(f"  {probe_name:10} validated AUC {v['auc']:.3f} [{v['ci95'][0]:.3f}, {v['ci95'][1]:.3f}]: {v['status']}")
    impact = record["impact"]
    if impact.get("probe"):
        share = impact["share"]
        print(f"  likely seen ({impact['probe']}): {impact['above']}/{impact['n_items']} = {share['value']:.3f} "
              f"[{share['ci95'][0]:.3f}, {share['ci95'][1]:.3f}] (unseen text: {impact['fpr']:.3f})")
        if impact.get("difference"):
            d = impact["difference"]
            print(f"  accuracy seen {impact['seen']['value']:.3f} (n {impact['seen']['n']}) vs unseen "
                  f"{impact['unseen']['value']:.3f} (n {impact['unseen']['n']}): {d['diff']:+.3f} "
                  f"[{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]")
    else:
        print(f"  {impact['status']}")
    print(f"  wall per 1,000 items: benchmark run {1000 * run_wall / n:.0f} s (every invocation), probes "
          f"{1000 * probe_wall / n:.0f} s (this invocation: {record['cost']['calls']} calls, "
          f"{record['cost']['cache_hits']} from the store)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
