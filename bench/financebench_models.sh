#!/usr/bin/env bash
# The embedded models on FinanceBench: closed book, oracle and the agentic mode (strict and lenient call reading),
# each run resumable (rerun the same line to continue). By hand:  bash bench/financebench_models.sh DATA OUT [0.5b|1.5b]
# Sizes: every question for the 0.5B's closed book; seeded samples (--sample N, seed 0) elsewhere, as the 2 CPU
# cores allowed for the figures in docs/benchmarks/financebench.md (an episode is several calls). The 1.5B's agent
# was run with calls=lenient only.
set -euo pipefail
DATA=${1:?data root}; OUT=${2:?output folder}; WHICH=${3:-0.5b}
FH=${FINHARNESS:-.venv/bin/finharness}
mkdir -p "$OUT"
if [ "$WHICH" = "0.5b" ]; then MODEL=embedded; BOOK=""; ORACLE="--sample 30"; AGENT="--sample 5"
else MODEL=embedded:1.5b; BOOK="--sample 20"; ORACLE="--sample 10"; AGENT="--sample 3"; fi
run() { local name=$1; shift; local t0=$(date +%s)
  "$FH" run financebench --model "$MODEL" --data-dir "$DATA" --out "$OUT/$name-$WHICH" --concurrency 1 -q "$@" > "$OUT/$name-$WHICH.log" 2>&1 || true
  echo "$name-$WHICH: $(( $(date +%s) - t0 )) s wall" | tee -a "$OUT/times.txt"; }
run closed-book -o mode=closed-book -o max_tokens=256 $BOOK
run oracle -o mode=oracle -o max_tokens=256 $ORACLE
run agent-strict -o mode=agent -o dense=off -o max_tokens=256 -o max_steps=6 $AGENT
run agent-lenient -o mode=agent -o dense=off -o max_tokens=256 -o max_steps=6 -o calls=lenient $AGENT
