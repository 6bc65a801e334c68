"""`finharness fintradebench build`: making a FinTradeBench-style question set that can be trusted at scale.

Phases (each resumable: every model call goes through the run store, OUT/store.sqlite):
  candidates.py  phase 1 -- N = 6 candidate answers per question and model (TELeR levels L0, L2-L6 of the
                 ideal-context pipeline; L0 = the data contexts and the question, no instruction), and
                 intra-model self-filtering: each model picks its own best with the release's prompt.
  audit.py       the numerical audit -- every number in an answer matched to a metric, ticker and date and
                 checked against the signals, prices and point-in-time fundamentals (SUPPORTED /
                 CONTRADICTED / NOT_FOUND within max(2% relative, the claim's own rounding)).
  pipeline.py    orchestration: questions.jsonl, candidates.jsonl, selected.jsonl, audit.jsonl, judged.jsonl
                 (the release's rubric judge, judge.py) and build.json (counts and wall time per phase).
  scale.py       phase 3 -- the seed questions rewritten across NASDAQ-100 tickers and dates (scaling.py).
  calibration.py phase 2 and metrics.py (construction metrics, Eq. 1-10) read these files.
  cli.py         the `build` command group: candidates, audit, judge, scale, run (+ calibrate, metrics).
"""
