"""Evaluate from Python: what `finharness run` does, with typed results (docs/python-api.md).

    python docs/examples/evaluate.py [MODEL]
"""

import sys

import finharness

model = sys.argv[1] if len(sys.argv) > 1 else "embedded"
result = finharness.evaluate(["demo", "docs/examples/my_exam.toml"], model=model, data_dir="docs/examples",
                             out="runs/evaluate")
for name, run in result.runs.items():
    headline = run.metric()
    print(f"{name}: {run.headline} {headline.value:.3f} [{headline.ci95[0]:.3f}, {headline.ci95[1]:.3f}] "
          f"n={headline.n} ({run.status}; {len(run.records)} samples in {run.out_dir})")
