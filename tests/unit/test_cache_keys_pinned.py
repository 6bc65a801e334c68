"""Call-cache keys pinned byte for byte across the module restructuring of issue 20 (item 2).

Every key below was computed by the harness *before* its modules moved (cli helpers into one
module, the pooled run into core/, fintradebench/build/ renamed construction/, the root helper
modules folded): a run store written before the move must answer every call after it. The keys
cover the backend identity (fake, a renamed fake, the embedded model), both call kinds, and the
requests a real task (demo) renders from its prompts. A changed key here means old stores miss:
never update a value to make this pass.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from finharness.backends import from_spec
from finharness.benchmarks.registry import make_task, task_class
from finharness.core.model import CachedModel, RunCounters
from finharness.core.runner import RunOptions, run_task
from finharness.core.store import RunStore
from finharness.core.types import GenerateParams, GenerateRequest, LoglikelihoodRequest, Message

GENERATE = GenerateRequest(
    (Message("system", "You are a careful financial analyst."),
     Message("user", "营业收入同比增长多少？ Revenue rose from $1,200 to $1,380; give the % change.")),
    GenerateParams(max_tokens=64, temperature=0.0, stop=("\n\n",), seed=7), 0)
GENERATE_PLAIN = GenerateRequest((Message("user", "Answer A, B, C or D."),), GenerateParams(), 2)
LOGLIKELIHOOD = LoglikelihoodRequest("Question: Which ratio measures liquidity?\nAnswer:", (" A", " B", " C", " D"))
REQUESTS = (("generate", GENERATE), ("generate", GENERATE_PLAIN), ("loglikelihood", LOGLIKELIHOOD))

PINNED = {  # spec -> the keys of REQUESTS, in order (computed before the move)
    "fake": ("a18d705c5610d8d272f1dc3e2495932339368a1f8c5aca35b14df26a6d9fd26b",
             "258dadc0cafa9e3a40f1eb5de1925ff33d5f0345e6c658e7d96fea1844f400f3",
             "cfd10173257204f8ab65433b03853d0bdf49e721c20262b5689fbacbfde8e97f"),
    "fake?name=judge": ("e3e77594c1b99942837a31fb4e3edeafc01737a4b84a72d2a26d227f2166f307",
                        "adea49ef41bcdd64ceb8d7b25cfdb695e40644f5eee404ecfcca1cab6d12a3ff",
                        "ebc0077677c51eeb185a094c1698adbde5b2ac2eb032a74e64f9d2be8fc354ec"),
}
PINNED_EMBEDDED = ("0b46d7b6d4c9190347d90e3ae6537ff1de234018d6ce737ab76d397a410d2ea8",
                   "b67e274a3ebffa70c8ffa99575246ddb3259d2e0df7e53a4d5137f15d05d2914",
                   "7a0735c7edd40b4c74f61ae2bfad7a1423feb97d1c2d99ea768d126d8d199b26")
"""`embedded` (Qwen2.5-Coder-0.5B Q4_K_M under llama-cpp-python 0.3.36): the identity names the engine
version, the weights' sha256 and the chat template."""

DEMO_CALLS = 12
DEMO_KEYS_SHA256 = "7c862e6771bd06df120c4c82d7dc1bf37b56cbaa177df17e7760f86e54f79f82"
"""sha256 of the demo task's 12 call keys on `fake` (sorted, one a line): its prompts as rendered before the move."""
DEMO_FIRST_KEYS = ("01e9c30cf94e2f64f94e15d5183f07bb837eced8d6f47609fc0b201fdaa89fc3",
                   "2f8b92deea20010918b2dde3b80fe6a9fbcac361ffb104c775c599120ae44244")


async def _ask(model: CachedModel) -> None:
    for kind, request in REQUESTS:
        await (model.generate(request) if kind == "generate" else model.loglikelihood(request))


@pytest.mark.parametrize("spec", sorted(PINNED))
def test_calls_are_stored_under_their_pinned_keys_and_a_store_answers_them_again(spec: str, tmp_path: Path):
    store = RunStore(tmp_path / "store.sqlite")
    try:
        first = RunCounters()
        asyncio.run(_ask(CachedModel(from_spec(spec), store, first)))
        stored = {(c["kind"], c["request"].get("sample_index", c["request"].get("context"))): c["key"]
                  for c in store.iter_calls()}
        assert first.calls == 3 and first.cache_hits == 0
        assert stored == {("generate", 0): PINNED[spec][0], ("generate", 2): PINNED[spec][1],
                          ("loglikelihood", LOGLIKELIHOOD.context): PINNED[spec][2]}
        again = RunCounters()  # a fresh backend on the same store: every call answered from it
        asyncio.run(_ask(CachedModel(from_spec(spec), store, again)))
        assert (again.calls, again.cache_hits) == (0, 3)
    finally:
        store.close()


class _KeyRecorder:
    """A run store that records the keys looked up and stops the call there (the model never runs)."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def get_call(self, key: str) -> None:
        self.keys.append(key)
        raise LookupError(key)


@pytest.mark.model
def test_the_embedded_model_keys_its_calls_as_before():
    recorder = _KeyRecorder()
    model = CachedModel(from_spec("embedded"), recorder, RunCounters())  # type: ignore[arg-type]
    for kind, request in REQUESTS:
        with pytest.raises(LookupError):
            asyncio.run(model.generate(request) if kind == "generate" else model.loglikelihood(request))
    assert tuple(recorder.keys) == PINNED_EMBEDDED


def test_a_task_renders_the_same_requests(tmp_path: Path):
    store = RunStore(tmp_path / "store.sqlite")
    try:
        task = make_task(task_class("demo"), {})
        asyncio.run(run_task(task, {"model": from_spec("fake")}, store, out_dir=None))
        keys = sorted(c["key"] for c in store.iter_calls())
    finally:
        store.close()
    assert len(keys) == DEMO_CALLS
    assert tuple(keys[:2]) == DEMO_FIRST_KEYS
    assert hashlib.sha256("\n".join(keys).encode()).hexdigest() == DEMO_KEYS_SHA256


# --- run keys (issue 28: a store made before the house's second pass resumes every run after it) -----------------

PINNED_RUN_KEYS = {  # task, options -> the run key computed by the code at 64ceb59 (the code fingerprint pinned)
    ("demo", ()): "fb8342d7c2673de7daa129c3eab0fe1850b6c3fbadce373aa7b8d62d9a902fd6",
    ("demo", (("method", "ll"),)): "1d03b86e1c08a828ef10ed06b00653c80ef4e033c5d357e70a2a66a4b7d93c64",
    ("ucfe", (("tasks", "0_股价预测"), ("max_rounds", 3))):
        "a04483660aad862d70abeabc4e48bd1099fa729f6258c5cd2b54aba176363a0a",
    ("fintradebench", (("per_category", 1),)): "abba5e1d449de4256cc09481ff64e8d4099dc7038f4e8302d96e3665023d7e91",
    ("bizbench/finknow", (("source", "fineval"),)): "e76db7e1d5b6273b9cb2b28cd37771a27d2928587dcc36d70df2850f1ebba537",
    ("bizbench/formulaeval", (("cases", 5),)): "51774431e4991dee88876f06e391c3d430eab81e2342dd0c9f1dfd59a68030e8",
}
"""Each on the fake backend (model, judge `fake?name=judge`, user `fake?name=user`), --limit 1, the shared data where
the task reads data. The typed options, the data-root helper and the runner's split changed none of them."""


@pytest.mark.parametrize("task_name, options", sorted(PINNED_RUN_KEYS))
def test_run_keys_are_those_of_the_code_before_the_second_pass(task_name, options, tmp_path, shared_data, monkeypatch):
    import finharness.core.results as results
    import finharness.core.runner as runner

    monkeypatch.setattr(results, "code_fingerprint", lambda: "pinned-code")
    monkeypatch.setattr(runner, "code_fingerprint", lambda: "pinned-code")
    task = make_task(task_class(task_name), dict(options))
    backends = {"model": from_spec("fake"), "judge": from_spec("fake?name=judge"), "user": from_spec("fake?name=user")}
    data = None if task_name in ("demo", "bizbench/formulaeval") else shared_data
    store = RunStore(tmp_path / "store.sqlite")
    try:
        result = asyncio.run(run_task(task, {r: b for r, b in backends.items() if r in task.roles}, store,
                                      RunOptions(data_dir=data, limit=1)))
    finally:
        store.close()
    assert result.results["run_key"] == PINNED_RUN_KEYS[(task_name, options)]
