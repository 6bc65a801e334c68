"""P2 and P3: a FinKnow log-likelihood exam (CFA items, 3 options) on Gemma-3-270M (run by hand).

    .venv/bin/python bench/ll_exam_bench.py p2 [--items 10] [--continuation letter]
    .venv/bin/python bench/ll_exam_bench.py p3 [--items 30]

P2 runs the same items, contexts and continuations two ways, one after the other:

- finharness: `finharness run bizbench/finknow --model llamacpp:GEMMA.gguf` (in-process llama.cpp,
  the shared context evaluated once per item and its KV cache reused), timed as a whole command;
- lm-eval 0.4.13: `lm_eval --model gguf --model_args base_url=...` against llama-cpp-python's server
  on the same GGUF and the same n_ctx (the server already up and loaded), with a multiple_choice task
  YAML written to a temp folder whose docs hold finharness's own contexts and continuations. lm-eval
  lives in its own venv (bench/setup_lmeval.sh); its `gguf` model sends context + continuation with
  echo=True for every choice. Gemma has a BOS token, so echo scoring is valid there.

It reports the wall-time ratio finharness / lm-eval and the share of items whose chosen answer agrees.

P3 counts the prompt tokens the llamacpp backend evaluates for the same kind of run and divides by the
minimum: each distinct context once, plus each continuation's tokens but its last (the last token is
scored from the row before it and never needs evaluating). Both continuation styles are run; the worse
ratio is the headline. Contexts of different items share a few leading tokens ('<bos>Question:'), which
the backend also reuses, so the ratio can dip below 1; `distinct_prefixes` (every distinct token prefix
once) is the floor with that sharing counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import DATA_DIR, FINHARNESS, Goal, Row, free_port, gemma_path, start_llama_cpp_server, stop, wait_until_up

from finharness.benchmarks.bizbench.finknow import FinKnowTask, ll_context

LMEVAL_VENV = Path(os.environ.get("FINHARNESS_LMEVAL_VENV")
                   or Path.home() / ".cache" / "finharness-bench" / "lmeval-venv")
TASK_NAME = "finharness_finknow_bench"
P2_GOAL = Goal("<=", 0.02)
P3_GOAL = Goal("<=", 1.1)


def finknow_items(items: int, continuation: str) -> tuple[FinKnowTask, list]:
    """The first ITEMS FinEval CFA-Easy items through finharness's own loader (3 options each)."""
    task = FinKnowTask(source="fineval", continuation=continuation)
    return task, task.load(DATA_DIR)[:items]


def needed_n_ctx(model: Path, task: FinKnowTask, samples: list) -> int:
    """The smallest multiple of 256 that holds every item's context and longest continuation; both
    sides get it (llama-cpp-python's echo logprobs cost grows with n_ctx, so a larger one would
    only slow lm-eval down)."""
    from finharness.backends.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend(model)
    longest = 0
    for sample in samples:
        context, continuations = backend.encode_request(ll_context(sample), task.continuations(sample))
        longest = max(longest, len(context) + max(len(c) for c in continuations))
    return 256 * (longest // 256 + 1)


# --- the finharness side ---------------------------------------------------------------------------

def run_finharness(model: Path, items: int, continuation: str, n_ctx: int, threads: int,
                   workdir: Path) -> dict[str, Any]:
    """`finharness run bizbench/finknow` as a user would type it; returns wall, choices and counts."""
    out = workdir / "finharness-run"
    command = [str(FINHARNESS), "run", "bizbench/finknow", "--model", f"llamacpp:{model}?n_ctx={n_ctx}&threads={threads}",
               "--limit", str(items), "-o", "source=fineval", "-o", f"continuation={continuation}",
               "--data-dir", str(DATA_DIR), "--out", str(out), "--quiet"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"finharness run failed ({done.returncode}): {done.stderr[-2000:]}")
    results = json.loads((out / "results.json").read_text())
    choices = {}
    for line in (out / "samples.jsonl").read_text().splitlines():
        record = json.loads(line)
        choices[record["id"]] = record["prediction"]["choice"]
    return {"command": " ".join(command), "wall_s": wall, "engine_wall_s": results["timing"]["wall_s"],
            "choices": choices, "accuracy": results["metrics"]["ll"]["value"],
            "tokens_evaluated": results["counts"]["tokens_evaluated"], "calls": results["counts"]["calls"]}


# --- the lm-eval side --------------------------------------------------------------------------------

TASK_YAML = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: choices
doc_to_target: gold
target_delimiter: ""
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""


def write_lmeval_task(task: FinKnowTask, samples: list, folder: Path) -> None:
    """A multiple_choice task whose docs carry finharness's contexts and continuations verbatim
    (target_delimiter '' so lm-eval requests exactly (context, ' A') as finharness does)."""
    data = folder / "items.jsonl"
    with data.open("w", encoding="utf-8") as handle:
        for sample in samples:
            handle.write(json.dumps({"id": sample.id, "context": ll_context(sample),
                                     "choices": list(task.continuations(sample)),
                                     "gold": "ABC".index(sample.target)}, ensure_ascii=False) + "\n")
    (folder / f"{TASK_NAME}.yaml").write_text(TASK_YAML.format(name=TASK_NAME, data=data), encoding="utf-8")


def run_lmeval(base_url: str, samples: list, folder: Path) -> dict[str, Any]:
    lm_eval = LMEVAL_VENV / "bin" / "lm_eval"
    if not lm_eval.exists():
        raise RuntimeError(f"lm-eval is not installed in {LMEVAL_VENV}: run `bash bench/setup_lmeval.sh`")
    out = folder / "lmeval-out"
    command = [str(lm_eval), "--model", "gguf", "--model_args", f"base_url={base_url}", "--tasks", TASK_NAME,
               "--include_path", str(folder), "--output_path", str(out), "--log_samples", "--batch_size", "1"]
    # Offline: the task's data is a local JSON file, and nothing else may be fetched.
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"lm_eval failed ({done.returncode}): {done.stderr[-3000:]}")
    logged = sorted(out.rglob(f"samples_{TASK_NAME}_*.jsonl"))
    if not logged:
        raise RuntimeError(f"lm_eval wrote no samples file under {out}; stderr: {done.stderr[-2000:]}")
    choices, correct = {}, 0
    for line in logged[-1].read_text().splitlines():
        record = json.loads(line)
        # filtered_resps: one (logprob, is_greedy) per choice; the first best wins ties, as in finharness.
        logprobs = [float(resp[0]) for resp in record["filtered_resps"]]
        best = max(range(len(logprobs)), key=logprobs.__getitem__)
        choices[samples[record["doc_id"]].id] = "ABC"[best]
        correct += float(record["acc"])
    return {"command": " ".join(command), "wall_s": wall, "choices": choices, "accuracy": correct / len(choices)}


def lmeval_version() -> str:
    done = subprocess.run([str(LMEVAL_VENV / "bin" / "python"), "-c",
                           "from importlib.metadata import version; print(version('lm_eval'))"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "?"


def p2(items: int = 10, continuation: str = "letter", threads: int | None = None) -> Row:
    """finharness vs lm-eval on the same ITEMS FinKnow items (3 requests each on lm-eval's side)."""
    threads = threads or os.cpu_count() or 1
    model = gemma_path()
    task, samples = finknow_items(items, continuation)
    n_ctx = needed_n_ctx(model, task, samples)
    workdir = Path(tempfile.mkdtemp(prefix="finharness-p2-"))
    write_lmeval_task(task, samples, workdir)
    ours = run_finharness(model, items, continuation, n_ctx, threads, workdir)
    port = free_port()
    server = start_llama_cpp_server(model, port, n_ctx=n_ctx, threads=threads)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/v1", server)
        theirs = run_lmeval(f"http://127.0.0.1:{port}", samples, workdir)
    finally:
        stop(server)
    agree = sum(ours["choices"][s.id] == theirs["choices"].get(s.id) for s in samples) / len(samples)
    ratio = ours["wall_s"] / theirs["wall_s"]
    requests = sum(len(s.input["options"]) for s in samples)
    return Row("P2", f"LL exam, {len(samples)} FinKnow items, Gemma-3-270M",
               f"finharness {ours['wall_s']:.1f} s (engine {ours['engine_wall_s']:.1f} s)",
               f"lm-eval {lmeval_version()} {theirs['wall_s']:.1f} s ({theirs['wall_s'] / requests:.1f} s/request)",
               ratio, P2_GOAL, condition=f"same choice {agree:.0%}", condition_met=agree == 1.0,
               details={"items": len(samples), "lm_eval_requests": requests, "continuation": continuation,
                        "n_ctx": n_ctx, "threads": threads, "agreement": agree,
                        "finharness": {k: v for k, v in ours.items() if k != "choices"},
                        "lm_eval": {k: v for k, v in theirs.items() if k != "choices"},
                        "choices": {s.id: [ours["choices"][s.id], theirs["choices"].get(s.id)] for s in samples},
                        "workdir": str(workdir)})


# --- P3 ------------------------------------------------------------------------------------------------

async def evaluated_vs_minimum(model: Path, items: int, continuation: str, threads: int) -> dict[str, Any]:
    """Run FinKnow through run_task on the llamacpp backend; count evaluated and minimum tokens."""
    from finharness.backends.llamacpp import from_spec
    from finharness.core.runner import RunOptions, run_task
    from finharness.core.store import RunStore

    task, samples = finknow_items(items, continuation)
    n_ctx = needed_n_ctx(model, task, samples)
    backend = from_spec(f"llamacpp:{model}?n_ctx={n_ctx}&threads={threads}")
    contexts: dict[tuple[int, ...], None] = {}
    pieces: dict[tuple[tuple[int, ...], tuple[int, ...]], None] = {}
    for sample in samples:  # dicts as ordered sets: each distinct context, and (context, continuation), once
        context, continuations = backend.encode_request(ll_context(sample), task.continuations(sample))
        contexts[tuple(context)] = None
        pieces.update({(tuple(context), tuple(tokens)): None for tokens in continuations})
    minimum = sum(map(len, contexts)) + sum(len(tokens) - 1 for _, tokens in pieces)
    # With perfect prefix sharing across items too: every distinct token prefix once (a trie's nodes).
    prefixes = {sequence[:end] for sequence in [*contexts, *(c + t[:-1] for c, t in pieces)]
                for end in range(1, len(sequence) + 1)}
    with tempfile.TemporaryDirectory(prefix="finharness-p3-") as tmp:
        store = RunStore(Path(tmp) / "store.sqlite")
        try:
            started = time.perf_counter()
            result = await run_task(task, {"model": backend}, store, RunOptions(data_dir=DATA_DIR, limit=items), out_dir=None)
            wall = time.perf_counter() - started
        finally:
            store.close()
            await backend.aclose()
    evaluated = result.results["counts"]["tokens_evaluated"]
    naive = sum(len(context) * sum(1 for c, _ in pieces if c == context) + sum(len(t) for c, t in pieces if c == context)
                for context in contexts)
    return {"continuation": continuation, "items": len(samples), "evaluated": evaluated, "minimum": minimum,
            "ratio": evaluated / minimum, "distinct_prefixes": len(prefixes), "naive_every_choice_from_scratch": naive, "wall_s": round(wall, 2)}


def p3(items: int = 30, threads: int | None = None) -> Row:
    threads = threads or os.cpu_count() or 1
    model = gemma_path()
    runs = [asyncio.run(evaluated_vs_minimum(model, items, style, threads)) for style in ("letter", "text")]
    worst = max(runs, key=lambda run: run["ratio"])
    return Row("P3", f"LL tokens computed ÷ minimum, {items} FinKnow items",
               "; ".join(f"{r['continuation']}: {r['evaluated']} evaluated" for r in runs),
               "; ".join(f"minimum {r['minimum']}, naive {r['naive_every_choice_from_scratch']}" for r in runs),
               worst["ratio"], P3_GOAL, details={"runs": runs, "threads": threads, "headline": "the worse style"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=["p2", "p3"])
    parser.add_argument("--items", type=int)
    parser.add_argument("--continuation", choices=["letter", "text"], default="letter", help="P2 only")
    parser.add_argument("--threads", type=int)
    args = parser.parse_args()
    if args.which == "p2":
        row = p2(args.items or 10, args.continuation, args.threads)
    else:
        row = p3(args.items or 30, args.threads)
    print(json.dumps(row.to_json(), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
