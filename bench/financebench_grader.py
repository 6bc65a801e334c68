"""The FinanceBench grader against the release's human labels, with the design / held-out split the rules were
developed on (`finharness financebench grade-check` prints the same figures without the split).

    .venv/bin/python bench/financebench_grader.py DATA [--judge SPEC] [--json FILE]

The rules were written looking only at DESIGN_FILES (the even positions of the sorted file names, chosen by
position before any answer was read); the other four were graded once the rules were fixed (docs/benchmarks/
financebench.md says what changed after that blind run). The 150 questions are the same in every file: the
held-out figures generalise over answers and models, not over questions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from finharness.backends import from_spec
from finharness.benchmarks.financebench.grade_check import fmt, format_report, graded_rows, report, summary

DESIGN_FILES = ("claude-2_inContext", "gpt-4-1106-preview_oracle", "gpt-4_closedBook", "gpt-4_sharedStore")
"""The files the rules were designed on; the other four are held out."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path, help="data root holding financebench/")
    parser.add_argument("--judge", help="judge model spec: grades the answers the rules did not decide")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    files = sorted((args.data_dir / "financebench" / "results").glob("*.jsonl"))
    grader = "judge" if args.judge else "rules"
    rows = graded_rows(files, args.data_dir, judge=from_spec(args.judge) if args.judge else None)
    figures = report(rows, grader, args.judge)
    print(format_report(figures))
    figures["split"] = {}
    print("\nsplit (agreement, κ, numeric questions, the rest):")
    for split, keep in (("design", lambda r: r.file in DESIGN_FILES), ("held-out", lambda r: r.file not in DESIGN_FILES)):
        part = summary([r for r in rows if keep(r)])
        figures["split"][split] = part
        print(f"  {split:9} n {part['n']:4}  {fmt(part['agreement'])}  κ {fmt(part['kappa'])}  numeric "
              f"{fmt(part['numeric'])} (n {part['numeric']['n']})  the rest {fmt(part['other'])} (n {part['other']['n']})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
