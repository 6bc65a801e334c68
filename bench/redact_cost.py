"""What the one redaction step (finharness/redact.py) costs on a realistic run's rows, before and after a change.

Runs `finharness run bizbench/tatqa-e --model fake` (table prompts of ~2-10 KB, the prompt exactly as sent and the
trace in every sample line) into a temporary folder, then times `redact` on what a run redacts: each samples.jsonl
line, each row the store keeps (request and response JSON), the whole samples.jsonl text at once (written so at
the run's end) and each line the run printed, with the keys a developer's machine holds set (OpenAI project key, Anthropic, Hugging Face, GitHub;
random, seeded), against the redact.py of another revision (`--before REV`, read with `git show`).

    .venv/bin/python bench/redact_cost.py --before 592f2db --limit 300

Not part of the package: bench/ is run by hand.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import sqlite3
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DATA_DIR = Path(os.environ.get("FINHARNESS_DATA_DIR") or REPO.parent / "shared" / "data")


def planted_keys(seed: int = 34) -> dict[str, str]:
    """Keys in the shapes providers issue them, random."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits

    def token(n: int, extra: str = "") -> str:
        return "".join(rng.choice(alphabet + extra) for _ in range(n))

    return {"OPENAI_API_KEY": "sk-proj-" + token(156, "-_"), "ANTHROPIC_API_KEY": "sk-ant-api03-" + token(95, "-_"),
            "HF_TOKEN": "hf_" + token(34), "GITHUB_TOKEN": "ghp_" + token(36)}


def load_redact(source: str, name: str) -> Callable[[str], str]:
    """`redact` of a redact.py given as its source text, loaded as its own module."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(name, handle.name)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    os.unlink(handle.name)
    return module.redact


def rows_of(run: Path) -> tuple[list[str], list[str], str]:
    """(samples.jsonl lines, store texts (each call's request and response JSON), the whole samples.jsonl)."""
    samples = next(run.rglob("samples.jsonl")).read_text(encoding="utf-8")
    with sqlite3.connect(run / "store.sqlite") as conn:
        stored = [text for row in conn.execute("SELECT request, response FROM calls") for text in row]
    return samples.splitlines(), stored, samples


def per_text(redacts: list[Callable[[str], str]], texts: list[str], rounds: int) -> list[float]:
    """For each redact, the median over `rounds` of the seconds to redact every text once; the redacts take turns
    round by round, so that a busy machine slows them alike."""
    times: list[list[float]] = [[] for _ in redacts]
    for _ in range(rounds):
        for redact, spent in zip(redacts, times):
            started = time.perf_counter()
            for text in texts:
                redact(text)
            spent.append(time.perf_counter() - started)
    return [sorted(spent)[len(spent) // 2] for spent in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="HEAD", help="git revision whose redact.py is the baseline")
    parser.add_argument("--limit", type=int, default=300, help="tatqa-e samples in the run")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    os.environ.update(planted_keys())
    before_source = subprocess.run(["git", "show", f"{args.before}:src/finharness/redact.py"], cwd=REPO, check=True,
                                   capture_output=True, text=True).stdout
    before = load_redact(before_source, "redact_before")
    after = load_redact((REPO / "src" / "finharness" / "redact.py").read_text(encoding="utf-8"), "redact_after")
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "FINHARNESS_STORE"}
        printed = subprocess.run([sys.executable, "-m", "finharness", "run", "bizbench/tatqa-e", "--model", "fake",
                                  "--data-dir", str(DATA_DIR), "--limit", str(args.limit), "--out", f"{tmp}/run"],
                                 check=True, env={**env, "COLUMNS": "120"}, capture_output=True, text=True)
        lines, stored, whole = rows_of(Path(tmp) / "run")
    said = [line + "\n" for line in (printed.stdout + printed.stderr).splitlines()]
    assert after(whole) == whole and before(whole) == whole, "a planted key in the run's text: nothing to compare"
    table = []
    for what, texts in (("samples.jsonl line", lines), ("store row (request or response JSON)", stored),
                        ("whole samples.jsonl", [whole]), ("a line printed by the run", said)):
        size = sum(map(len, texts)) / len(texts)
        old, new = (seconds / len(texts) * 1e6 for seconds in per_text([before, after], texts, args.rounds))
        table.append({"text": what, "n": len(texts), "mean_chars": round(size), "before_us": round(old, 1),
                      "after_us": round(new, 1), "ratio": round(new / old, 2)})
    print(json.dumps({"keys": {k: len(v) for k, v in planted_keys().items()}, "before": args.before,
                      "rows": table}, indent=2))


if __name__ == "__main__":
    main()
