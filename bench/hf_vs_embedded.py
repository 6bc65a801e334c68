"""`hf:` (transformers) against the embedded engine (llama.cpp) on FinKnow log-likelihoods (run by hand).

    .venv/bin/python bench/hf_vs_embedded.py [--sample N] [--threads T] [--continuation letter|text] [--out DIR]

Both sides load the same file, the embedded Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF: llama.cpp computes with
its quantized weights (and 8-bit activations in its matrix products), transformers with the weights
dequantized to float32 (`hf:/path/model.gguf`, or `--hf-folder` for the folder `folder_from_gguf` wrote,
which loads in seconds instead of a minute or two). Each side is one whole command, timed from the outside,
one after the other on the same machine:

    finharness run bizbench/finknow --method ll --model SPEC --data-dir DATA --out OUT/SIDE -q [--sample N]

Then the two samples.jsonl are compared item by item: the same choice (agreement N/N), |ΔLL| over every
option (max, median, 99th percentile), each side's accuracy, and each side's wall time (the command, and
the run's own `timing.wall_s`), with the machine's load average before and after each run. An existing
OUT/SIDE is resumed, not rerun: use a fresh --out to time again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from benchlib import DATA_DIR, FINHARNESS

from finharness.backends.hf import folder_from_gguf
from finharness.backends.model_files import ensure_model


def run_side(name: str, spec: str, out: Path, args: argparse.Namespace) -> dict:
    command = [str(FINHARNESS), "run", "bizbench/finknow", "--method", "ll", "--model", spec,
               "--data-dir", str(DATA_DIR), "--out", str(out / name), "-q", "-o", f"continuation={args.continuation}"]
    if args.sample:
        command += ["--sample", str(args.sample), "--seed", str(args.seed)]
    load_before = os.getloadavg()
    started = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - started
    results = json.loads((out / name / "results.json").read_text())
    return {"spec": spec, "command": " ".join(command), "command_wall_s": round(wall, 1),
            "run_wall_s": results["timing"]["wall_s"], "accuracy": results["metrics"]["accuracy"]["value"],
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def predictions(path: Path) -> dict[str, dict]:
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {row["id"]: row["prediction"] for row in rows if not row.get("failed")}


def compare(out: Path) -> dict:
    ours, theirs = predictions(out / "hf" / "samples.jsonl"), predictions(out / "embedded" / "samples.jsonl")
    common = sorted(set(ours) & set(theirs))
    agree = sum(ours[i]["choice"] == theirs[i]["choice"] for i in common)
    deltas = sorted(abs(ours[i]["logprobs"][letter] - theirs[i]["logprobs"][letter])
                    for i in common for letter in ours[i]["logprobs"])
    disagree = [i for i in common if ours[i]["choice"] != theirs[i]["choice"]]
    return {"items": len(common), "only_one_side": len(set(ours) ^ set(theirs)), "agree": agree,
            "agreement": round(agree / len(common), 4) if common else None,
            "max_abs_dll": round(deltas[-1], 4), "median_abs_dll": round(statistics.median(deltas), 4),
            "p99_abs_dll": round(deltas[int(0.99 * (len(deltas) - 1))], 4), "disagreeing_items": disagree[:20]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=0, help="a seeded random subset of N items (0: all 2,252)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="CPU threads of each engine")
    parser.add_argument("--continuation", choices=("letter", "text"), default="letter")
    parser.add_argument("--hf-folder", action="store_true",
                        help="run hf: on the transformers folder of the GGUF (written once) instead of the GGUF")
    parser.add_argument("--batch-size", type=int, default=8, help="hf: requests scored together")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-hf-vs-embedded"))
    args = parser.parse_args()
    gguf = ensure_model("embedded")
    model = folder_from_gguf(gguf) if args.hf_folder else gguf
    sides = {"embedded": f"embedded?threads={args.threads}",
             "hf": f"hf:{model}?threads={args.threads}&batch_size={args.batch_size}"}
    report = {name: run_side(name, spec, args.out, args) for name, spec in sides.items()}
    report["comparison"] = compare(args.out)
    report["ratio_hf_over_embedded"] = round(report["hf"]["command_wall_s"] / report["embedded"]["command_wall_s"], 2)
    print(json.dumps(report, indent=2))
    (args.out / "comparison.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
