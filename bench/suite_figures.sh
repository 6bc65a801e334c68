#!/usr/bin/env bash
# The figures of issue 24 (the suite) and of issue 27's draws, run by hand (hours on 2 cores):
#   bash bench/suite_figures.sh OUT [quick|two|dry|budget|draws]...   (no step named: every step)
# quick:  the quick suite on the embedded 0.5B as model, judge and simulated user; its wall time and scorecard
# two:    the same suite folder with embedded:1.5b added (the 0.5B's rows come from the store)
# dry:    the standard and full suites' plans priced as a hosted model (no model is called)
# budget: a budget stop and its resume, on the demo and the embedded model
# draws:  --draws 5 at temperature 0.7 on the demo: the clustered interval and the sampling share
# interrupt: Ctrl-C (SIGINT) 20 s into a CPA stand-in run on the embedded model, then the command it prints
set -euo pipefail
OUT=${1:?usage: bash bench/suite_figures.sh OUT [step...]}
shift
STEPS=${*:-quick two dry budget draws interrupt}
FH=${FH:-.venv/bin/finharness}
DATA=${FINHARNESS_DATA_DIR:-../shared/data}
mkdir -p "$OUT"
timed() { local name=$1; shift; /usr/bin/time -f "$name: %e s wall, %U s user" "$@" 2>&1 | tee "$OUT/$name.log"; }

for step in $STEPS; do
  case $step in
    quick)
      timed quick "$FH" suite quick --model embedded --judge embedded --user-model embedded \
        --data-dir "$DATA" --out "$OUT/quick" || true ;;
    two)
      timed two "$FH" suite quick --model embedded --model embedded:1.5b --judge embedded --user-model embedded \
        --data-dir "$DATA" --out "$OUT/quick" || true ;;
    dry)
      for suite in standard full; do
        timed "dry-$suite" "$FH" suite "$suite" --model 'openai:gpt-4o@http://127.0.0.1:9/v1' \
          --judge 'openai:gpt-4o@http://127.0.0.1:9/v1' --user-model 'openai:gpt-4o@http://127.0.0.1:9/v1' \
          --price gpt-4o=2.5/10 --data-dir "$DATA" --no-pull --dry-run --out "$OUT/dry-$suite" || true
      done ;;
    budget)
      timed budget-stop "$FH" run demo --model embedded --budget-tokens 600 --out "$OUT/budget" -q || true
      timed budget-resume "$FH" run demo --model embedded --out "$OUT/budget" -q || true ;;
    draws)
      timed draws-1 "$FH" run demo --model embedded --temperature 0.7 --out "$OUT/draws1" || true
      timed draws-5 "$FH" run demo --model embedded --temperature 0.7 --draws 5 --out "$OUT/draws5" || true ;;
    interrupt)
      timed interrupt-stop timeout -s INT 20 "$FH" run cfinbench -o exam=standin:cpa --sample 120 --seed 0 \
        --model embedded --data-dir "$DATA" --out "$OUT/interrupt" || true
      timed interrupt-resume "$FH" run cfinbench -o exam=standin:cpa --sample 120 --seed 0 \
        --model embedded --data-dir "$DATA" --out "$OUT/interrupt" -q || true ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
