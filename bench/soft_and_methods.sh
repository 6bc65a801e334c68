#!/usr/bin/env bash
# The measurements behind soft verdicts, expected rubric scores and method-robust multiple choice
# (docs/benchmarks/ucfe.md, docs/benchmarks/fintradebench.md, docs/methods.md "What was measured").
#
#   bash bench/soft_and_methods.sh [OUT] [STEP ...]     # default OUT: runs/soft-and-methods, every step
#
# Steps: ucfe  ftb  mc. Needs the 1.5B model (`.venv/bin/pip install -e '.[model-1_5b]'`) and the data
# (FINHARNESS_DATA_DIR, default ../shared/data). Each step resumes from its run store. On a 2-core CPU:
# ucfe ~45 min, ftb ~55 min, mc ~2 h.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FH="$ROOT/.venv/bin/finharness"
DATA="${FINHARNESS_DATA_DIR:-$ROOT/../shared/data}"
OUT="${1:-runs/soft-and-methods}"
shift || true
STEPS="${*:-ucfe ftb mc}"
mkdir -p "$OUT"
cd "$OUT"

ucfe() {
  # the released GPT-4o dialogues against the local models' own, 40 zero-shot items, judged softly in both orders
  local tasks=0_股价预测,0_负面信息侦测 log="$DATA/ucfe/log/20241005_143552_gpt-4o_eng.json"
  for model in embedded embedded:1.5b; do
    local dialogues="ucfe-${model/:/-}"
    "$FH" run ucfe --model "$model" --user-model "$model" -o tasks=$tasks --data-dir "$DATA" --out "$dialogues" \
      --store ucfe.sqlite -q
    for judge in embedded embedded:1.5b; do
      local matches="judge-${judge/:/-}-vs-${model/:/-}"
      "$FH" ucfe judge "$log" "$dialogues" --judge "$judge?n_ctx=8192" --verdict soft --tasks $tasks \
        --data-dir "$DATA" --out "$matches/matches.jsonl" --store ucfe.sqlite --json -q > "$matches.json"
      "$FH" rate "$matches/matches.jsonl" --method bt --json > "$matches.bt-soft.json"
      "$FH" rate "$matches/matches.jsonl" --method bt --hard --json > "$matches.bt-hard.json"
    done
  done
}

ftb() {
  # 21 seed questions (7 per category) answered by the 0.5B at L3, judged with expected scores by both
  # models, calibrated against the hand ratings of those answers (greedy answers: the same texts with the
  # same engine build; check selected.jsonl against the ratings before trusting a rerun elsewhere)
  "$FH" fintradebench build candidates --models embedded --per-category 7 --levels L3 --max-tokens 512 \
    --data-dir "$DATA" --out ftb-build --seed 0 -q --json > ftb-candidates.json
  for judge in embedded:1.5b embedded; do  # 1.5B ~20 min, 0.5B ~10 min
    local out="ftb-build-judge-${judge/:/-}"
    mkdir -p "$out"
    cp ftb-build/questions.jsonl ftb-build/candidates.jsonl ftb-build/selected.jsonl "$out/"
    "$FH" fintradebench build judge --judge "$judge?n_ctx=8192" --judge-scores expected --data-dir "$DATA" \
      --out "$out" --store ftb-build/store.sqlite -q --json > "$out.json"
    "$FH" fintradebench build calibrate "$out" --human "$ROOT/bench/ftb_build_l3_human_scores.csv" --json \
      > "$out.calibration.json"
  done
}

mc() {
  # 100 seeded items per exam, every method on the same items
  "$FH" data convert ideafinbench "$DATA/cfa_cpa/IDEAFinBench" cpa
  for model in embedded embedded:1.5b; do
    "$FH" run bizbench/finknow --model "$model" --method all --sample 100 --seed 0 --data-dir "$DATA" \
      --out "finknow-${model/:/-}" --store mc.sqlite -q
    "$FH" run cfinbench --model "$model" --method all --split val --sample 100 --seed 0 --data-dir cpa \
      --out "cpa-${model/:/-}" --store mc.sqlite -q
  done
}

for step in $STEPS; do
  "$step"
done
