"""Config drift: change a generation parameter, the prompt, the data or the model between two runs in
one store, and nothing stale is reused; an identical rerun reuses everything.

The rule checked for every benchmark: a drifted run in the shared store ends exactly as the same run
in an empty store, and it computes exactly the calls that the first run had not already made
(counted with the fake backend's call log). Where a drift changes every request (max_tokens, shots,
levels, another model) that means every call is new.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from typer.testing import CliRunner

from finharness.backends.llamacpp import LlamaCppBackend
from finharness.core.hashing import content_key
from finharness.core.types import GenerateRequest, Message, to_jsonable

from ..benchmarks.test_cfinbench_task import EXAM, write_exam
from ..benchmarks.test_fintradebench_task import verdict
from ._runs import fake_spec, logged, run_outcome


def invoke(args: list[str], cwd: Path) -> dict[str, Any]:
    """`finharness ARGS` in this process (drift needs no crash), run in `cwd`; returns the run's outcome."""
    from finharness.cli import app

    with contextlib.chdir(cwd):
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{args}\n{result.output}\n{result.exception!r}"
    return run_outcome(cwd / args[args.index("--out") + 1])


@dataclass(frozen=True)
class Drift:
    """One benchmark's command and what changes between the two runs."""

    benchmark: str
    what: str
    """'generation parameter', 'prompt', 'model', 'data', 'scoring only'."""
    base: list[str]
    changed: list[str]
    every_request_changes: bool = True
    """The change reaches every request (else some calls are legitimately shared)."""


def fake(name: str, **options: str) -> str:
    return fake_spec(name, log=Path(f"{name}.log"), **options)


def with_model(args: list[str], spec: str, role: str = "--model") -> list[str]:
    return [*args, role, spec]


def drifts(workdir: Path, data: Path) -> list[Drift]:
    exam = write_exam(workdir / "exam")
    cfin = ["run", "cfinbench", "--data-dir", str(exam)]
    tatqa = ["run", "bizbench/tatqa-e", "--data-dir", str(data), "--limit", "3"]
    (workdir / "user.jsonl").write_text(json.dumps({"match": "<Consultation Ended>", "reply": "<Consultation Ended>"})
                                        + "\n", encoding="utf-8")
    ucfe = ["run", "ucfe", "--data-dir", str(data), "-o", "tasks=Analyst", "--limit", "2",
            "--user-model", fake("user", script="user.jsonl", reply="One more question, please.")]
    (workdir / "judge.jsonl").write_text(json.dumps({"match": "", "reply": verdict(3)}) + "\n", encoding="utf-8")
    ftb = ["run", "fintradebench", "--data-dir", str(data), "-o", "per_category=1", "-o", "judge_context=none",
           "--judge", fake("judge", script="judge.jsonl")]
    m = fake("model")
    return [
        Drift("demo", "model", with_model(["run", "demo"], m), with_model(["run", "demo"], fake("other"))),
        Drift("demo", "generation parameter", with_model(["run", "demo"], m),
              with_model(["run", "demo", "-o", "max_tokens=32"], m)),
        Drift("CFinBench", "generation parameter", with_model(cfin, m), with_model([*cfin, "-o", "max_tokens=64"], m)),
        Drift("CFinBench", "prompt (shots)", with_model(cfin, m), with_model([*cfin, "--shots", "3"], m)),
        Drift("CFinBench", "prompt (method ll)", with_model(cfin, m),
              with_model([*cfin, "--method", "ll", "-o", "types=single_choice"], m)),
        Drift("CFinBench", "scoring only (extract)", with_model(cfin, m), with_model([*cfin, "--extract", "robust"], m),
              every_request_changes=False),
        Drift("BizBench", "generation parameter", with_model(tatqa, m),
              with_model([*tatqa, "-o", "max_tokens=128"], m)),
        Drift("BizBench", "model", with_model(tatqa, m), with_model(tatqa, fake("other"))),
        Drift("UCFE", "generation parameter", with_model(ucfe, m), with_model([*ucfe, "-o", "max_tokens=256"], m),
              every_request_changes=False),  # the simulator's opening message does not depend on the model
        Drift("UCFE", "model", with_model(ucfe, m), with_model(ucfe, fake("other")), every_request_changes=False),
        Drift("FinTradeBench", "prompt (levels)", with_model(ftb, m), with_model([*ftb, "-o", "levels=L1,L2"], m),
              every_request_changes=False),  # L1 and L2 answers are shared
        # the judge is asked the same thing when the answers come out the same
        Drift("FinTradeBench", "generation parameter", with_model(ftb, m),
              with_model([*ftb, "-o", "max_tokens=512"], m), every_request_changes=False),
    ]


DRIFT_IDS = ["demo-model", "demo-gen", "cfinbench-gen", "cfinbench-shots", "cfinbench-ll", "cfinbench-extract",
             "bizbench-gen", "bizbench-model", "ucfe-gen", "ucfe-model", "fintradebench-levels", "fintradebench-gen"]


def keys(workdir: Path) -> Counter:
    return Counter(line["key"] for line in logged(*workdir.glob("*.log")))


def check_drift(drift: Drift, workdir: Path, tally: Callable[..., None]) -> None:
    shared, fresh = workdir / "shared", workdir / "fresh"
    for d in (shared, fresh):
        d.mkdir()
        for name in ("user.jsonl", "judge.jsonl"):
            if (workdir / name).exists():
                shutil.copy(workdir / name, d / name)
    store = ["--store", "store.sqlite", "-q"]
    first = invoke([*drift.base, "--out", "first", *store], shared)
    made_first = keys(shared)
    assert invoke([*drift.base, "--out", "again", *store], shared) == first
    assert keys(shared) == made_first, "an identical rerun must make no call"
    drifted = invoke([*drift.changed, "--out", "drifted", *store], shared)
    made_drifted = keys(shared) - made_first
    alone = invoke([*drift.changed, "--out", "alone", *store], fresh)
    needed = keys(fresh)
    tally(f"config drift: {drift.what} ({drift.benchmark})", injected=1,
          completed=int(drifted["status"] == "complete"),
          lost=len(set(alone["samples"]) - set(drifted["samples"])), repeated=len(set(made_drifted) & set(made_first)),
          runs=1)
    assert drifted == alone, "the drifted run must end exactly as the same run in an empty store"
    assert drifted["run_key"] != first["run_key"]
    assert set(made_drifted) == set(needed) - set(made_first), "exactly the calls not made before"
    if drift.every_request_changes:
        assert not set(needed) & set(made_first) and made_drifted, "every request changed: every call is new"


@pytest.mark.parametrize("index", range(len(DRIFT_IDS)), ids=DRIFT_IDS)
def test_config_drift_reuses_nothing_stale(index, tmp_path, shared_data, reliability_tally):
    drift = drifts(tmp_path, shared_data)[index]
    check_drift(drift, tmp_path, reliability_tally)


def test_edited_exam_in_the_same_layout_is_not_resumed(tmp_path, reliability_tally):
    """Another exam (or an edited question) under the same ids: its samples are solved, not resumed."""
    old, new = write_exam(tmp_path / "old"), tmp_path / "new"
    edited = {name: [dict(item, text=f"（改）{item['text']}") if i == 0 else item for i, item in enumerate(items)]
              for name, items in EXAM.items()}
    write_exam(new, edited)
    drift = Drift("CFinBench", "data (edited question)",
                  ["run", "cfinbench", "--data-dir", str(old), "--model", fake("model")],
                  ["run", "cfinbench", "--data-dir", str(new), "--model", fake("model")], every_request_changes=False)
    check_drift(drift, tmp_path, reliability_tally)


@pytest.mark.parametrize("task,prompt_file,extra", [("bizbench/tatqa-e", "tatqa_e.json", []),
                                                     ("bizbench/finknow", "finknow.json", ["--method", "gen"])])
def test_edited_bizbench_prompt_file_is_not_reused(task, prompt_file, extra, tmp_path, shared_data,
                                                    reliability_tally):
    """The official prompt files are data: an edited system message must give new calls, not old samples."""
    prompts = tmp_path / "prompts"
    shutil.copytree(shared_data / "bizbench" / "prompts", prompts)
    args = ["run", task, "--data-dir", str(shared_data), "--limit", "3", "-o", f"prompts={prompts}", *extra,
            "--model", fake("model")]
    shared = tmp_path / "shared"
    shared.mkdir()
    store = ["--store", "store.sqlite", "-q"]
    first = invoke([*args, "--out", "first", *store], shared)
    made_first = keys(shared)
    path = prompts / prompt_file
    document = json.loads(path.read_text(encoding="utf-8"))
    document["system_message"] += " Answer in [[double brackets]]."
    path.write_text(json.dumps(document), encoding="utf-8")
    edited = invoke([*args, "--out", "edited", *store], shared)
    made_edited = keys(shared) - made_first
    reliability_tally(f"config drift: prompt file edited ({task})", injected=1,
                      completed=int(edited["status"] == "complete"),
                      lost=0, repeated=0, runs=1)
    assert edited["run_key"] != first["run_key"]
    assert sum(made_edited.values()) == len(edited["samples"]), "every sample must be asked with the new prompt"


# --- the model file ----------------------------------------------------------------------------------

@pytest.fixture
def no_model_load(monkeypatch, tmp_path):
    """llama.cpp identities without loading a model: the chat template is stubbed, the hash cache is private."""
    monkeypatch.setenv("FINHARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(LlamaCppBackend, "chat_template", lambda self: "{{ messages }}")


def call_key(model_file: Path) -> str:
    backend = LlamaCppBackend(model_file)
    request = GenerateRequest((Message("user", "What is EBITDA?"),))
    return content_key(dict(backend.identity()), "generate", to_jsonable(request))


def test_llamacpp_identity_follows_the_model_file(no_model_load, tmp_path, reliability_tally):
    a, b, copy = tmp_path / "a.gguf", tmp_path / "b.gguf", tmp_path / "copy-of-a.gguf"
    a.write_bytes(b"GGUF" + bytes(range(200)))
    b.write_bytes(b"GGUF" + bytes(reversed(range(200))))  # same size, other weights
    shutil.copy(a, copy)
    key_a = call_key(a)
    assert call_key(a) == key_a, "the same file must keep its calls"
    assert call_key(copy) == key_a, "identity is the content, not the path"
    assert call_key(b) != key_a, "other weights must never reuse calls"
    # the same path rewritten in place, same size and the old mtime put back (cp -p, tar x, rsync -t)
    stat = a.stat()
    a.write_bytes(b.read_bytes())
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert a.stat().st_size == stat.st_size and a.stat().st_mtime_ns == stat.st_mtime_ns
    rewritten = call_key(a)
    reliability_tally("config drift: model file (llamacpp identity)", injected=2, completed=1, lost=0,
                      repeated=int(rewritten == key_a), runs=1)
    assert rewritten != key_a and rewritten == call_key(b), "a rewritten model file must not reuse the old hash"
