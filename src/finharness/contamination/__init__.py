"""Has the model seen the test? Membership evidence per item, validated before it is shown (docs/contamination.md).

- probes.py: the probes' arithmetic (Min-K%, Min-K%++, zlib, reference model, guided completion, option order).
- items.py: an item's text from a benchmark's Sample.
- evidence.py: the probes computed through model handles (every call stored: computed once per item and model).
- windows.py, split.py: the validation split of filings, one genre and one length on both sides.
- validation.py: each probe's AUC on that split per model, its status and threshold, kept in JSON files.
- impact.py: the share of a benchmark's items above a validated threshold and the score on seen vs unseen items.
- run.py: a benchmark's items probed and written to OUT/contamination.json (also for a suite's rows).
- cli.py: `finharness contamination TASK --model SPEC` and `--validate`.
"""
