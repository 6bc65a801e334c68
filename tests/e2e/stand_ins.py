"""What the documented commands run against (tests/e2e/test_docs_commands.py, test_error_hints.py): local stand-ins
of every outside service, a private cache, and data roots that read as the shared data.

- an OpenAI-compatible server (also Anthropic's Messages route; tests/servers/fault_server.py, healthy) answering
  each role as a model must for the run to finish (`server_answer`), the reasoning-model stand-in
  (tests/servers/provider_stubs.py) and the vLLM-shaped completions stand-in (ToyModel);
- the Hugging Face Hub with kensho/bizbench at the pinned commit (small parquet files in the official layout) and
  GitHub's raw host serving every registered file from the shared data (HF_ENDPOINT, FINHARNESS_GITHUB_RAW);
- `invoke`: a command run in-process (typer's CliRunner) in a folder, as its own process would run it;
- FINHARNESS_CACHE a private folder (the registry lock a stand-in pull writes stays there) whose derived caches
  are the user's (LINKED_CACHES); no proxy, no API key.
"""

from __future__ import annotations

import contextlib
import json
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from typer.testing import CliRunner

from finharness.cli import app
from finharness.data import registry

from ..benchmarks.test_cfinbench_task import write_exam
from ..conftest import REPO
from ..servers.completions_stub import ToyModel, completions_server
from ..servers.data_hosts import hub_server, raw_server
from ..servers.fault_server import fault_server
from ..servers.provider_stubs import provider_server
from ..unit.test_data_pull_hosts import PIN, PINNED_FILES

SHARED = Path(os.environ.get("FINHARNESS_DATA_DIR") or REPO.parent / "shared" / "data")
"""The shared benchmark data (read-only)."""

JUDGE_VERDICT = ('{"indicator_analysis": {"found_indicators": ["RSI"], "total_golden_indicators": 3, '
                 '"indicators_found_count": 1}, "bias_analysis": {"trading_signals_score": 3, '
                 '"fundamental_score": 2}, "overall_quality": {"correctness_score": 3, "reasoning_score": 2}}\n'
                 "Verdict: [[1]]")
"""The fake judge's one reply: a FinTradeBench rubric verdict (not the rubric's example) and a UCFE verdict."""


def server_answer(body: Mapping[str, Any]) -> str:
    """The local OpenAI-compatible server's reply: a rubric verdict to FinTradeBench's judge, `[[1]]` to UCFE's, a
    letter to anything else (an answer that copied the verdict would be refused by the judges as an echo)."""
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    if "correctness_score" in text:
        return JUDGE_VERDICT
    return "[[1]]" if "fair judge" in text else "答案：A"


LINKED_CACHES = ("models", "hashes", "filings", "retrieval", "bizbench", "standins")
"""Derived caches, keyed by content, shared with the user's cache (~/.cache/finharness) so a session does not
rebuild the embedded model, parsed filings, their embeddings or SEC-Num; the registry lock stays private (a pull
from the stand-in Hub records its files' checksums there)."""


def raw_mirror_router(shared: Path) -> Callable[[str, str], tuple[int, dict[str, str], bytes | None]]:
    """GitHub's raw host as the registry names it (each file's URL, or its unconfirmed upstream path at the
    dataset's commit), answered from the shared data's copy of that file."""
    files: dict[str, Path] = {}
    for dataset in registry.load_registry():
        for file in dataset.files:
            url = dataset.candidate_url(file)
            if url and url.startswith(registry.GITHUB_RAW):
                files[url[len(registry.GITHUB_RAW):]] = dataset.local_path(shared, file)

    def route(method: str, path: str) -> tuple[int, dict[str, str], bytes | None]:
        local = files.get(path)
        if local is None or not local.is_file():
            return 404, {}, None
        return 200, {}, local.read_bytes()

    return route


@dataclass
class StandIns:
    """What every command runs against."""

    tmp: Path
    openai: str
    """Base URL of the OpenAI-compatible (and Anthropic Messages) server."""
    reasoning: str
    completions: str
    judge_script: Path
    env: Mapping[str, str]
    """The environment every command runs in: set for each test that uses the stand-ins (tests/e2e/conftest.py),
    never for the session, so the tests that run after these see the machine's own."""
    unset: tuple[str, ...]
    """Variables removed for those tests (proxies, keys, offline switches)."""


def shared_view(root: Path) -> Path:
    """A writable data root that reads as the shared data: each dataset folder a link, bizbench/ a folder of links
    (a pull puts its parquet there)."""
    root.mkdir(parents=True, exist_ok=True)
    for entry in SHARED.iterdir():
        if entry.name == "bizbench":
            (root / "bizbench").mkdir(exist_ok=True)
            for part in entry.iterdir():
                if part.name != "data":
                    (root / "bizbench" / part.name).symlink_to(part)
        elif entry.is_dir():
            (root / entry.name).symlink_to(entry)
    return root


def exam_view(root: Path) -> Path:
    """The shared view with a CFinBench-layout exam in cfinbench/ (the questions the pages mean by DATA_ROOT)."""
    shared_view(root)
    (root / "cfinbench").unlink()
    (root / "cfinbench").mkdir()
    for entry in (SHARED / "cfinbench").iterdir():
        (root / "cfinbench" / entry.name).symlink_to(entry)
    return write_exam(root)


def private_cache(folder: Path) -> Path:
    user = Path.home() / ".cache" / "finharness"
    folder.mkdir(parents=True)
    for name in LINKED_CACHES:
        (user / name).mkdir(parents=True, exist_ok=True)
        (folder / name).symlink_to(user / name)
    return folder


@contextlib.contextmanager
def running(tmp: Path) -> Iterator[StandIns]:
    """Every stand-in started, and the environment every command runs in, for the block (`tmp`: their files)."""
    with contextlib.ExitStack() as stack:
        unset = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "HF_TOKEN",
                 "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HOME", "FINHARNESS_NO_PULL", "FINHARNESS_STORE",
                 "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "XDG_CACHE_HOME")
        env = {"NO_PROXY": "127.0.0.1,localhost", "FINHARNESS_CACHE": str(private_cache(tmp / "cache")),
               "HF_HUB_CACHE": str(tmp / "hf"), "HF_HUB_DISABLE_PROGRESS_BARS": "1", "COLUMNS": "160"}
        hub = stack.enter_context(hub_server())
        hub.commit("kensho/bizbench", PINNED_FILES, sha=PIN, ref=None)
        env["HF_ENDPOINT"] = hub.url
        raw = stack.enter_context(raw_server())
        raw.router = raw_mirror_router(SHARED)
        env["FINHARNESS_GITHUB_RAW"] = raw.url
        openai = stack.enter_context(fault_server(responder=server_answer))
        reasoning = stack.enter_context(provider_server("openai-reasoning", think=8))
        completions = stack.enter_context(completions_server(ToyModel()))
        judge_script = tmp / "judge.jsonl"
        judge_script.write_text(json.dumps({"match": "", "reply": JUDGE_VERDICT}) + "\n", encoding="utf-8")
        (tmp / "suites").mkdir()
        yield StandIns(tmp=tmp, openai=openai.base_url, reasoning=reasoning.base_url,
                       completions=completions.base_url, judge_script=judge_script, env=env, unset=unset)


def invoke(argv: list[str], cwd: Path) -> tuple[int, str, str, str | None]:
    """(exit status, output, stdout, traceback) of `finharness ARGV` run in-process in `cwd`."""
    environ = dict(os.environ)
    try:
        with contextlib.chdir(cwd):
            result = CliRunner().invoke(app, argv, catch_exceptions=True)
    finally:  # as a process's would: `run --no-pull` sets FINHARNESS_NO_PULL for the rest of its life
        os.environ.clear()
        os.environ.update(environ)
    tb = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        tb = "".join(traceback.format_exception(result.exception))
    elif "Traceback (most recent call last)" in result.output:
        tb = result.output
    return result.exit_code, result.output, result.stdout, tb
